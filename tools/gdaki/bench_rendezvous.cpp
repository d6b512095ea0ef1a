// TCP rendezvous for `gdaki bench` server/client mode (bench_rendezvous.hpp).
#include "bench_rendezvous.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace gdaki::tool::bench {
namespace {

int poll_ms(double timeout_s) { return timeout_s <= 0 ? -1 : static_cast<int>(timeout_s * 1000); }

bool wait_fd(int fd, short events, double timeout_s) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, poll_ms(timeout_s));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

}  // namespace

oob_socket::~oob_socket() {
  if (fd_ >= 0) ::close(fd_);
}

oob_socket& oob_socket::operator=(oob_socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

oob_socket listen_on(uint16_t port, std::string* why) {
  oob_socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool v6 = true;
  if (!s) {  // no IPv6 in this container: IPv4 only
    s = oob_socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    v6 = false;
  }
  if (!s) {
    *why = std::string("socket: ") + std::strerror(errno);
    return {};
  }
  // Reuse a port a previous run left in TIME_WAIT; a port another process listens on
  // still fails, which is the error worth reporting.
  const int one = 1, zero = 0;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // accept IPv4 clients too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(port);
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(s.fd(), 1) != 0) {
    const int e = errno;
    *why = "cannot listen on port " + std::to_string(port) + ": " + std::strerror(e) +
           (e == EADDRINUSE ? " (the port is in use: pick another with -p)" : "");
    return {};
  }
  return s;
}

oob_socket accept_one(const oob_socket& listener, double timeout_s, std::string* why) {
  if (!wait_fd(listener.fd(), POLLIN, timeout_s)) {
    *why = "no client connected within " + std::to_string(static_cast<int>(timeout_s)) + " s";
    return {};
  }
  oob_socket c(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!c) *why = std::string("accept: ") + std::strerror(errno);
  return c;
}

namespace {

// "host:port" of a connected socket's peer, for the refusal line; read at accept time
// (once the peer has closed, getpeername fails). IPv4 peers of the dual-stack listener
// show as plain IPv4.
std::string peer_name(const oob_socket& s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "an unknown peer";
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown peer";
  }
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7);
  return h + ":" + port;
}

}  // namespace

oob_socket accept_client(const oob_socket& listener, double timeout_s, const nlohmann::json& hello,
                         nlohmann::json* theirs, std::string* why) {
  using clock = std::chrono::steady_clock;
  constexpr double hello_timeout_s = 10;  // a real client sends its hello at once
  const auto start = clock::now();
  while (true) {
    double left = 0;  // 0: no deadline
    if (timeout_s > 0) {
      left = timeout_s - std::chrono::duration<double>(clock::now() - start).count();
      if (left <= 0) {
        *why = "no gdaki bench client connected within " + std::to_string(static_cast<int>(timeout_s)) + " s";
        return {};
      }
    }
    oob_socket c = accept_one(listener, left, why);
    if (!c) {
      if (timeout_s > 0 && std::chrono::duration<double>(clock::now() - start).count() >= timeout_s) {
        *why = "no gdaki bench client connected within " + std::to_string(static_cast<int>(timeout_s)) + " s";
      }
      return {};
    }
    const std::string from = peer_name(c);
    std::string refused;
    const double hello_s = left > 0 ? std::min(left, hello_timeout_s) : hello_timeout_s;
    if (exchange(c, hello, theirs, hello_s, &refused)) return c;
    std::fprintf(stderr, "gdaki bench: refused a connection from %s (%s); still waiting for a client\n",
                 from.c_str(), refused.c_str());
  }
}

oob_socket connect_to(const std::string& host, uint16_t port, double timeout_s, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int g = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (g != 0) {
    *why = "cannot reach " + host + ":" + service + ": cannot resolve the host name (" + ::gai_strerror(g) + ")";
    return {};
  }
  std::string last = "no address";
  oob_socket out;
  for (addrinfo* ai = res; ai != nullptr && !out; ai = ai->ai_next) {
    oob_socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!s) continue;
    // Non-blocking connect so an unroutable host fails after timeout_s, not the kernel's
    // two minutes.
    if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = std::strerror(errno);
      continue;
    }
    if (!wait_fd(s.fd(), POLLOUT, timeout_s)) {
      last = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      last = std::strerror(err);
      continue;
    }
    ::fcntl(s.fd(), F_SETFL, ::fcntl(s.fd(), F_GETFL) & ~O_NONBLOCK);
    out = std::move(s);
  }
  ::freeaddrinfo(res);
  if (!out) *why = "cannot reach " + host + ":" + service + ": " + last + " (is `gdaki bench --server` running there?)";
  return out;
}

bool send_json(const oob_socket& s, const nlohmann::json& j, std::string* why) {
  const std::string line = j.dump() + "\n";
  for (size_t off = 0; off < line.size();) {
    const ssize_t n = ::send(s.fd(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      *why = std::string("rendezvous: send: ") + std::strerror(errno);
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

bool recv_json(const oob_socket& s, nlohmann::json* j, double timeout_s, std::string* why) {
  std::string in;
  char c;
  while (true) {
    if (!wait_fd(s.fd(), POLLIN, timeout_s)) {
      *why = "rendezvous: the peer sent nothing within " + std::to_string(static_cast<int>(timeout_s)) + " s";
      return false;
    }
    const ssize_t n = ::recv(s.fd(), &c, 1, 0);
    if (n <= 0) {
      *why = "rendezvous: the peer closed the connection";
      return false;
    }
    if (c == '\n') break;
    if (in.size() > 65536) {
      *why = "rendezvous: the peer's message is too long (not gdaki bench?)";
      return false;
    }
    in += c;
  }
  *j = nlohmann::json::parse(in, nullptr, false);
  if (j->is_discarded() || !j->is_object() || !j->contains("gdaki_bench")) {
    *why = "rendezvous: the peer did not speak the gdaki bench protocol";
    return false;
  }
  return true;
}

bool exchange(const oob_socket& s, const nlohmann::json& mine, nlohmann::json* theirs, double timeout_s,
              std::string* why) {
  return send_json(s, mine, why) && recv_json(s, theirs, timeout_s, why);
}

bool wire_available(const std::string& wire, std::string* why) {
#ifdef GDAKI_HAVE_SOFT_WIRE
  (void)wire;
  (void)why;
  return true;
#else
  *why = "cross-process mode needs the soft NIC wire: not available in this build (wire '" + wire +
         "'; run without -c/--server for the in-process loopback)";
  return false;
#endif
}

}  // namespace gdaki::tool::bench
