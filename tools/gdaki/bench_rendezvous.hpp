// The out-of-band rendezvous of `gdaki bench` across processes or hosts, as perftest does
// it: the server listens on a TCP port (-p, default 18515), the client connects (-c HOST),
// and each side sends one JSON line describing its test and its QP (QPN, buffer address,
// rkey). The data then moves over the soft NIC's cross-process wire (shm or tcp).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace gdaki::tool::bench {

// A connected TCP socket, closed on destruction.
class oob_socket {
 public:
  oob_socket() = default;
  explicit oob_socket(int fd) : fd_(fd) {}
  ~oob_socket();
  oob_socket(oob_socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  oob_socket& operator=(oob_socket&& o) noexcept;
  oob_socket(const oob_socket&) = delete;
  oob_socket& operator=(const oob_socket&) = delete;
  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Binds and listens on `port` (all addresses). Returns an invalid socket with *why set,
// e.g. "port 18515 is in use (Address already in use): pick another with -p".
oob_socket listen_on(uint16_t port, std::string* why);

// Waits up to timeout_s (0 = forever) for one client.
oob_socket accept_one(const oob_socket& listener, double timeout_s, std::string* why);

// The server's wait: accepts until a client answers `hello` with the gdaki bench protocol
// (its line in *theirs), within timeout_s (0 = forever). A connection that does not (a
// port scanner, a stray nc, an HTTP probe) is refused with a line on stderr and the wait
// goes on, so one stray connection does not end a server whose real client is yet to come.
oob_socket accept_client(const oob_socket& listener, double timeout_s, const nlohmann::json& hello,
                         nlohmann::json* theirs, std::string* why);

// Connects to host:port within timeout_s; *why names the host and the cause when it fails
// ("cannot reach 10.0.0.9:18515: Connection refused").
oob_socket connect_to(const std::string& host, uint16_t port, double timeout_s, std::string* why);

// One JSON line each way; false with *why on a closed connection, a timeout or a line
// that is not the gdaki bench protocol.
bool send_json(const oob_socket& s, const nlohmann::json& j, std::string* why);
bool recv_json(const oob_socket& s, nlohmann::json* j, double timeout_s, std::string* why);

// Sends `mine` as one line and reads the peer's line (both within timeout_s).
bool exchange(const oob_socket& s, const nlohmann::json& mine, nlohmann::json* theirs, double timeout_s,
              std::string* why);

// Whether this build can carry data across processes on `wire` (shm, tcp). False with
// *why until the soft NIC's cross-process wire is part of the library.
bool wire_available(const std::string& wire, std::string* why);

}  // namespace gdaki::tool::bench
