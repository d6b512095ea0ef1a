// internal: wires to soft devices in other processes (same host: unix socket for control
// plus cross-process single copies) and other hosts (TCP). One endpoint per open device:
// a listener and one I/O thread (epoll) serve every incoming connection and every QP on
// them; outgoing connections are cached per remote device and used by the executor, one
// WQE at a time per connection (stop-and-wait).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "../engine/wqe_parse.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::soft {
struct soft_device;
struct soft_qp;
}  // namespace gdaki::soft

namespace gdaki::soft::wire {

using address = std::array<uint8_t, 16>;

// True if `av` names a soft device of another process (a wire address that is not ours).
bool is_remote(const verbs::address& av);

struct outcome {
  enum kind : uint8_t { done, retry, fatal, rnr } what = done;
  prm::syndrome synd = prm::syndrome::none;  // done: the CQE's syndrome
  uint8_t rnr_timer = 0;
};

struct server_conn;
struct client_conn;

class endpoint {
 public:
  explicit endpoint(soft_device& d);
  ~endpoint();  // stops the I/O thread and closes every connection
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  // Starts listening (once). Returns false with *why on failure.
  bool listen(std::string* why);
  address local_address();

  // Executes w (parsed; local keys checked) at the remote peer of qp. The caller holds
  // qp.exec_mu and the key table's shared lock (so the local buffers stay registered).
  outcome execute(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w);

 private:
  void run();
  void accept_one(int lfd, bool unix_sock);
  bool serve_frame(server_conn& c);  // false: close the connection
  void close_conn(int fd, bool poison);
  std::shared_ptr<client_conn> client(const address& a, std::string* why);

  soft_device& dev_;
  std::mutex mu_;
  std::atomic<bool> listening_{false};
  int tcp_fd_ = -1, unix_fd_ = -1, ep_fd_ = -1, stop_fd_ = -1;
  address addr_{};
  std::thread io_;
  std::unordered_map<int, std::unique_ptr<server_conn>> conns_;  // I/O thread only
  std::mutex clients_mu_;
  std::map<address, std::shared_ptr<client_conn>> clients_;
};

}  // namespace gdaki::soft::wire
