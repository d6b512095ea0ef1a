// The soft NIC's wires across processes and hosts (docs/soft-nic.md "Wires",
// docs/wire-protocol.md). The requester side runs on the executor's thread: it sends one
// request frame per WQE and waits for its response (stop-and-wait per connection, which
// satisfies every fence mode). The responder side runs on the device's I/O thread and
// uses the same checks as the in-process responder (responder_impl.hpp) before it moves
// any byte. Payload bytes move once: from the requester's registered memory into the
// socket (writev) and from the socket into the validated target range (readv), or, on
// one host, by one cross-process copy (process_vm_readv / process_vm_writev). What a frame
// may say is decided in wire_frame.cpp (also run by the wire_frame fuzzer); this file reads
// the bytes those rules ask for and acts on their answer.
#include "wire.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "../engine/responder_impl.hpp"
#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "wire_frame.hpp"
#include "wire_proto.hpp"
#include "wire_test_hooks.hpp"

namespace gdaki::soft::wire {

using prm::send_opcode;
using prm::syndrome;

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

uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Waits until fd is readable (or writable); false on timeout or error.
bool wait_fd(int fd, short events, uint64_t deadline_ms) {
  for (;;) {
    const uint64_t now = now_ms();
    if (now >= deadline_ms) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(deadline_ms - now));
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (r < 0 && errno != EINTR) return false;
  }
}

// Reads exactly the bytes iov[0..n) describe (the array is consumed). False on EOF, error
// or deadline.
bool readv_full(int fd, iovec* iov, int n, uint64_t deadline_ms) {
  while (n > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --n;
      continue;
    }
    const ssize_t r = ::readv(fd, iov, n > IOV_MAX ? IOV_MAX : n);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!wait_fd(fd, POLLIN, deadline_ms)) return false;
      continue;
    }
    size_t left = static_cast<size_t>(r);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

bool writev_full(int fd, iovec* iov, int n, uint64_t deadline_ms) {
  while (n > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --n;
      continue;
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n > IOV_MAX ? IOV_MAX : n);
    const ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!wait_fd(fd, POLLOUT, deadline_ms)) return false;
      continue;
    }
    size_t left = static_cast<size_t>(r);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

bool read_full(int fd, void* p, size_t len, uint64_t deadline_ms) {
  iovec v{p, len};
  return readv_full(fd, &v, 1, deadline_ms);
}

// Reads and drops `len` bytes (the payload of a request that was refused).
bool drain(int fd, uint64_t len, uint64_t deadline_ms) {
  uint8_t scratch[16384];
  while (len != 0) {
    const size_t n = len < sizeof(scratch) ? static_cast<size_t>(len) : sizeof(scratch);
    if (!read_full(fd, scratch, n, deadline_ms)) return false;
    len -= n;
  }
  return true;
}

void tune(int fd, bool tcp) {
  const int one = 1;
  if (tcp) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

frame_hdr make_hdr(ftype t, uint32_t len, uint32_t src, uint32_t dst, uint32_t seq) {
  frame_hdr h{};
  h.magic = frame_magic;
  h.version = frame_version;
  h.type = static_cast<uint8_t>(t);
  h.length = len;
  h.src_qpn = src;
  h.dst_qpn = dst;
  h.seq = seq;
  return h;
}

bool token_equal(const uint8_t* a, const uint8_t* b) {
  // Constant time: the comparison must not tell a guesser how many leading bytes matched.
  uint8_t d = 0;
  for (int i = 0; i < 16; ++i) d = static_cast<uint8_t>(d | (a[i] ^ b[i]));
  return d == 0;
}

bool cma_works() {
  // A copy from ourselves: fails where the kernel lacks CMA or a policy forbids it.
  static const bool ok = [] {
    uint64_t a = 0x1234, b = 0;
    iovec l{&b, 8}, r{&a, 8};
    return ::process_vm_readv(::getpid(), &l, 1, &r, 1, 0) == 8 && b == a;
  }();
  return ok;
}

}  // namespace

bool is_remote(const verbs::address& av) {
  parsed_address p;
  if (!av.is_global || !parse_address(av.dgid, &p)) return false;
  return !(p.pid == static_cast<uint32_t>(::getpid()) && p.host == host_id());
}

// ---- connections ------------------------------------------------------------------------

struct server_conn {
  int fd = -1;
  bool unix_sock = false;
  pid_t pid = 0;  // the peer process (unix sockets: from the kernel, SO_PEERCRED)
  bool hello = false;
  bool cma = false;
  std::set<uint64_t> bound;  // (src << 32 | dst) pairs this peer proved the token for
};

struct client_conn {
  std::mutex mu;  // one request in flight per connection
  int fd = -1;
  bool cma = false;
  bool dead = false;
  uint32_t seq = 0;
  std::set<uint64_t> bound;
  ~client_conn() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {
uint64_t pair_key(uint32_t src, uint32_t dst) { return (uint64_t{src} << 32) | dst; }
}  // namespace

// ---- the endpoint ------------------------------------------------------------------------

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
  in_addr ia{};
  if (::inet_pton(AF_INET, dev_.cfg.listen_addr.c_str(), &ia) != 1) {
    *why = "listen address '" + dev_.cfg.listen_addr + "' is not an IPv4 address";
    return false;
  }
  tcp_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
    unix_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
  epoll_event evs[32];
  for (;;) {
    const int n = ::epoll_wait(ep_fd_, evs, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == stop_fd_) return;
      if (fd == tcp_fd_ || fd == unix_fd_) {
        accept_one(fd, fd == unix_fd_);
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      server_conn& c = *it->second;
      if (!serve_frame(c)) {
        // A frame that breaks the protocol after authentication moves every QP bound on
        // the connection to ERR; an unauthenticated peer has none, and a peer that just
        // hung up is not an error of the responder (RC responders are silent).
        close_conn(fd, true);
      }
    }
  }
}

void endpoint::accept_one(int lfd, bool unix_sock) {
  const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  tune(fd, !unix_sock);
  auto c = std::make_unique<server_conn>();
  c->fd = fd;
  c->unix_sock = unix_sock;
  if (unix_sock) {
    ucred cr{};
    socklen_t l = sizeof(cr);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0) c->pid = cr.pid;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, fd, &ev);
  conns_[fd] = std::move(c);
}

void endpoint::close_conn(int fd, bool poison) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (poison) {
    for (uint64_t k : it->second->bound) {
      std::shared_ptr<soft_qp> q = qps().find(static_cast<uint32_t>(k));
      if (!q || q->dev != &dev_) continue;
      std::lock_guard lk(q->resp_mu);
      if (!q->destroyed) enter_error_locked_resp(*q);
    }
  }
  ::epoll_ctl(ep_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_.erase(it);
}

namespace {

// Moves the bytes of one request at the responder: from the socket, or across processes.
struct server_xfer {
  int fd;
  pid_t pid;
  bool cma;
  std::span<const iov_entry> iovs;  // cma: the requester's buffers
  uint64_t payload;                    // bytes of payload in the frame
  uint64_t deadline;
  const frame_hdr& req;
  bool consumed = false;
  bool responded = false;
  bool failed = false;  // the connection is unusable (close it)
  uint64_t old = 0;
  bool has_old = false;

  bool place(const dst_piece* d, uint32_t nd) {
    std::vector<iovec> local;
    uint64_t want = cma ? 0 : payload;
    if (cma) {
      for (const iov_entry& e : iovs) want += e.len;
    }
    for (uint32_t i = 0; i < nd && want != 0; ++i) {
      const uint64_t n = d[i].length < want ? d[i].length : want;
      local.push_back({d[i].ptr, static_cast<size_t>(n)});
      want -= n;
    }
    if (cma) {
      std::vector<iovec> remote;
      uint64_t total = 0;
      for (const iov_entry& e : iovs) {
        remote.push_back({reinterpret_cast<void*>(e.addr), static_cast<size_t>(e.len)});
        total += e.len;
      }
      const ssize_t r = ::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
      if (r < 0 || static_cast<uint64_t>(r) != total) failed = true;
      return !failed;
    }
    consumed = true;
    if (!readv_full(fd, local.data(), static_cast<int>(local.size()), deadline)) failed = true;
    return !failed;
  }
  void read_out(const uint8_t* from, uint64_t n) {
    frame_hdr h = make_hdr(ftype::response, 0, req.src_qpn, req.dst_qpn, req.seq);
    responded = true;
    if (cma) {
      std::vector<iovec> remote;
      for (const iov_entry& e : iovs) remote.push_back({reinterpret_cast<void*>(e.addr), static_cast<size_t>(e.len)});
      iovec local{const_cast<uint8_t*>(from), static_cast<size_t>(n)};
      const ssize_t r = ::process_vm_writev(pid, &local, 1, remote.data(), remote.size(), 0);
      if (r < 0 || static_cast<uint64_t>(r) != n) {
        failed = true;
        return;
      }
      iovec v{&h, sizeof(h)};
      if (!writev_full(fd, &v, 1, deadline)) failed = true;
      return;
    }
    h.length = static_cast<uint32_t>(n);
    iovec v[2] = {{&h, sizeof(h)}, {const_cast<uint8_t*>(from), static_cast<size_t>(n)}};
    if (!writev_full(fd, v, 2, deadline)) failed = true;
  }
  void atomic_result(uint64_t v) {
    old = v;
    has_old = true;
  }
};

}  // namespace

bool endpoint::serve_frame(server_conn& c) {
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  // Every rule about what a frame may say is in wire_frame.cpp (shared with the fuzzer);
  // this function only reads the bytes those rules ask for and acts on the answer.
  uint8_t raw[sizeof(frame_hdr)];
  frame_hdr h{};
  if (!read_full(c.fd, raw, sizeof(raw), deadline) || !parse_header(raw, sizeof(raw), &h)) return false;
  if (!server_accepts(h, c.hello)) return false;
  const auto t = static_cast<ftype>(h.type);
  if (t == ftype::hello) {
    hello_body b{};
    if (!read_full(c.fd, &b, sizeof(b), deadline)) return false;
    c.hello = true;
    c.cma = c.unix_sock && c.pid > 0 && b.want_cma != 0 && dev_.cfg.wire != "tcp" && cma_works();
    frame_hdr r = make_hdr(ftype::hello_ok, sizeof(hello_ok_body), 0, 0, h.seq);
    hello_ok_body ob{c.cma ? 1u : 0u, 0};
    iovec v[2] = {{&r, sizeof(r)}, {&ob, sizeof(ob)}};
    return writev_full(c.fd, v, 2, deadline);
  }
  if (t == ftype::bind) {
    bind_body b{};
    if (!read_full(c.fd, &b, sizeof(b), deadline)) return false;
    std::shared_ptr<soft_qp> q = qps().find(h.dst_qpn);
    bool ready = false;
    if (q && q->dev == &dev_) {
      std::lock_guard lk(q->resp_mu);
      const uint32_t st = q->state.load(std::memory_order_acquire);
      const bool rtr = st == static_cast<uint32_t>(verbs::qp_state::rtr) || st == static_cast<uint32_t>(verbs::qp_state::rts);
      if (!q->destroyed && rtr) {
        // A wrong token for a QP that has one closes the connection (docs/wire-protocol.md).
        if (!token_equal(b.token, q->attr.av.token)) return false;
        ready = q->attr.dest_qp_num == h.src_qpn;
      }
    }
    if (ready) c.bound.insert(pair_key(h.src_qpn, h.dst_qpn));
    frame_hdr r = make_hdr(ready ? ftype::bind_ok : ftype::bind_nak, 0, h.src_qpn, h.dst_qpn, h.seq);
    iovec v{&r, sizeof(r)};
    return writev_full(c.fd, &v, 1, deadline);
  }
  if (!c.bound.count(pair_key(h.src_qpn, h.dst_qpn))) return false;  // a request: bound pair only

  // Validate every field before using any of it: the fixed body first, then the iov list
  // it announces (parse_request says how many bytes it needs; at most 64 + 30 * 16).
  uint8_t head[sizeof(request_body) + max_iov * sizeof(iov_entry)];
  request_view rq;
  size_t have = 0;
  parse_status ps = parse_request(h, head, have, c.cma, &rq);
  while (ps == parse_status::need_more) {
    if (!read_full(c.fd, head + have, rq.head_bytes - have, deadline)) return false;
    have = rq.head_bytes;
    ps = parse_request(h, head, have, c.cma, &rq);
  }
  if (ps != parse_status::ok) return false;
  const request_body& b = rq.body;
  const bool cma = rq.cma;
  const uint64_t payload = rq.payload;
  const std::span<const iov_entry> iovs(rq.iov, b.n_iov);

  server_xfer x{c.fd, c.pid, cma, iovs, payload, deadline, h};
  respond_result rr{};
  bool dropped = false;
  {
    std::shared_ptr<soft_qp> q = qps().find(h.dst_qpn);
    // Held while bytes move: deregistration waits for us (as for the in-process wire).
    std::shared_lock kl(keys().lock());
    std::unique_lock<std::mutex> rl;
    if (q && q->dev == &dev_) rl = std::unique_lock(q->resp_mu);
    const uint32_t st = q ? q->state.load(std::memory_order_acquire) : 0;
    if (!rl.owns_lock() || q->destroyed ||
        (st != static_cast<uint32_t>(verbs::qp_state::rtr) && st != static_cast<uint32_t>(verbs::qp_state::rts)) ||
        q->attr.dest_qp_num != h.src_qpn) {
      dropped = true;  // as a request to a QP that cannot take it: no answer but "drop"
    } else {
      parsed_wqe w;
      w.opcode = h.opcode;
      w.fm_ce_se = h.fm_ce_se;
      w.imm_raw = b.imm_raw;
      w.raddr = b.raddr;
      w.rkey = b.rkey;
      w.length = is_atomic(h.opcode) ? b.atomic_size : b.msg_len;
      w.atomic_size = b.atomic_size;
      w.swap_add = b.swap_add;
      w.compare = b.compare;
      w.swap_mask = b.swap_mask;
      w.compare_mask = b.compare_mask;
      rr = resp_detail::respond_with(h.src_qpn, w, *q, x);
    }
  }
  if (x.failed) return false;
  if (!x.consumed && payload != 0 && !drain(c.fd, payload, deadline)) return false;
  if (x.responded) return true;
  frame_hdr r = make_hdr(ftype::response, 0, h.src_qpn, h.dst_qpn, h.seq);
  r.syndrome = static_cast<uint8_t>(rr.req);
  if (dropped) r.flags |= fflag::drop;
  if (rr.rnr) {
    r.flags |= fflag::rnr;
    r.rnr_timer = rr.rnr_timer;
  }
  r.length = x.has_old && rr.req == syndrome::none ? 8 : 0;
  iovec v[2] = {{&r, sizeof(r)}, {&x.old, 8}};
  return writev_full(c.fd, v, r.length != 0 ? 2 : 1, deadline);
}

// ---- the requester side ---------------------------------------------------------------

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
  bool unix_sock = false;
  if (dev_.cfg.wire != "tcp" && p.host == host_id()) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un su{};
    su.sun_family = AF_UNIX;
    const std::string n = unix_name(p.pid, p.dev_index);
    std::memcpy(su.sun_path, n.data(), n.size());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&su), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n.size())) == 0) {
      c->fd = fd;
      unix_sock = true;
    } else {
      ::close(fd);  // another network namespace, or a host-id collision: use TCP
    }
  }
  if (c->fd < 0) {
    if (dev_.cfg.wire == "shm") {
      *why = "the shared-memory wire needs the peer on this host (GDAKI_SOFT_WIRE=shm)";
      return nullptr;
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
      return nullptr;
    }
    c->fd = fd;
  }
  tune(c->fd, !unix_sock);
  frame_hdr h = make_hdr(ftype::hello, sizeof(hello_body), 0, 0, 0);
  hello_body hb{static_cast<uint32_t>(::getpid()), unix_sock && cma_works() ? 1u : 0u};
  iovec v[2] = {{&h, sizeof(h)}, {&hb, sizeof(hb)}};
  frame_hdr rh{};
  hello_ok_body ob{};
  if (!writev_full(c->fd, v, 2, deadline) || !read_full(c->fd, &rh, sizeof(rh), deadline) || !hello_ok_valid(rh) ||
      !read_full(c->fd, &ob, sizeof(ob), deadline)) {
    *why = "handshake failed";
    return nullptr;
  }
  c->cma = ob.cma != 0;
  std::lock_guard lk(clients_mu_);
  auto [it, fresh] = clients_.emplace(a, c);
  if (!fresh && !it->second->dead) return it->second;  // another thread won the race
  it->second = c;
  return c;
}

outcome endpoint::execute(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w) {
  std::string why;
  if (!listening_.load(std::memory_order_acquire) && !listen(&why)) return {outcome::fatal};
  address a;
  std::memcpy(a.data(), qp.attr.av.dgid, 16);
  std::shared_ptr<client_conn> c = client(a, &why);
  if (!c) return {outcome::fatal};  // nobody listens there: the peer is gone
  std::lock_guard lk(c->mu);
  if (c->dead) return {outcome::fatal};
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  auto fail = [&] {
    c->dead = true;
    ::shutdown(c->fd, SHUT_RDWR);
    return outcome{outcome::fatal};
  };
  const uint32_t src = qp.qpn, dst = qp.attr.dest_qp_num;
  if (!c->bound.count(pair_key(src, dst))) {
    frame_hdr h = make_hdr(ftype::bind, sizeof(bind_body), src, dst, ++c->seq);
    bind_body b{};
    std::memcpy(b.token, qp.attr.av.token, 16);
    iovec v[2] = {{&h, sizeof(h)}, {&b, sizeof(b)}};
    frame_hdr rh{};
    if (!writev_full(c->fd, v, 2, deadline) || !read_full(c->fd, &rh, sizeof(rh), deadline)) return fail();
    const bind_reply br = check_bind_reply(rh, h.seq);
    if (br == bind_reply::nak) return {outcome::retry};  // peer QP not ready yet
    if (br != bind_reply::ok) return fail();
    c->bound.insert(pair_key(src, dst));
  }

  const bool atomic = w.atomic_size != 0;
  const bool read = w.opcode == static_cast<uint8_t>(send_opcode::rdma_read);
  const bool payload_op = carries_payload(w.opcode);
  bool all_pointers = true;
  for (uint32_t i = 0; i < w.num_sg; ++i) all_pointers = all_pointers && !w.sg[i].is_inline;
  const bool cma = c->cma && (payload_op || read) && all_pointers && w.length >= dev_.cfg.shm_single_copy_min;
  if (!cma && w.length > max_body - sizeof(request_body)) return {outcome::done, syndrome::local_length};

  frame_hdr h = make_hdr(ftype::request, sizeof(request_body), src, dst, ++c->seq);
  h.opcode = w.opcode;
  h.fm_ce_se = w.fm_ce_se;
  request_body b{};
  b.raddr = w.raddr;
  b.rkey = w.rkey;
  b.imm_raw = w.imm_raw;
  b.msg_len = atomic ? 0 : w.length;
  b.atomic_size = w.atomic_size;
  b.swap_add = w.swap_add;
  b.compare = w.compare;
  b.swap_mask = w.swap_mask;
  b.compare_mask = w.compare_mask;
  iovec v[2 + max_gather];
  iov_entry list[max_gather];
  uint8_t inl[1024];
  int nv = 2;
  if (cma) {
    h.flags |= fflag::cma;
    for (uint32_t i = 0; i < w.num_sg; ++i) {
      if (w.sg[i].length == 0) continue;
      list[b.n_iov++] = {w.sg[i].addr, w.sg[i].length};
    }
    h.length += b.n_iov * static_cast<uint32_t>(sizeof(iov_entry));
    v[nv++] = {list, b.n_iov * sizeof(iov_entry)};
  } else if (payload_op) {
    // Straight from the registered buffers (no staging copy); inline bytes from the WQE.
    uint32_t inl_used = 0;
    for (uint32_t i = 0; i < w.num_sg; ++i) {
      const gather_entry& g = w.sg[i];
      if (g.length == 0) continue;
      if (g.is_inline) {
        if (inl_used + g.length > sizeof(inl)) return {outcome::done, syndrome::local_qp_op};
        r.copy_out(g.inline_off, inl + inl_used, g.length);
        v[nv++] = {inl + inl_used, g.length};
        inl_used += g.length;
      } else {
        v[nv++] = {reinterpret_cast<void*>(g.addr), g.length};
      }
    }
    h.length += static_cast<uint32_t>(w.length);
  }
  v[0] = {&h, sizeof(h)};
  v[1] = {&b, sizeof(b)};
  // Test-only faults (wire_test_hooks.hpp): one relaxed load when nothing is armed.
  frame_hdr corrupted;
  bool drop_after_send = false;
  if (test_hooks::armed.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    const uint32_t hook = test_hooks::armed.exchange(0, std::memory_order_acq_rel);
    switch (static_cast<test_hooks::fault>(hook & 0xff)) {
      case test_hooks::fault::drop_before_send:
        ::shutdown(c->fd, SHUT_RDWR);
        break;
      case test_hooks::fault::drop_after_send:
        drop_after_send = true;
        break;
      case test_hooks::fault::corrupt_header:
        // The copy on the wire is corrupted; h stays what we meant, as on a real link.
        corrupted = h;
        reinterpret_cast<uint8_t*>(&corrupted)[((hook >> 8) & 0xff) % sizeof(frame_hdr)] ^= static_cast<uint8_t>(hook >> 16);
        v[0] = {&corrupted, sizeof(corrupted)};
        break;
      default:
        break;
    }
  }
  if (!writev_full(c->fd, v, nv, deadline)) return fail();
  if (drop_after_send) ::shutdown(c->fd, SHUT_RDWR);

  frame_hdr rh{};
  if (!read_full(c->fd, &rh, sizeof(rh), deadline)) return fail();
  const response_kind rk = check_response(rh, h, read && !cma ? w.length : atomic ? 8 : 0);
  if (rk == response_kind::bad) return fail();
  if (rk == response_kind::drop) return {outcome::retry};
  if (rk == response_kind::rnr) return {outcome::rnr, syndrome::none, rh.rnr_timer};
  const auto s = static_cast<syndrome>(rh.syndrome);
  const uint64_t expect = rh.length;
  if (expect != 0 && read) {
    iovec out[max_gather];
    int n = 0;
    for (uint32_t i = 0; i < w.num_sg; ++i) out[n++] = {reinterpret_cast<void*>(w.sg[i].addr), w.sg[i].length};
    if (!readv_full(c->fd, out, n, deadline)) return fail();
  } else if (expect != 0) {
    uint64_t old = 0;
    if (!read_full(c->fd, &old, 8, deadline)) return fail();
    // Host order, as the in-process wire (IBV_ATOMIC_HCA mode, PRM 6.4).
    std::memcpy(reinterpret_cast<void*>(w.sg[0].addr), &old, w.atomic_size);
  }
  return {outcome::done, s};
}

}  // namespace gdaki::soft::wire
