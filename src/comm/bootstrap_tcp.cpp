// The TCP rendezvous (ncclGetUniqueId's shape): rank 0 listens at the id's address; every
// other rank connects, and both prove the job secret before anything else is read:
//   rank 0 -> rank r  challenge {nonce_s}
//   rank r -> rank 0  hello     {magic, rank, size, nonce_c, HMAC(secret, "client" | job | nonce_s | nonce_c | rank)}
//   rank 0 -> rank r  welcome   {HMAC(secret, "server" | job | nonce_c | nonce_s)}
// Fresh nonces on both sides and distinct labels: no proof can be replayed. All-gathers are
// relayed by rank 0 (a star: few, small messages at setup, so the simplest shape wins).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "comm/listeners.hpp"
#include "gdaki/comm/bootstrap.hpp"
#include "gdaki/error.hpp"
#include "providers/soft/wire/sha256.hpp"

namespace gdaki::comm {
namespace detail {
namespace {
std::mutex g_listeners_mu;
std::map<uint16_t, int> g_listeners;
}  // namespace

int listen_on(const std::string& host, uint16_t port, uint16_t* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw error(status::io_error, "bootstrap: socket: " + std::string(std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    throw error(status::invalid, "bootstrap: '" + host + "' is not an IPv4 address");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::close(fd);
    throw error(status::io_error, "bootstrap: cannot listen on " + host + ":" + std::to_string(port) + ": " +
                                      std::strerror(e));
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = ntohs(a.sin_port);
  return fd;
}

uint16_t listen_and_keep(const std::string& host, uint16_t port) {
  uint16_t bound = 0;
  const int fd = listen_on(host, port, &bound);
  std::lock_guard<std::mutex> g(g_listeners_mu);
  g_listeners[bound] = fd;
  return bound;
}

int take_listener(uint16_t port) {
  std::lock_guard<std::mutex> g(g_listeners_mu);
  const auto it = g_listeners.find(port);
  if (it == g_listeners.end()) return -1;
  const int fd = it->second;
  g_listeners.erase(it);
  return fd;
}

}  // namespace detail

namespace {

using clock_type = std::chrono::steady_clock;
constexpr uint32_t hello_magic = 0x67636f6du;  // "gcom"

int ms_left(clock_type::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Sends or receives exactly n bytes by the deadline. Throws gdaki::error naming `who`.
void io_all(int fd, void* p, size_t n, bool send, clock_type::time_point deadline, const std::string& who) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    pollfd pf{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    const int r = ::poll(&pf, 1, ms_left(deadline));
    if (r == 0) throw error(status::timeout, "bootstrap: " + who + " did not " + (send ? "take" : "send") + " data in time");
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw error(status::io_error, "bootstrap: poll on " + who + ": " + std::strerror(errno));
    const ssize_t k = send ? ::send(fd, b, n, MSG_NOSIGNAL) : ::recv(fd, b, n, 0);
    if (k == 0) throw error(status::closed, "bootstrap: " + who + " closed the connection (process gone, or it refused us)");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw error(status::closed, "bootstrap: connection to " + who + " failed: " + std::strerror(errno));
    }
    b += k;
    n -= static_cast<size_t>(k);
  }
}

using digest = soft::wire::digest;

digest proof(const unique_id& id, const char* label, const uint8_t* n1, const uint8_t* n2, int32_t rank) {
  const soft::wire::byte_span parts[] = {{label, std::strlen(label)}, {id.job, sizeof(id.job)}, {n1, 16}, {n2, 16},
                                         {&rank, sizeof(rank)}};
  return soft::wire::hmac_sha256(id.secret, sizeof(id.secret), parts, 5);
}

bool same(const digest& a, const digest& b) {
  uint8_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<uint8_t>(a[i] ^ b[i]);
  return d == 0;
}

struct hello {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  uint8_t nonce_c[16];
  digest proof;
};

class tcp_bootstrap final : public bootstrap {
 public:
  tcp_bootstrap(const unique_id& id, int rank, int size, int timeout_ms)
      : id_(id), rank_(rank), size_(size), timeout_ms_(timeout_ms) {
    if (size < 1 || rank < 0 || rank >= size)
      throw error(status::invalid, "bootstrap: rank " + std::to_string(rank) + " of size " + std::to_string(size) +
                                       " is not a rank of the job");
    const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    if (rank == 0) {
      root_setup(deadline);
    } else {
      leaf_setup(deadline);
    }
  }
  ~tcp_bootstrap() override {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allgather(const void* mine, void* all, size_t bytes) override {
    const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms_);
    auto* out = static_cast<uint8_t*>(all);
    if (rank_ == 0) {
      std::memcpy(out, mine, bytes);
      for (int r = 1; r < size_; ++r) io_all(fds_[r], out + static_cast<size_t>(r) * bytes, bytes, false, deadline, name(r));
      for (int r = 1; r < size_; ++r) io_all(fds_[r], out, bytes * static_cast<size_t>(size_), true, deadline, name(r));
    } else {
      io_all(fds_[0], const_cast<void*>(mine), bytes, true, deadline, name(0));
      io_all(fds_[0], out, bytes * static_cast<size_t>(size_), false, deadline, name(0));
    }
  }

 private:
  std::string name(int r) const { return "rank " + std::to_string(r); }

  void root_setup(clock_type::time_point deadline) {
    fds_.assign(static_cast<size_t>(size_), -1);
    int lfd = detail::take_listener(id_.port);
    if (lfd < 0) {
      uint16_t bound = 0;
      lfd = detail::listen_on(id_.host, id_.port, &bound);
    }
    int joined = 0;
    try {
      while (joined < size_ - 1) {
        pollfd pf{lfd, POLLIN, 0};
        const int r = ::poll(&pf, 1, ms_left(deadline));
        if (r == 0) {
          std::string missing;
          for (int k = 1; k < size_; ++k)
            if (fds_[k] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
          throw error(status::timeout, "bootstrap: rank 0 waited " + std::to_string(timeout_ms_) + " ms at " +
                                           id_.host + ":" + std::to_string(id_.port) + " for rank(s) " + missing +
                                           " (not started, or holding another job's id or secret)");
        }
        if (r < 0) continue;
        const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        const int r_joined = authenticate_leaf(fd, deadline);
        if (r_joined < 0) {
          ::close(fd);  // a stray or a peer without the secret: refuse, keep waiting
          continue;
        }
        fds_[r_joined] = fd;
        ++joined;
      }
    } catch (...) {
      ::close(lfd);
      throw;
    }
    ::close(lfd);
  }

  // Returns the rank the peer proved to be, or -1 (refused).
  int authenticate_leaf(int fd, clock_type::time_point deadline) {
    // A stray that never speaks must not hold up the others: bounded by a short deadline.
    const auto hs_deadline = std::min(deadline, clock_type::now() + std::chrono::seconds(5));
    try {
      uint8_t nonce_s[16];
      if (::getrandom(nonce_s, sizeof(nonce_s), 0) != sizeof(nonce_s)) return -1;
      io_all(fd, nonce_s, sizeof(nonce_s), true, hs_deadline, "a joining rank");
      hello h{};
      io_all(fd, &h, sizeof(h), false, hs_deadline, "a joining rank");
      if (h.magic != hello_magic || h.size != size_ || h.rank <= 0 || h.rank >= size_ || fds_[h.rank] >= 0) return -1;
      if (!same(h.proof, proof(id_, "gdaki-comm client", nonce_s, h.nonce_c, h.rank))) return -1;
      digest w = proof(id_, "gdaki-comm server", h.nonce_c, nonce_s, h.rank);
      io_all(fd, w.data(), w.size(), true, hs_deadline, "rank " + std::to_string(h.rank));
      return h.rank;
    } catch (const error&) {
      return -1;
    }
  }

  void leaf_setup(clock_type::time_point deadline) {
    fds_.assign(1, -1);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(id_.port);
    if (::inet_pton(AF_INET, id_.host, &a.sin_addr) != 1)
      throw error(status::invalid, std::string("bootstrap: '") + id_.host + "' is not an IPv4 address");
    int fd = -1;
    while (true) {  // rank 0 may not listen yet: retry until the deadline
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) break;
      if (fd >= 0) ::close(fd);
      if (ms_left(deadline) == 0)
        throw error(status::timeout, "bootstrap: rank " + std::to_string(rank_) + " could not reach rank 0 at " +
                                         id_.host + ":" + std::to_string(id_.port) + " within " +
                                         std::to_string(timeout_ms_) + " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fds_[0] = fd;
    uint8_t nonce_s[16];
    io_all(fd, nonce_s, sizeof(nonce_s), false, deadline, name(0));
    hello h{};
    h.magic = hello_magic;
    h.rank = rank_;
    h.size = size_;
    if (::getrandom(h.nonce_c, sizeof(h.nonce_c), 0) != sizeof(h.nonce_c))
      throw error(status::io_error, "bootstrap: getrandom failed");
    h.proof = proof(id_, "gdaki-comm client", nonce_s, h.nonce_c, rank_);
    io_all(fd, &h, sizeof(h), true, deadline, name(0));
    digest w{};
    try {
      io_all(fd, w.data(), w.size(), false, deadline, name(0));
    } catch (const error& e) {
      throw error(e.code(), std::string(e.what()) + "; rank 0 refuses a rank that proves another secret or job id, "
                                                    "a rank number taken twice or a different WORLD_SIZE");
    }
    if (!same(w, proof(id_, "gdaki-comm server", h.nonce_c, nonce_s, rank_)))
      throw error(status::access, "bootstrap: the process at " + std::string(id_.host) + ":" + std::to_string(id_.port) +
                                      " did not prove the job secret: not this job's rank 0");
  }

  unique_id id_;
  int rank_, size_, timeout_ms_;
  std::vector<int> fds_;  // rank 0: one per rank (fds_[0] unused); others: fds_[0] to rank 0
};

}  // namespace

std::unique_ptr<bootstrap> bootstrap_tcp(const unique_id& id, int rank, int size, int timeout_ms) {
  return std::make_unique<tcp_bootstrap>(id, rank, size, timeout_ms);
}

}  // namespace gdaki::comm
