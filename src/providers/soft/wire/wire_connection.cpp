// The soft wire's connections (docs/soft-nic.md "Wires" and "Security"): the listener
// and the device's one I/O thread, which serves every incoming connection in rounds of
// bounded turns (design.md 20); the handshake, in which both sides prove the job's secret
// before any other frame is read; and the outgoing connections a requester dials and
// caches per remote device. Once a peer is authenticated its frames go to the responder
// (wire_responder.cpp); requests go out from the requester (wire_requester.cpp).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../engine/executor.hpp"
#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "wire.hpp"
#include "wire_auth.hpp"
#include "wire_frame.hpp"
#include "wire_internal.hpp"
#include "wire_proto.hpp"
#include "wire_test_hooks.hpp"
#include "wire_transport.hpp"

namespace gdaki::soft::wire {

namespace {

constexpr uint8_t addr_marker0 = 0x50, addr_marker1 = 0xf7, addr_version = 1;

uint16_t host_id() {
  // Two bytes of the boot id: equal ids mean "probably the same host"; a false match only
  // costs a failed unix-socket connect, after which auto mode falls back to TCP.
  static const uint16_t id = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string s;
    std::getline(f, s);
    uint32_t h = 2166136261u;
    for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
    return static_cast<uint16_t>(h ^ (h >> 16));
  }();
  return id;
}

struct parsed_address {
  uint8_t dev_index = 0;
  uint32_t ipv4_be = 0;
  uint16_t port = 0;
  uint32_t pid = 0;
  uint16_t host = 0;
};

bool parse_address(const uint8_t* a, parsed_address* out) {
  if (a[0] != addr_marker0 || a[1] != addr_marker1 || a[2] != addr_version) return false;
  out->dev_index = a[3];
  std::memcpy(&out->ipv4_be, a + 4, 4);
  out->port = static_cast<uint16_t>((a[8] << 8) | a[9]);
  out->pid = (uint32_t{a[10]} << 24) | (uint32_t{a[11]} << 16) | (uint32_t{a[12]} << 8) | a[13];
  out->host = static_cast<uint16_t>((a[14] << 8) | a[15]);
  return true;
}

std::string unix_name(uint32_t pid, uint32_t dev_index) {
  // Abstract namespace: nothing to clean up on a crash; scoped to the network namespace.
  return std::string(1, '\0') + "gdaki-soft-" + std::to_string(pid) + "-" + std::to_string(dev_index);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Tries a cross-process copy from the peer itself: reads the nonce it holds at probe_addr.
// Fails where the kernel lacks CMA, or a policy (Yama ptrace_scope >= 1 without
// CAP_SYS_PTRACE, another user id) forbids it for this peer, which a probe of ourselves
// would not reveal. *err: the errno (0: the bytes differed).
bool cma_probe(pid_t pid, uint64_t probe_addr, const auth::nonce& expect, int* err) {
  *err = 0;
  if (test_hooks::refuse_cma.load(std::memory_order_relaxed)) {
    *err = EPERM;
    return false;
  }
  auth::nonce got{};
  iovec l{got.data(), got.size()}, r{reinterpret_cast<void*>(probe_addr), got.size()};
  const ssize_t n = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
  if (n < 0) *err = errno;
  return n == static_cast<ssize_t>(got.size()) && got == expect;
}

}  // namespace

bool is_remote(const verbs::address& av) {
  parsed_address p;
  if (!av.is_global || !parse_address(av.dgid, &p)) return false;
  return !(p.pid == static_cast<uint32_t>(::getpid()) && p.host == host_id());
}

// ---- the endpoint: listening, the I/O loop, accepting and authenticating peers ----------

endpoint::endpoint(soft_device& d) : dev_(d) {}

endpoint::~endpoint() {
  if (io_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    io_.join();
  }
  for (auto& [fd, c] : conns_) ::close(fd);
  for (int fd : {tcp_fd_, unix_fd_, ep_fd_, stop_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool endpoint::listen(std::string* why) {
  std::lock_guard lk(mu_);
  if (listening_.load(std::memory_order_relaxed)) return true;
  // No wire without a usable secret: a bad key file fails here, naming the cause.
  std::vector<uint8_t> secret;
  if (!auth::current_secret(&secret, why)) {
    *why = "cannot authenticate peers: " + *why;
    return false;
  }
  in_addr ia{};
  if (::inet_pton(AF_INET, dev_.cfg.listen_addr.c_str(), &ia) != 1) {
    *why = "listen address '" + dev_.cfg.listen_addr + "' is not an IPv4 address";
    return false;
  }
  tcp_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);  // accept_some drains it
  const int one = 1;
  ::setsockopt(tcp_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = ia;
  sa.sin_port = htons(static_cast<uint16_t>(dev_.cfg.listen_port));
  if (::bind(tcp_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(tcp_fd_, 64) != 0) {
    *why = "listening on " + dev_.cfg.listen_addr + ":" + std::to_string(dev_.cfg.listen_port) + ": " + std::strerror(errno);
    ::close(tcp_fd_);
    tcp_fd_ = -1;
    return false;
  }
  socklen_t sl = sizeof(sa);
  ::getsockname(tcp_fd_, reinterpret_cast<sockaddr*>(&sa), &sl);
  // The same-host control socket. Failure is not fatal: peers then use TCP.
  if (dev_.cfg.wire != "tcp") {
    unix_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un su{};
    su.sun_family = AF_UNIX;
    const std::string n = unix_name(static_cast<uint32_t>(::getpid()), dev_.index);
    std::memcpy(su.sun_path, n.data(), n.size());
    if (::bind(unix_fd_, reinterpret_cast<sockaddr*>(&su), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n.size())) != 0 ||
        ::listen(unix_fd_, 64) != 0) {
      ::close(unix_fd_);
      unix_fd_ = -1;
    }
  }
  ep_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (int fd : {tcp_fd_, unix_fd_, stop_fd_}) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  // The address: marker, version, device, IPv4, port, pid, host id (docs/wire-protocol.md).
  uint32_t adv = sa.sin_addr.s_addr;
  if (adv == htonl(INADDR_ANY)) adv = htonl(INADDR_LOOPBACK);  // 0.0.0.0 cannot be dialled
  const uint16_t port = ntohs(sa.sin_port);
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  const uint16_t host = host_id();
  addr_ = {addr_marker0, addr_marker1, addr_version, static_cast<uint8_t>(dev_.index)};
  std::memcpy(addr_.data() + 4, &adv, 4);
  addr_[8] = static_cast<uint8_t>(port >> 8);
  addr_[9] = static_cast<uint8_t>(port);
  for (int i = 0; i < 4; ++i) addr_[10 + i] = static_cast<uint8_t>(pid >> (24 - 8 * i));
  addr_[14] = static_cast<uint8_t>(host >> 8);
  addr_[15] = static_cast<uint8_t>(host);
  io_ = std::thread([this] { run(); });
  listening_.store(true, std::memory_order_release);
  return true;
}

address endpoint::local_address() {
  std::lock_guard lk(mu_);
  return addr_;
}

void endpoint::run() {
  epoll_event evs[64];
  std::vector<int> round, backlog;  // connections to serve this round; with work left over
  std::vector<server_conn*> later;  // this round's connections still proving the secret
  for (handshake_budget& b : budgets_) b.at_ns = now_ns();
  for (;;) {
    int until = expire_handshakes();
    const int64_t now = now_ns();  // one clock read per round for both budgets
    for (const bool unix_sock : {false, true}) {
      handshake_budget& b = budgets_[unix_sock];
      if (earn(b, now, handshake_share)) {
        if (b.parked || !b.waiting.empty()) unpark(unix_sock, backlog);
        continue;
      }
      // Spent: its peers still proving the secret wait outside the epoll set until it is
      // earned back (one part in handshake_share of the time that passes).
      if (!b.parked) park(unix_sock);
      const int earned_ms = static_cast<int>(-b.credit_ns * handshake_share / 1'000'000) + 1;
      until = until < 0 ? earned_ms : std::min(until, earned_ms);
    }
    // Failing peers parked while their budget was spent come back once it is earned.
    if (handshake_budget& f = budgets_[failing_budget]; earn(f, now, failing_share)) {
      if (!f.waiting.empty()) unpark_connections(f, backlog);
    } else if (!f.waiting.empty()) {
      const int earned_ms = static_cast<int>(-f.credit_ns * failing_share / 1'000'000) + 1;
      until = until < 0 ? earned_ms : std::min(until, earned_ms);
    }
    // Work left over (bytes already buffered, or a turn cut short): look, do not wait.
    const int n = ::epoll_wait(ep_fd_, evs, 64, !backlog.empty() ? 0 : until);
    if (n < 0 && errno != EINTR) return;
    round.swap(backlog);
    backlog.clear();
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == stop_fd_) return;
      if (fd == tcp_fd_ || fd == unix_fd_) {
        handshake_budget& b = budgets_[fd == unix_fd_];
        if (b.credit_ns <= 0) continue;  // parked after this wait returned
        const int64_t t0 = now_ns();
        accept_some(fd, fd == unix_fd_);
        spend(b, now_ns() - t0, test_hooks::handshake_ns);
      } else {
        round.push_back(fd);
      }
    }
    std::sort(round.begin(), round.end());
    round.erase(std::unique(round.begin(), round.end()), round.end());
    // One turn each, authenticated peers first; the others share a few handshake frames
    // per round, so a flood of connections costs honest peers a bounded share.
    later.clear();
    auto serve = [&](server_conn& c, int budget) {
      const int fd = c.fd;
      const bool was_authenticated = c.stage == conn_stage::authenticated;
      const turn t = serve_ready(c, budget);
      if (!was_authenticated && c.stage == conn_stage::authenticated) --unauthenticated_;
      if (t == turn::closed) {
        // A frame that breaks the protocol after authentication moves every QP bound on
        // the connection to ERR; an unauthenticated peer has none, and a peer that just
        // hung up is not an error of the responder (RC responders are silent): a process
        // that finished and closed must not flush the receives its peer still has posted
        // (ibv_rc_pingpong -e failed on this; tests/verbs).
        close_conn(fd, !c.hung_up);
        return;
      }
      if (t == turn::more) backlog.push_back(fd);
    };
    for (int fd : round) {
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      if (it->second->stage != conn_stage::authenticated) {
        later.push_back(it->second.get());
        continue;
      }
      server_conn& c = *it->second;
      if (!c.unproductive) {
        serve(c, frames_per_turn);
        continue;
      }
      // Its last request failed: a short turn, paid from the failing peers' budget.
      handshake_budget& f = budgets_[failing_budget];
      if (f.credit_ns <= 0) {
        park_connection(c, f);
        continue;
      }
      const int64_t t0 = now_ns();
      serve(c, frames_per_unproductive_turn);  // may close c
      spend(f, now_ns() - t0, test_hooks::failing_ns);
    }
    int handshakes = handshakes_per_round;
    for (server_conn* c : later) {
      if (handshakes == 0) {
        backlog.push_back(c->fd);  // next round
        continue;
      }
      handshake_budget& b = budgets_[c->unix_sock];
      if (b.credit_ns <= 0) {
        park_connection(*c, b);
        continue;
      }
      --handshakes;
      const int64_t t0 = now_ns();
      serve(*c, 1);  // may close c
      spend(b, now_ns() - t0, test_hooks::handshake_ns);
    }
  }
}

bool endpoint::earn(handshake_budget& b, int64_t now, int64_t share) {
  b.credit_ns = std::min(handshake_burst_ns, b.credit_ns + (now - b.at_ns) / share);
  b.at_ns = now;
  return b.credit_ns > 0;
}

void endpoint::spend(handshake_budget& b, int64_t ns, std::atomic<uint64_t>& counter) {
  b.credit_ns -= ns;
  counter.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

void endpoint::park(bool unix_sock) {
  // Out of the epoll set rather than masked: a masked socket still reports a hang-up,
  // which would wake this loop for a connection it is not going to serve.
  const int fd = unix_sock ? unix_fd_ : tcp_fd_;
  if (fd >= 0) ::epoll_ctl(ep_fd_, EPOLL_CTL_DEL, fd, nullptr);
  budgets_[unix_sock].parked = true;
}

void endpoint::park_connection(const server_conn& c, handshake_budget& b) {
  ::epoll_ctl(ep_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  b.waiting.emplace_back(c.fd, c.serial);
}

void endpoint::unpark(bool unix_sock, std::vector<int>& serve) {
  handshake_budget& b = budgets_[unix_sock];
  const int lfd = unix_sock ? unix_fd_ : tcp_fd_;
  if (b.parked && lfd >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, lfd, &ev);
  }
  unpark_connections(b, serve);
  b.parked = false;
}

void endpoint::unpark_connections(handshake_budget& b, std::vector<int>& serve) {
  for (const auto& [fd, serial] : b.waiting) {
    // Closed meanwhile (its time ran out) or the number reused: not ours to re-arm.
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second->serial != serial) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, fd, &ev);
    serve.push_back(fd);
  }
  b.waiting.clear();
}

void endpoint::accept_some(int lfd, bool unix_sock) {
  // A few per round: a connection flood fills the kernel's queue, not this loop.
  for (int i = 0; i < handshakes_per_round; ++i) {
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    accept_one(fd, unix_sock);
  }
}

int endpoint::expire_handshakes() {
  const uint64_t now = now_ms();
  while (!handshakes_.empty()) {
    const auto [fd, serial] = handshakes_.front();
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second->serial != serial || it->second->stage == conn_stage::authenticated) {
      handshakes_.pop_front();  // gone or done
      continue;
    }
    if (it->second->handshake_deadline > now && unauthenticated_ <= max_unauthenticated) {
      return static_cast<int>(it->second->handshake_deadline - now);
    }
    // Too slow to prove the secret, or the oldest of too many that have not: dropped
    // without a word (refusing would cost a write to a peer that may not read).
    handshakes_.pop_front();
    close_conn(fd, false);
  }
  return -1;
}

void endpoint::accept_one(int fd, bool unix_sock) {
  tune(fd, !unix_sock);
  auto c = std::make_unique<server_conn>();
  c->fd = fd;
  c->unix_sock = unix_sock;
  c->serial = ++next_serial_;
  c->handshake_deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  bool other_user = false;
  if (unix_sock) {
    ucred cr{};
    socklen_t l = sizeof(cr);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0) {
      c->pid = cr.pid;
      c->uid = cr.uid;
      other_user = cr.uid != ::geteuid();
    } else {
      other_user = true;  // no credentials: treat as a stranger
    }
    c->peer = "pid " + std::to_string(c->pid) + " uid " + std::to_string(c->uid) + " (unix socket)";
  } else {
    sockaddr_in sa{};
    socklen_t l = sizeof(sa);
    char ip[INET_ADDRSTRLEN] = "?";
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &l) == 0) ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
    c->peer = std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port)) + " (tcp)";
  }
  if (other_user && !dev_.cfg.allow_other_users) {
    // Refused before it may say anything: a user id that is not ours (SO_PEERCRED).
    refuse(*c, auth::reason::other_user);
    ::close(fd);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, fd, &ev);
  handshakes_.emplace_back(fd, c->serial);
  ++unauthenticated_;
  conns_[fd] = std::move(c);
  if (unauthenticated_ > max_unauthenticated) (void)expire_handshakes();  // drops the oldest
}

void endpoint::close_conn(int fd, bool poison) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (poison) {
    for (const auto& [k, psn] : it->second->expect) {
      std::shared_ptr<soft_qp> q = qps().find(static_cast<uint32_t>(k));
      if (!q || q->dev != &dev_) continue;
      std::lock_guard lk(q->resp_mu);
      if (!q->destroyed) enter_error_locked_resp(*q);
    }
  }
  if (it->second->stage != conn_stage::authenticated) --unauthenticated_;
  ::epoll_ctl(ep_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_.erase(it);
}

void endpoint::refuse(server_conn& c, auth::reason why) {
  // Logged first, so the record exists by the time the peer reads the refusal. Then, best
  // effort, the peer learns why (its log says so); the caller closes.
  auth::report(log_name() + " refused a connection from " + c.peer + ": " + auth::describe(why));
  frame_hdr r = make_hdr(ftype::auth_nak, sizeof(auth_nak_body), 0, 0, 0);
  auth_nak_body b{static_cast<uint32_t>(why), 0};
  iovec v[2] = {{&r, sizeof(r)}, {&b, sizeof(b)}};
  const uint64_t deadline = now_ms() + 100;
  if (flush_queued(c.fd, c.tx, deadline)) (void)writev_full(c.fd, v, 2, deadline);
}

bool endpoint::handshake_frame(server_conn& c, const frame_hdr& h, uint64_t deadline) {
  std::vector<uint8_t> secret;
  std::string why;
  if (!auth::current_secret(&secret, &why)) {
    auth::report(log_name() + ": cannot authenticate peers: " + why);
    return false;
  }
  if (static_cast<ftype>(h.type) == ftype::hello) {
    hello_body b{};
    if (!rx_read(c.fd, c.rx, &b, sizeof(b), deadline)) return false;
    for (uint32_t n = test_hooks::drop_handshakes.load(std::memory_order_relaxed); n != 0;) {
      if (test_hooks::drop_handshakes.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return false;
    }
    std::memcpy(c.nonce_c.data(), b.nonce, 16);
    c.nonce_s = auth::fresh_nonce();
    c.want_cma = b.want_cma != 0;
    c.probe_addr = b.probe_addr;
    challenge_body cb{};
    std::memcpy(cb.nonce, c.nonce_s.data(), 16);
    const digest p = auth::server_proof(secret, c.nonce_c, c.nonce_s);
    std::memcpy(cb.proof, p.data(), 32);
    c.stage = conn_stage::challenged;
    frame_hdr r = make_hdr(ftype::challenge, sizeof(cb), 0, 0, h.seq);
    iovec v[2] = {{&r, sizeof(r)}, {&cb, sizeof(cb)}};
    return send_queued(c.fd, c.tx, v, 2, deadline);
  }
  auth_body a{};
  if (!rx_read(c.fd, c.rx, &a, sizeof(a), deadline)) return false;
  digest got;
  std::memcpy(got.data(), a.proof, 32);
  if (!auth::digest_equal(got, auth::client_proof(secret, c.nonce_s, c.nonce_c))) {
    const bool zero = auth::digest_equal(got, auth::client_proof(std::vector<uint8_t>(32, 0), c.nonce_s, c.nonce_c));
    refuse(c, zero ? auth::reason::zero_secret : auth::reason::wrong_secret);
    return false;
  }
  c.stage = conn_stage::authenticated;
  c.cma = false;
  if (c.unix_sock && c.pid > 0 && c.want_cma && dev_.cfg.wire != "tcp") {
    int err = 0;
    c.cma = cma_probe(c.pid, c.probe_addr, c.nonce_c, &err);
    static std::atomic<bool> said{false};
    if (!c.cma && !said.exchange(true)) {
      auth::report(log_name() + ": cross-memory attach to pid " + std::to_string(c.pid) + " refused (" +
                   (err != 0 ? std::string(std::strerror(err)) : std::string("read back wrong bytes")) +
                   "; e.g. Yama ptrace_scope >= 1): same-host payloads travel in frames instead (said once)");
    }
  }
  frame_hdr r = make_hdr(ftype::hello_ok, sizeof(hello_ok_body), 0, 0, h.seq);
  hello_ok_body ob{c.cma ? 1u : 0u, 0};
  iovec v[2] = {{&r, sizeof(r)}, {&ob, sizeof(ob)}};
  return send_queued(c.fd, c.tx, v, 2, deadline);
}

endpoint::turn endpoint::serve_ready(server_conn& c, int budget) {
  // Several frames per turn, not just one: a pipelined peer sends many back to back, and
  // a wake-up per frame would cost more than the frames. Not all of them: the others wait.
  // Bytes left in rx would never wake epoll again, so a turn cut short says `more`.
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  for (int served = 0;; ++served) {
    if (served == budget) return flush_queued(c.fd, c.tx, deadline) ? turn::more : turn::closed;
    // A frame is started only once it can be read without waiting on the peer: its header
    // (its body may still be on the way), or, before the peer proved the secret, all of it.
    size_t need = sizeof(frame_hdr);
    for (int fills = 0;; ++fills) {
      frame_hdr h{};
      if (c.rx.size() >= sizeof(frame_hdr) && c.stage != conn_stage::authenticated) {
        // (A header the handshake does not accept is refused at once.)
        if (parse_header(c.rx.b + c.rx.head, sizeof(frame_hdr), &h) && server_accepts(h, c.stage)) {
          need = std::min(sizeof(frame_hdr) + size_t{h.length}, rx_buffer::cap);
        }
      }
      if (c.rx.size() >= need) break;
      const int f = fills < 2 ? rx_fill(c.fd, c.rx) : 0;
      if (f < 0) {
        c.hung_up = true;  // the peer left between frames; it did not break the protocol
        return turn::closed;
      }
      if (f == 0) return flush_queued(c.fd, c.tx, deadline) ? turn::idle : turn::closed;
    }
    if (!serve_frame(c)) return turn::closed;
  }
}

// ---- dialling a peer: our side of the handshake -----------------------------------------

std::string endpoint::log_name() const {
  return "soft" + std::to_string(dev_.index) + " (pid " + std::to_string(::getpid()) + ")";
}

namespace {

std::string describe_peer(const parsed_address& p, bool unix_sock) {
  return "soft" + std::to_string(p.dev_index) + " of pid " + std::to_string(p.pid) + (unix_sock ? " (unix socket)" : " (tcp)");
}

}  // namespace

bool endpoint::handshake(int fd, bool unix_sock, const void* peer_addr, uint64_t deadline, bool* cma, std::string* why,
                         bool* dropped) {
  parsed_address p;
  parse_address(static_cast<const uint8_t*>(peer_addr), &p);
  const std::string peer = describe_peer(p, unix_sock);
  std::vector<uint8_t> secret;
  if (!auth::current_secret(&secret, why)) {
    *why = "cannot authenticate to " + peer + ": " + *why;
    auth::report(log_name() + ": " + *why);
    return false;
  }
  if (unix_sock && !dev_.cfg.allow_other_users) {
    // The listener's user id: an abstract name can be bound by anyone, so check who did.
    ucred cr{};
    socklen_t l = sizeof(cr);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0 || cr.uid != ::geteuid()) {
      *why = peer + " runs as uid " + std::to_string(cr.uid) + ", not as this user: " + auth::describe(auth::reason::other_user);
      auth::report(log_name() + " refused " + *why);
      return false;
    }
  }
  auto refused = [&](auth::reason r) {
    *why = peer + " refused this connection: " + auth::describe(r);
    auth::report(log_name() + ": " + *why);
    return false;
  };
  auto read_refusal = [&] {
    auth_nak_body nb{};
    if (!read_full(fd, &nb, sizeof(nb), deadline)) nb.reason = static_cast<uint32_t>(auth::reason::no_proof);
    return refused(static_cast<auth::reason>(nb.reason));
  };
  const auth::nonce nc = auth::fresh_nonce();
  frame_hdr h = make_hdr(ftype::hello, sizeof(hello_body), 0, 0, 0);
  hello_body hb{static_cast<uint32_t>(::getpid()), unix_sock ? 1u : 0u, {}, 0};
  std::memcpy(hb.nonce, nc.data(), 16);
  hb.probe_addr = reinterpret_cast<uint64_t>(hb.nonce);  // alive until the handshake ends
  iovec v[2] = {{&h, sizeof(h)}, {&hb, sizeof(hb)}};
  frame_hdr rh{};
  if (!writev_full(fd, v, 2, deadline) || !read_full(fd, &rh, sizeof(rh), deadline)) {
    *why = "handshake with " + peer + " failed (no answer)";
    *dropped = now_ms() < deadline;  // closed on us before the time ran out
    return false;
  }
  const handshake_reply first = check_challenge(rh);
  if (first == handshake_reply::refused) return read_refusal();
  challenge_body cb{};
  if (first != handshake_reply::challenge || !read_full(fd, &cb, sizeof(cb), deadline)) {
    *why = "handshake with " + peer + " failed (not a soft wire of this version)";
    return false;
  }
  auth::nonce ns;
  std::memcpy(ns.data(), cb.nonce, 16);
  digest theirs;
  std::memcpy(theirs.data(), cb.proof, 32);
  // The server must know the secret too: a process that merely took the name or port is
  // refused. We still send our proof (a proof is bound to this connection's nonces, so it
  // is of no use elsewhere) so that the server can log why it failed on its side as well.
  const bool server_ok = auth::digest_equal(theirs, auth::server_proof(secret, nc, ns));
  frame_hdr ah = make_hdr(ftype::auth, sizeof(auth_body), 0, 0, 0);
  auth_body ab{};
  const digest mine = auth::client_proof(secret, ns, nc);
  std::memcpy(ab.proof, mine.data(), 32);
  iovec av[2] = {{&ah, sizeof(ah)}, {&ab, sizeof(ab)}};
  const bool sent = writev_full(fd, av, 2, deadline);
  if (!server_ok) {
    const bool zero = auth::digest_equal(theirs, auth::server_proof(std::vector<uint8_t>(32, 0), nc, ns));
    *why = peer + " failed to prove this job's secret: " +
           auth::describe(zero ? auth::reason::zero_secret : auth::reason::wrong_secret);
    auth::report(log_name() + " refused " + *why);
    return false;
  }
  if (!sent || !read_full(fd, &rh, sizeof(rh), deadline)) {
    *why = "handshake with " + peer + " failed (no answer to our proof)";
    *dropped = now_ms() < deadline;
    return false;
  }
  const handshake_reply second = check_auth_reply(rh);
  if (second == handshake_reply::refused) return read_refusal();
  hello_ok_body ob{};
  if (second != handshake_reply::accepted || !read_full(fd, &ob, sizeof(ob), deadline)) {
    *why = "handshake with " + peer + " failed (a malformed answer)";
    return false;
  }
  *cma = ob.cma != 0;
  return true;
}

namespace {

// A connected socket to the peer at p (its unix socket on this host unless the wire is
// tcp), or -1 with *why.
int dial(const parsed_address& p, const std::string& wire, uint64_t deadline, bool* unix_sock, std::string* why) {
  *unix_sock = false;
  if (wire != "tcp" && p.host == host_id()) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un su{};
    su.sun_family = AF_UNIX;
    const std::string n = unix_name(p.pid, p.dev_index);
    std::memcpy(su.sun_path, n.data(), n.size());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&su), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n.size())) == 0) {
      *unix_sock = true;
      return fd;
    }
    ::close(fd);  // another network namespace, or a host-id collision: use TCP
  }
  if (wire == "shm") {
    *why = "the shared-memory wire needs the peer on this host (GDAKI_SOFT_WIRE=shm)";
    return -1;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = p.ipv4_be;
  sa.sin_port = htons(p.port);
  int r = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  if (r != 0 && errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline)) {
    int err = 0;
    socklen_t l = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    r = err == 0 ? 0 : -1;
  }
  if (r != 0) {
    ::close(fd);
    *why = "cannot connect";
    return -1;
  }
  return fd;
}

}  // namespace

std::shared_ptr<client_conn> endpoint::client(const address& a, std::string* why) {
  {
    std::lock_guard lk(clients_mu_);
    auto it = clients_.find(a);
    if (it != clients_.end()) {
      if (!it->second->dead) return it->second;
      clients_.erase(it);
    }
  }
  parsed_address p;
  if (!parse_address(a.data(), &p)) {
    *why = "not a soft wire address";
    return nullptr;
  }
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  auto c = std::make_shared<client_conn>();
  bool cma = false;
  // A server with more peers still proving the secret than it keeps drops the oldest
  // without a word (load shedding during a connection flood, docs/soft-nic.md): such a
  // drop is retried, after 1, 2, 4 ... 64 ms, until the deadline, as a NIC retries a
  // transport error. A refusal (wrong secret, another user) is final.
  for (uint64_t backoff_ms = 1;; backoff_ms = std::min<uint64_t>(backoff_ms * 2, 64)) {
    bool unix_sock = false;
    const int fd = dial(p, dev_.cfg.wire, deadline, &unix_sock, why);
    if (fd < 0) return nullptr;
    c->fd = fd;
    tune(fd, !unix_sock);
    bool dropped = false;
    if (handshake(fd, unix_sock, a.data(), deadline, &cma, why, &dropped)) break;
    ::close(fd);
    c->fd = -1;
    if (!dropped || now_ms() + backoff_ms >= deadline) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
  }
  c->cma = cma;
  std::lock_guard lk(clients_mu_);
  auto [it, fresh] = clients_.emplace(a, c);
  if (!fresh && !it->second->dead) return it->second;  // another thread won the race
  it->second = c;
  return c;
}

}  // namespace gdaki::soft::wire
