// A tiny out-of-band channel for connection setup: two processes exchange length-prefixed
// blobs (QPN, wire address, token, rkeys ...) over one TCP connection. For examples and
// tests; the communicator's bootstrap reuses it. Not a data path: blocking, small messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gdaki::oob {

class tcp_exchange {
 public:
  // Server side, step 1: listens on host:port (port 0 = any free port; read it with
  // port()). Throws gdaki::error (io_error) when the address cannot be bound.
  static tcp_exchange listen(const std::string& host, uint16_t port = 0);
  // Client side: connects to host:port, retrying until timeout_ms has passed (the server
  // may not listen yet). Throws gdaki::error (timeout).
  static tcp_exchange connect(const std::string& host, uint16_t port, int timeout_ms = 10000);

  tcp_exchange() = default;
  tcp_exchange(tcp_exchange&& o) noexcept;
  tcp_exchange& operator=(tcp_exchange&& o) noexcept;
  tcp_exchange(const tcp_exchange&) = delete;
  tcp_exchange& operator=(const tcp_exchange&) = delete;
  ~tcp_exchange();

  uint16_t port() const { return port_; }

  // Server side, step 2: waits for one client (timeout_ms) and keeps its connection.
  // Throws gdaki::error (timeout).
  void accept(int timeout_ms = 10000);

  // Sends `blob` and returns the peer's (both sides call it). Throws gdaki::error
  // (io_error, timeout; closed when the peer has gone).
  std::vector<uint8_t> exchange(const std::vector<uint8_t>& blob, int timeout_ms = 10000);
  void send(const std::vector<uint8_t>& blob, int timeout_ms = 10000);
  std::vector<uint8_t> recv(int timeout_ms = 10000);

 private:
  int listen_fd_ = -1;
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace gdaki::oob
