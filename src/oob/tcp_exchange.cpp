// The TCP rendezvous: 4-byte little-endian length, then the blob (at most 1 MiB).
#include "gdaki/oob/tcp_exchange.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "gdaki/error.hpp"

namespace gdaki::oob {

namespace {

constexpr uint32_t max_blob = 1u << 20;

sockaddr_in make_addr(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    throw error(status::invalid, "oob: '" + host + "' is not an IPv4 address");
  }
  return sa;
}

void wait_for(int fd, short ev, int timeout_ms, const char* what) {
  pollfd p{fd, ev, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) throw error(status::timeout, std::string("oob: timed out waiting to ") + what);
  if (r < 0) throw error(status::io_error, std::string("oob: poll: ") + std::strerror(errno));
}

void io_all(int fd, void* p, size_t n, bool out, int timeout_ms) {
  auto* b = static_cast<uint8_t*>(p);
  while (n != 0) {
    wait_for(fd, out ? POLLOUT : POLLIN, timeout_ms, out ? "send" : "receive");
    const ssize_t r = out ? ::send(fd, b, n, MSG_NOSIGNAL) : ::recv(fd, b, n, 0);
    if (r == 0) throw error(status::closed, "oob: the peer closed the connection");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw error(status::io_error, std::string("oob: ") + std::strerror(errno));
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace

tcp_exchange tcp_exchange::listen(const std::string& host, uint16_t port) {
  tcp_exchange x;
  x.listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(x.listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = make_addr(host, port);
  if (::bind(x.listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(x.listen_fd_, 4) != 0) {
    throw error(status::io_error, "oob: listen on " + host + ":" + std::to_string(port) + ": " + std::strerror(errno));
  }
  socklen_t l = sizeof(sa);
  ::getsockname(x.listen_fd_, reinterpret_cast<sockaddr*>(&sa), &l);
  x.port_ = ntohs(sa.sin_port);
  return x;
}

tcp_exchange tcp_exchange::connect(const std::string& host, uint16_t port, int timeout_ms) {
  const sockaddr_in sa = make_addr(host, port);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0) {
      tcp_exchange x;
      x.fd_ = fd;
      x.port_ = port;
      return x;
    }
    ::close(fd);
    if (std::chrono::steady_clock::now() > end) {
      throw error(status::timeout, "oob: cannot connect to " + host + ":" + std::to_string(port));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

tcp_exchange::tcp_exchange(tcp_exchange&& o) noexcept : listen_fd_(o.listen_fd_), fd_(o.fd_), port_(o.port_) {
  o.listen_fd_ = o.fd_ = -1;
}

tcp_exchange& tcp_exchange::operator=(tcp_exchange&& o) noexcept {
  if (this != &o) {
    this->~tcp_exchange();
    listen_fd_ = o.listen_fd_;
    fd_ = o.fd_;
    port_ = o.port_;
    o.listen_fd_ = o.fd_ = -1;
  }
  return *this;
}

tcp_exchange::~tcp_exchange() {
  if (fd_ >= 0) ::close(fd_);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void tcp_exchange::accept(int timeout_ms) {
  wait_for(listen_fd_, POLLIN, timeout_ms, "accept");
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) throw error(status::io_error, std::string("oob: accept: ") + std::strerror(errno));
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void tcp_exchange::send(const std::vector<uint8_t>& blob, int timeout_ms) {
  if (blob.size() > max_blob) throw error(status::invalid, "oob: blob larger than 1 MiB");
  uint32_t n = static_cast<uint32_t>(blob.size());
  io_all(fd_, &n, 4, true, timeout_ms);
  if (n != 0) io_all(fd_, const_cast<uint8_t*>(blob.data()), n, true, timeout_ms);
}

std::vector<uint8_t> tcp_exchange::recv(int timeout_ms) {
  uint32_t n = 0;
  io_all(fd_, &n, 4, false, timeout_ms);
  if (n > max_blob) throw error(status::invalid, "oob: the peer announced a blob larger than 1 MiB");
  std::vector<uint8_t> b(n);
  if (n != 0) io_all(fd_, b.data(), n, false, timeout_ms);
  return b;
}

std::vector<uint8_t> tcp_exchange::exchange(const std::vector<uint8_t>& blob, int timeout_ms) {
  send(blob, timeout_ms);
  return recv(timeout_ms);
}

}  // namespace gdaki::oob
