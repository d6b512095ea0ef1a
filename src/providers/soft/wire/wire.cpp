// The soft NIC's wires across processes and hosts (docs/soft-nic.md "Wires",
// docs/wire-protocol.md). The requester side runs on the executor's thread: it sends one
// request frame per WQE without waiting (up to the window), and any thread progressing a
// QP of the connection reads the responses, which come in request order (a FIFO). Each
// QP numbers its requests (PSN); the responder runs a pair's requests only in sequence,
// so one that was refused (RNR, not ready) or failed holds back those pipelined behind
// it, as on an RC link. The responder side runs on the device's I/O thread and
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
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "../engine/responder_impl.hpp"
#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "gdaki/verbs/mr.hpp"
#include "shm_map.hpp"
#include "wire_auth.hpp"
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

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

// Steps an iovec array past `done` bytes that were sent or received.
void advance_iov(iovec** iov, int* n, size_t done) {
  while (*n > 0 && done >= (*iov)->iov_len) {
    done -= (*iov)->iov_len;
    ++*iov;
    --*n;
  }
  if (*n > 0) {
    (*iov)->iov_base = static_cast<uint8_t*>((*iov)->iov_base) + done;
    (*iov)->iov_len -= done;
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
    advance_iov(&iov, &n, static_cast<size_t>(r));
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
    advance_iov(&iov, &n, static_cast<size_t>(r));
  }
  return true;
}

bool read_full(int fd, void* p, size_t len, uint64_t deadline_ms) {
  iovec v{p, len};
  return readv_full(fd, &v, 1, deadline_ms);
}

// Bytes read from a socket ahead of need: one recv brings several small frames (a
// pipelined peer sends them back to back), so each costs no syscall of its own. Payload
// beyond what is buffered is read straight into its destination.
struct rx_buffer {
  // Small: what a recv brings beyond the frame's head is copied once more (a payload
  // prefix), so the buffer only needs to hold a burst of small frames.
  static constexpr size_t cap = 4096;
  uint8_t b[cap];
  size_t head = 0, tail = 0;
  size_t size() const { return tail - head; }
};

// Reads what the socket has now, without waiting. 1: got bytes, 0: none yet, -1: EOF or
// error.
int rx_fill(int fd, rx_buffer& rb) {
  if (rb.head == rb.tail) {
    rb.head = rb.tail = 0;
  } else if (rb.head != 0) {
    std::memmove(rb.b, rb.b + rb.head, rb.size());
    rb.tail -= rb.head;
    rb.head = 0;
  }
  if (rb.tail == rx_buffer::cap) return 1;
  const ssize_t r = ::recv(fd, rb.b + rb.tail, rx_buffer::cap - rb.tail, MSG_DONTWAIT);
  if (r > 0) {
    rb.tail += static_cast<size_t>(r);
    return 1;
  }
  if (r == 0) return -1;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

// Reads exactly the bytes iov[0..n) describe (the array is consumed): buffered bytes
// first, then small remainders through the buffer and large ones straight from the
// socket. False on EOF, error or deadline.
bool rx_readv(int fd, rx_buffer& rb, iovec* iov, int n, uint64_t deadline_ms) {
  for (;;) {
    while (n > 0 && rb.size() != 0) {
      const size_t k = iov->iov_len < rb.size() ? iov->iov_len : rb.size();
      std::memcpy(iov->iov_base, rb.b + rb.head, k);
      rb.head += k;
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + k;
      iov->iov_len -= k;
      if (iov->iov_len == 0) {
        ++iov;
        --n;
      }
    }
    while (n > 0 && iov->iov_len == 0) {
      ++iov;
      --n;
    }
    if (n == 0) return true;
    size_t left = 0;
    for (int i = 0; i < n; ++i) left += iov[i].iov_len;
    if (left >= 4096) return readv_full(fd, iov, n, deadline_ms);
    const int f = rx_fill(fd, rb);
    if (f < 0) return false;
    if (f == 0 && !wait_fd(fd, POLLIN, deadline_ms)) return false;
  }
}

bool rx_read(int fd, rx_buffer& rb, void* p, size_t len, uint64_t deadline_ms) {
  iovec v{p, len};
  return rx_readv(fd, rb, &v, 1, deadline_ms);
}

// Reads and drops `len` bytes (the payload of a request that was refused).
bool drain(int fd, rx_buffer& rb, uint64_t len, uint64_t deadline_ms) {
  uint8_t scratch[16384];
  while (len != 0) {
    const size_t n = len < sizeof(scratch) ? static_cast<size_t>(len) : sizeof(scratch);
    if (!rx_read(fd, rb, scratch, n, deadline_ms)) return false;
    len -= n;
  }
  return true;
}

// Replies the server owes a peer, sent together once it has read every frame that came
// (one syscall and one wake-up of the peer for a burst of pipelined requests, not one
// each). Large replies (READ data) go at once, behind whatever is queued.
struct tx_queue {
  std::vector<uint8_t> bytes;
  static constexpr size_t flush_at = 16384;
};

bool flush_replies(int fd, tx_queue& q, uint64_t deadline_ms) {
  if (q.bytes.empty()) return true;
  iovec v{q.bytes.data(), q.bytes.size()};
  const bool ok = writev_full(fd, &v, 1, deadline_ms);
  q.bytes.clear();
  return ok;
}

bool send_reply(int fd, tx_queue& q, const iovec* v, int n, uint64_t deadline_ms) {
  size_t total = 0;
  for (int i = 0; i < n; ++i) total += v[i].iov_len;
  if (total <= 256) {
    for (int i = 0; i < n; ++i) {
      const auto* p = static_cast<const uint8_t*>(v[i].iov_base);
      q.bytes.insert(q.bytes.end(), p, p + v[i].iov_len);
    }
    return q.bytes.size() < tx_queue::flush_at || flush_replies(fd, q, deadline_ms);
  }
  iovec all[4];
  int k = 0;
  if (!q.bytes.empty()) all[k++] = {q.bytes.data(), q.bytes.size()};
  for (int i = 0; i < n && k < 4; ++i) all[k++] = v[i];
  const bool ok = writev_full(fd, all, k, deadline_ms);
  q.bytes.clear();
  return ok;
}

// Sends the bytes of v with `nfds` descriptors attached to the first one (SCM_RIGHTS).
bool send_with_fds(int fd, iovec* v, int n, const int* fds, int nfds, uint64_t deadline_ms) {
  alignas(cmsghdr) char ctl[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = v;
  m.msg_iovlen = static_cast<size_t>(n);
  m.msg_control = ctl;
  m.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds, static_cast<size_t>(nfds) * sizeof(int));
  for (;;) {
    const ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (r >= 0) {
      // The descriptors went with the first byte; the rest (rarely any) goes plainly.
      advance_iov(&v, &n, static_cast<size_t>(r));
      return n == 0 || writev_full(fd, v, n, deadline_ms);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (!wait_fd(fd, POLLOUT, deadline_ms)) return false;
  }
}

// Reads exactly len bytes with recvmsg, keeping up to max_fds descriptors that came with
// them (the rest, and any that came with a short read, are closed). Returns how many.
int recv_with_fds(int fd, void* p, size_t len, int* fds, int max_fds, uint64_t deadline_ms) {
  int got = 0;
  auto* at = static_cast<uint8_t*>(p);
  while (len != 0) {
    alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
    iovec v{at, len};
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    const ssize_t r = ::recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLIN, deadline_ms)) continue;
      break;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int d = -1;
        std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (got < max_fds) {
          fds[got++] = d;
        } else {
          ::close(d);
        }
      }
    }
    at += r;
    len -= static_cast<size_t>(r);
  }
  if (len != 0) {
    for (int i = 0; i < got; ++i) ::close(fds[i]);
    return -1;
  }
  return got;
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

// ---- connections ------------------------------------------------------------------------

struct server_conn {
  int fd = -1;
  bool unix_sock = false;
  pid_t pid = 0;  // the peer process (unix sockets: from the kernel, SO_PEERCRED)
  uid_t uid = 0;  // unix sockets: the peer's user id (SO_PEERCRED)
  std::string peer;  // who it is, for the log
  // Nothing but the handshake is read until the peer has proved the secret, which it must
  // do by handshake_deadline (ms).
  conn_stage stage = conn_stage::fresh;
  uint64_t serial = 0;  // this connection among all the endpoint accepted (fds are reused)
  uint64_t handshake_deadline = 0;
  auth::nonce nonce_c{}, nonce_s{};
  bool want_cma = false;
  uint64_t probe_addr = 0;  // where the peer holds nonce_c (the CMA probe reads it)
  bool cma = false;
  // (src << 32 | dst) pairs this peer proved the token for, each with the PSN of the next
  // request it may execute (the bind sets it; requests out of sequence are dropped).
  std::map<uint64_t, uint32_t> expect;
  // Pairs whose map named a key that failed its check: never answered map_ok again, so a
  // peer cannot use map frames to guess keys (a request with a bad key ends the pair
  // anyway: its responder QP moves to ERR, as on RC).
  std::set<uint64_t> map_burned;
  // Its last request was dropped or failed (a QP in ERR, a bad key, out of sequence): its
  // next turn is short, so a peer that keeps sending what cannot execute (a bug, or key
  // guessing) takes little of the I/O thread from those whose requests do.
  bool unproductive = false;
  rx_buffer rx;
  tx_queue tx;
  // The peer closed (or reset) between two frames: it left, it did not break the protocol.
  bool hung_up = false;
};

struct client_conn {
  // The socket, the FIFO and the receive buffer. Lock order: the key table's shared lock
  // (when taken) before this.
  std::mutex mu;
  int fd = -1;
  bool cma = false;
  std::atomic<bool> dead{false};
  uint32_t seq = 0;  // binds
  // Requests sent and not yet answered, oldest first: the server answers in this order.
  std::deque<std::shared_ptr<wire_op>> fifo;
  uint64_t resp_bytes = 0;  // bytes the responses in the FIFO may still bring
  uint64_t req_bytes = 0;   // payload bytes of the requests in the FIFO
  rx_buffer rx;
  // The mapped path (same host): the peer's MRs we may map, by rkey (null: asked, and the
  // peer said no), and the peer's revocation table.
  std::map<uint32_t, std::shared_ptr<shm::mapping>> maps;
  shm::revocation_slot* table = nullptr;
  void* table_map = nullptr;
  size_t table_len = 0;
  ~client_conn() {
    maps.clear();
    if (table_map != nullptr) ::munmap(table_map, table_len);
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
      if (earn(b, now)) {
        if (b.parked || !b.waiting.empty()) unpark(unix_sock);
        continue;
      }
      // Spent: its peers still proving the secret wait outside the epoll set until it is
      // earned back (one part in handshake_share of the time that passes).
      if (!b.parked) park(unix_sock);
      const int earned_ms = static_cast<int>(-b.credit_ns * handshake_share / 1'000'000) + 1;
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
        spend(b, now_ns() - t0);
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
      serve(*it->second, it->second->unproductive ? frames_per_unproductive_turn : frames_per_turn);
    }
    int handshakes = handshakes_per_round;
    for (server_conn* c : later) {
      if (handshakes == 0) {
        backlog.push_back(c->fd);  // next round
        continue;
      }
      handshake_budget& b = budgets_[c->unix_sock];
      if (b.credit_ns <= 0) {
        park_connection(*c);
        continue;
      }
      --handshakes;
      const int64_t t0 = now_ns();
      serve(*c, 1);  // may close c
      spend(b, now_ns() - t0);
    }
  }
}

bool endpoint::earn(handshake_budget& b, int64_t now) {
  b.credit_ns = std::min(handshake_burst_ns, b.credit_ns + (now - b.at_ns) / handshake_share);
  b.at_ns = now;
  return b.credit_ns > 0;
}

void endpoint::spend(handshake_budget& b, int64_t ns) {
  b.credit_ns -= ns;
  test_hooks::handshake_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

void endpoint::park(bool unix_sock) {
  // Out of the epoll set rather than masked: a masked socket still reports a hang-up,
  // which would wake this loop for a connection it is not going to serve.
  const int fd = unix_sock ? unix_fd_ : tcp_fd_;
  if (fd >= 0) ::epoll_ctl(ep_fd_, EPOLL_CTL_DEL, fd, nullptr);
  budgets_[unix_sock].parked = true;
}

void endpoint::park_connection(const server_conn& c) {
  ::epoll_ctl(ep_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  budgets_[c.unix_sock].waiting.emplace_back(c.fd, c.serial);
}

void endpoint::unpark(bool unix_sock) {
  handshake_budget& b = budgets_[unix_sock];
  const int lfd = unix_sock ? unix_fd_ : tcp_fd_;
  if (b.parked && lfd >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, lfd, &ev);
  }
  for (const auto& [fd, serial] : b.waiting) {
    // Closed meanwhile (its time ran out) or the number reused: not ours to re-arm.
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second->serial != serial) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    ::epoll_ctl(ep_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  b.waiting.clear();
  b.parked = false;
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
  if (flush_replies(c.fd, c.tx, deadline)) (void)writev_full(c.fd, v, 2, deadline);
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
    return send_reply(c.fd, c.tx, v, 2, deadline);
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
  return send_reply(c.fd, c.tx, v, 2, deadline);
}

namespace {

// Moves the bytes of one request at the responder: from the socket, or across processes.
struct server_xfer {
  int fd;
  rx_buffer& rx;
  tx_queue& tx;
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
      const ssize_t r = test_hooks::refuse_cma.load(std::memory_order_relaxed)
                            ? -1
                            : ::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
      if (r < 0 || static_cast<uint64_t>(r) != total) failed = true;
      return !failed;
    }
    consumed = true;
    if (!rx_readv(fd, rx, local.data(), static_cast<int>(local.size()), deadline)) failed = true;
    return !failed;
  }
  void read_out(const uint8_t* from, uint64_t n) {
    frame_hdr h = make_hdr(ftype::response, 0, req.src_qpn, req.dst_qpn, req.seq);
    responded = true;
    if (cma) {
      std::vector<iovec> remote;
      for (const iov_entry& e : iovs) remote.push_back({reinterpret_cast<void*>(e.addr), static_cast<size_t>(e.len)});
      iovec local{const_cast<uint8_t*>(from), static_cast<size_t>(n)};
      const ssize_t r = test_hooks::refuse_cma.load(std::memory_order_relaxed)
                            ? -1
                            : ::process_vm_writev(pid, &local, 1, remote.data(), remote.size(), 0);
      if (r < 0 || static_cast<uint64_t>(r) != n) {
        failed = true;
        return;
      }
      iovec v{&h, sizeof(h)};
      if (!send_reply(fd, tx, &v, 1, deadline)) failed = true;
      return;
    }
    h.length = static_cast<uint32_t>(n);
    iovec v[2] = {{&h, sizeof(h)}, {const_cast<uint8_t*>(from), static_cast<size_t>(n)}};
    if (!send_reply(fd, tx, v, 2, deadline)) failed = true;
  }
  void atomic_result(uint64_t v) {
    old = v;
    has_old = true;
  }
};

}  // namespace

bool endpoint::answer_map(server_conn& c, const frame_hdr& h, uint32_t rkey, uint64_t deadline) {
  // The same checks a request to this MR would pass, except the range: the peer gets the
  // whole MR (its own memfd, nothing else: design.md 19) and checks bounds itself, as the
  // rkey lets it address the whole MR anyway.
  map_ok_body ok{};
  int fds[2] = {-1, -1};
  bool granted = false;
  const uint64_t pair = pair_key(h.src_qpn, h.dst_qpn);
  if (c.unix_sock && dev_.cfg.shm_map && c.map_burned.count(pair) == 0) {
    std::shared_ptr<soft_qp> q = qps().find(h.dst_qpn);
    std::shared_lock kl(keys().lock());  // the grant and the MR's life are serialised
    if (q && q->dev == &dev_) {
      std::lock_guard lk(q->resp_mu);
      const uint32_t st = q->state.load(std::memory_order_acquire);
      const bool ready = st == static_cast<uint32_t>(verbs::qp_state::rtr) || st == static_cast<uint32_t>(verbs::qp_state::rts);
      const mr_entry* e = keys().find(rkey, true);
      if (e == nullptr || (q->pd != nullptr && e->pdn != q->pd->pdn)) c.map_burned.insert(pair);
      if (!q->destroyed && ready && q->attr.dest_qp_num == h.src_qpn && e != nullptr && e->pdn == q->pd->pdn) {
        const uint32_t access = e->access & q->attr.access_flags & (verbs::access::remote_read | verbs::access::remote_write);
        uint64_t off = 0;
        // A grant without remote write gets a read-only descriptor (and the requester maps
        // it read-only), so even a stray write of the peer cannot reach the memory.
        const bool writable = (access & verbs::access::remote_write) != 0;
        if (access != 0 && shm::registration_file(rkey, writable, &fds[0], &off)) {
          fds[1] = shm::table_fd();
          uint32_t epoch = 0;
          if (fds[1] >= 0 && shm::grant(rkey, &epoch)) {
            q->granted_rkeys.push_back(rkey);  // taken back if q leaves RTR/RTS
            granted = true;
            ok = {e->addr, e->length, off, access, epoch};
          }
        }
      }
    }
  }
  frame_hdr r = make_hdr(granted ? ftype::map_ok : ftype::map_nak, granted ? sizeof(ok) : 0, h.src_qpn, h.dst_qpn, h.seq);
  bool sent;
  if (granted) {
    iovec v[2] = {{&r, sizeof(r)}, {&ok, sizeof(ok)}};
    sent = flush_replies(c.fd, c.tx, deadline) && send_with_fds(c.fd, v, 2, fds, 2, deadline);
  } else {
    iovec v{&r, sizeof(r)};
    sent = send_reply(c.fd, c.tx, &v, 1, deadline);
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  return sent;
}

endpoint::turn endpoint::serve_ready(server_conn& c, int budget) {
  // Several frames per turn, not just one: a pipelined peer sends many back to back, and
  // a wake-up per frame would cost more than the frames. Not all of them: the others wait.
  // Bytes left in rx would never wake epoll again, so a turn cut short says `more`.
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  for (int served = 0;; ++served) {
    if (served == budget) return flush_replies(c.fd, c.tx, deadline) ? turn::more : turn::closed;
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
      if (f == 0) return flush_replies(c.fd, c.tx, deadline) ? turn::idle : turn::closed;
    }
    if (!serve_frame(c)) return turn::closed;
  }
}

bool endpoint::serve_frame(server_conn& c) {
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  // Every rule about what a frame may say is in wire_frame.cpp (shared with the fuzzer);
  // this function only reads the bytes those rules ask for and acts on the answer.
  uint8_t raw[sizeof(frame_hdr)];
  frame_hdr h{};
  if (!rx_read(c.fd, c.rx, raw, sizeof(raw), deadline)) return false;
  if (!parse_header(raw, sizeof(raw), &h) || !server_accepts(h, c.stage)) {
    // Before authentication, anything but the handshake is refused with the reason (an
    // old client, a stranger); afterwards a bad frame just closes (the protocol's rule).
    if (c.stage != conn_stage::authenticated) refuse(c, auth::reason::no_proof);
    return false;
  }
  const auto t = static_cast<ftype>(h.type);
  if (c.stage != conn_stage::authenticated) return handshake_frame(c, h, deadline);
  if (t == ftype::bind) {
    bind_body b{};
    if (!rx_read(c.fd, c.rx, &b, sizeof(b), deadline)) return false;
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
    if (ready) c.expect[pair_key(h.src_qpn, h.dst_qpn)] = h.seq;  // the requester's next PSN
    frame_hdr r = make_hdr(ready ? ftype::bind_ok : ftype::bind_nak, 0, h.src_qpn, h.dst_qpn, h.seq);
    iovec v{&r, sizeof(r)};
    return send_reply(c.fd, c.tx, &v, 1, deadline);
  }
  const auto bound = c.expect.find(pair_key(h.src_qpn, h.dst_qpn));
  if (bound == c.expect.end()) return false;  // a request or map: bound pair only
  if (t == ftype::map) {
    map_body b{};
    if (!rx_read(c.fd, c.rx, &b, sizeof(b), deadline)) return false;
    return answer_map(c, h, b.rkey, deadline);
  }

  // Validate every field before using any of it: the fixed body first, then the iov list
  // it announces (parse_request says how many bytes it needs; at most 64 + 30 * 16).
  uint8_t head[sizeof(request_body) + max_iov * sizeof(iov_entry)];
  request_view rq;
  size_t have = 0;
  parse_status ps = parse_request(h, head, have, c.cma, &rq);
  while (ps == parse_status::need_more) {
    if (!rx_read(c.fd, c.rx, head + have, rq.head_bytes - have, deadline)) return false;
    have = rq.head_bytes;
    ps = parse_request(h, head, have, c.cma, &rq);
  }
  if (ps != parse_status::ok) return false;
  const request_body& b = rq.body;
  const bool cma = rq.cma;
  const uint64_t payload = rq.payload;
  const std::span<const iov_entry> iovs(rq.iov, b.n_iov);

  server_xfer x{c.fd, c.rx, c.tx, c.pid, cma, iovs, payload, deadline, h};
  respond_result rr{};
  // Requests of a pair run in PSN order, as on an RC link: after a request that was not
  // executed (dropped, RNR) or failed, the ones the requester had already pipelined
  // behind it are dropped until it sends that PSN again (or, after an error, never).
  bool dropped = h.seq != bound->second;
  if (!dropped) {
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
  c.unproductive = dropped || rr.req != syndrome::none;
  if (!dropped && !rr.rnr && rr.req == syndrome::none) bound->second = h.seq + 1;
  if (!x.consumed && payload != 0 && !drain(c.fd, c.rx, payload, deadline)) return false;
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
  return send_reply(c.fd, c.tx, v, r.length != 0 ? 2 : 1, deadline);
}

// ---- the requester side ---------------------------------------------------------------

std::string endpoint::log_name() const {
  return "soft" + std::to_string(dev_.index) + " (pid " + std::to_string(::getpid()) + ")";
}

namespace {

std::string describe_peer(const parsed_address& p, bool unix_sock) {
  return "soft" + std::to_string(p.dev_index) + " of pid " + std::to_string(p.pid) + (unix_sock ? " (unix socket)" : " (tcp)");
}

}  // namespace

bool endpoint::handshake(int fd, bool unix_sock, const void* peer_addr, uint64_t deadline, bool* cma, std::string* why) {
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
  bool cma = false;
  if (!handshake(c->fd, unix_sock, a.data(), deadline, &cma, why)) return nullptr;
  c->cma = cma;
  std::lock_guard lk(clients_mu_);
  auto [it, fresh] = clients_.emplace(a, c);
  if (!fresh && !it->second->dead) return it->second;  // another thread won the race
  it->second = c;
  return c;
}

namespace {

// The connection broke, or its peer stopped answering: every request in flight on it
// fails (the executor turns that into TRANSPORT_RETRY_EXC and flushes). Caller holds mu.
void kill_locked(client_conn& c) {
  c.dead.store(true, std::memory_order_release);
  ::shutdown(c.fd, SHUT_RDWR);
  for (const std::shared_ptr<wire_op>& op : c.fifo) {
    op->result = {outcome::fatal};
    op->done.store(true, std::memory_order_release);
  }
  c.fifo.clear();
  c.resp_bytes = 0;
  c.req_bytes = 0;
}

constexpr uint64_t response_overhead = sizeof(frame_hdr);
// Response bytes the requests in flight may bring back at most. The server writes every
// response in full before it reads the next request; as long as what it owes us fits in
// the socket buffers, it never blocks on us, so it keeps reading, so our sends never block
// on it: no deadlock even though requests and responses share one connection.
constexpr uint64_t response_budget = 64 * 1024;

// Places the data of a successful READ response (or an atomic's old value) where the WQE
// said, after checking again that those local buffers are still registered: the user may
// have deregistered them while the request was in flight (as on a NIC: a local
// protection error).
bool place_response(client_conn& c, wire_op& op, uint64_t len, uint64_t deadline, syndrome* s) {
  bool keys_ok = true;
  for (uint32_t i = 0; i < op.num_sg; ++i) {
    const gather_entry& g = op.sg[i];
    if (g.length != 0 && !keys().local_range_ok(g.lkey, op.pdn, g.addr, g.length, true)) keys_ok = false;
  }
  if (!keys_ok) {
    *s = syndrome::local_prot;
    return drain(c.fd, c.rx, len, deadline);
  }
  if (op.atomic_size != 0) {
    uint64_t old = 0;
    if (!rx_read(c.fd, c.rx, &old, 8, deadline)) return false;
    // Host order, as the in-process wire (IBV_ATOMIC_HCA mode, PRM 6.4).
    std::memcpy(reinterpret_cast<void*>(op.sg[0].addr), &old, op.atomic_size);
    return true;
  }
  iovec out[max_gather];
  int n = 0;
  for (uint32_t i = 0; i < op.num_sg; ++i) out[n++] = {reinterpret_cast<void*>(op.sg[i].addr), op.sg[i].length};
  return rx_readv(c.fd, c.rx, out, n, deadline);
}

// Reads every response that has arrived and finishes its op. Caller holds the key table's
// shared lock and c.mu. Returns how many ops it finished.
uint32_t read_responses_locked(client_conn& c, uint32_t timeout_ms) {
  uint32_t got = 0;
  bool filled = false;
  uint64_t deadline = 0;  // read from the clock once, when first needed
  while (!c.dead.load(std::memory_order_relaxed)) {
    if (c.rx.size() == 0) {
      // One recv per call: another would mostly find nothing (a syscall for EAGAIN).
      if (filled) break;
      filled = true;
      const int f = rx_fill(c.fd, c.rx);
      if (f < 0) {
        kill_locked(c);
        break;
      }
      if (f == 0) break;
    }
    if (deadline == 0) deadline = now_ms() + timeout_ms;
    frame_hdr rh{};
    if (c.fifo.empty() || !rx_read(c.fd, c.rx, &rh, sizeof(rh), deadline)) {
      kill_locked(c);  // bytes nobody asked for, or a response cut short
      break;
    }
    std::shared_ptr<wire_op> op = c.fifo.front();
    frame_hdr req = make_hdr(ftype::request, 0, op->src_qpn, op->dst_qpn, op->psn);
    const response_kind rk = check_response(rh, req, op->resp_len);
    if (rk == response_kind::bad) {
      kill_locked(c);
      break;
    }
    outcome o{outcome::done};
    if (rk == response_kind::drop) o = {outcome::retry};
    if (rk == response_kind::rnr) o = {outcome::rnr, syndrome::none, rh.rnr_timer};
    if (rk == response_kind::done) {
      o.synd = static_cast<syndrome>(rh.syndrome);
      if (rh.length != 0 && !place_response(c, *op, rh.length, deadline, &o.synd)) {
        kill_locked(c);
        break;
      }
    }
    c.fifo.pop_front();
    c.resp_bytes -= op->resp_len + response_overhead;
    c.req_bytes -= op->req_len;
    op->result = o;
    op->done.store(true, std::memory_order_release);
    ++got;
  }
  return got;
}

// Asks the peer whether we may map the MR behind rkey (same host, nothing in flight on
// the connection, so the reply is the next frame and nothing sits in rx). Caches the
// answer. Returns the mapping, or null (not mappable: use requests). False in *alive if
// the connection broke.
shm::mapping* map_peer_mr(client_conn& c, uint32_t rkey, uint32_t src, uint32_t dst, uint32_t seq, uint64_t deadline,
                          bool* alive) {
  *alive = true;
  auto it = c.maps.find(rkey);
  if (it != c.maps.end()) return it->second.get();
  if (!c.fifo.empty() || c.rx.size() != 0) return nullptr;  // ask later, when quiet
  frame_hdr h = make_hdr(ftype::map, sizeof(map_body), src, dst, seq);
  map_body b{rkey, 0};
  iovec v[2] = {{&h, sizeof(h)}, {&b, sizeof(b)}};
  frame_hdr rh{};
  int fds[2] = {-1, -1};
  if (!writev_full(c.fd, v, 2, deadline) || recv_with_fds(c.fd, &rh, sizeof(rh), fds, 2, deadline) < 0) {
    *alive = false;
    return nullptr;
  }
  const map_reply mr = check_map_reply(rh, h);
  std::shared_ptr<shm::mapping> m;
  if (mr == map_reply::ok) {
    map_ok_body ok{};
    int more[2] = {-1, -1};
    const int n_more = recv_with_fds(c.fd, &ok, sizeof(ok), more, 2, deadline);
    if (n_more < 0) {
      *alive = false;
    } else {
      for (int i = 0; i < n_more; ++i) {
        if (fds[1] < 0) fds[fds[0] < 0 ? 0 : 1] = more[i];
        else ::close(more[i]);
      }
    }
    if (*alive && fds[0] >= 0 && fds[1] >= 0 && ok.length != 0) {
      if (c.table == nullptr) {
        void* t = ::mmap(nullptr, size_t{shm::table_slots} * sizeof(shm::revocation_slot), PROT_READ | PROT_WRITE,
                         MAP_SHARED, fds[1], 0);
        if (t != MAP_FAILED) {
          c.table = static_cast<shm::revocation_slot*>(t);
          c.table_map = t;
          c.table_len = size_t{shm::table_slots} * sizeof(shm::revocation_slot);
        }
      }
      const uint32_t slot = (rkey >> 8) - 2;
      auto mp = std::make_shared<shm::mapping>();
      void* base = c.table != nullptr && (rkey >> 8) >= 2 && slot < shm::table_slots
                       ? shm::map_file(fds[0], ok.file_off, ok.length, (ok.access & verbs::access::remote_write) != 0,
                                       &mp->map_addr, &mp->map_len)
                       : nullptr;
      if (base != nullptr) {
        mp->base = static_cast<uint8_t*>(base);
        mp->remote_addr = ok.addr;
        mp->length = ok.length;
        mp->access = ok.access;
        mp->rkey = rkey;
        mp->epoch = ok.epoch;
        mp->slot = &c.table[slot];
        m = std::move(mp);
      }
    }
  } else if (mr == map_reply::bad) {
    *alive = false;
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!*alive) return nullptr;
  c.maps[rkey] = m;
  return m.get();
}

enum class mapped_result : uint8_t { copied, out_of_range, revoked, dead };

// A WRITE (no immediate) or READ through a mapping: one memcpy per gather entry, under a
// user count the owner's deregistration waits for. The local buffers were checked (and
// stay registered: the caller holds the key table's shared lock).
mapped_result mapped_copy(int fd, uint32_t& copies, shm::mapping& m, const wqe_reader& r, const parsed_wqe& w) {
  const bool write = w.opcode == static_cast<uint8_t>(send_opcode::rdma_write);
  // Outside the grant: the peer's responder reports the error, over the frame path.
  if (!(m.access & (write ? verbs::access::remote_write : verbs::access::remote_read))) return mapped_result::out_of_range;
  if (w.raddr < m.remote_addr || w.length > m.length || w.raddr - m.remote_addr > m.length - w.length) {
    return mapped_result::out_of_range;
  }
  // Nothing else crosses this connection while we copy, so a dead peer shows only as EOF:
  // look every 256 copies (one syscall), which bounds what "completes" after a crash.
  if ((++copies & 255) == 0) {
    char x;
    const ssize_t n = ::recv(fd, &x, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return mapped_result::dead;
  }
  m.slot->users.fetch_add(1, std::memory_order_seq_cst);
  if (m.slot->key.load(std::memory_order_seq_cst) != m.rkey || m.slot->epoch.load(std::memory_order_seq_cst) != m.epoch) {
    m.slot->users.fetch_sub(1, std::memory_order_seq_cst);
    return mapped_result::revoked;  // deregistered: the peer's responder says so
  }
  uint8_t* remote = m.base + (w.raddr - m.remote_addr);
  for (uint32_t i = 0; i < w.num_sg; ++i) {
    const gather_entry& g = w.sg[i];
    if (g.length == 0) continue;
    if (!write) {
      std::memcpy(reinterpret_cast<void*>(g.addr), remote, g.length);
    } else if (g.is_inline) {
      r.copy_out(g.inline_off, remote, g.length);
    } else {
      std::memcpy(remote, reinterpret_cast<const void*>(g.addr), g.length);
    }
    remote += g.length;
  }
  m.slot->users.fetch_sub(1, std::memory_order_release);
  return mapped_result::copied;
}

}  // namespace

endpoint::mapped_copy_status endpoint::copy_mapped(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w) {
  if (!qp.wire_bound || w.length == 0 || !dev_.cfg.shm_map) return mapped_copy_status::not_mapped;
  if (w.opcode != static_cast<uint8_t>(send_opcode::rdma_write) && w.opcode != static_cast<uint8_t>(send_opcode::rdma_read)) {
    return mapped_copy_status::not_mapped;
  }
  client_conn* c = qp.wire_conn.get();  // the QP's own reference keeps it (we hold exec_mu)
  if (c == nullptr || !c->cma || c->dead.load(std::memory_order_acquire)) return mapped_copy_status::not_mapped;
  for (const auto& m : qp.wire_maps) {
    if (m->rkey != w.rkey) continue;
    const mapped_result mr = mapped_copy(c->fd, qp.wire_copies, *m, r, w);
    if (mr == mapped_result::copied) return mapped_copy_status::copied;
    if (mr == mapped_result::dead) {
      std::lock_guard lk(c->mu);
      kill_locked(*c);
      return mapped_copy_status::dead;
    }
    return mapped_copy_status::not_mapped;  // revoked or outside the grant: issue() tells the responder
  }
  return mapped_copy_status::not_mapped;
}

issue_status endpoint::issue(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w, const std::shared_ptr<wire_op>& op) {
  auto finish_now = [&op](outcome o) {
    op->result = o;
    op->done.store(true, std::memory_order_release);
    return issue_status::now;
  };
  std::string why;
  if (!listening_.load(std::memory_order_acquire) && !listen(&why)) return finish_now({outcome::fatal});
  std::shared_ptr<client_conn> c = qp.wire_conn;
  if (!c || c->dead.load(std::memory_order_acquire)) {
    // The executor retires every op of a dead connection (fatal) before it issues again,
    // so nothing of this QP is in flight on the old one.
    address a;
    std::memcpy(a.data(), qp.attr.av.dgid, 16);
    c = client(a, &why);
    if (!c) return finish_now({outcome::fatal});  // nobody listens there: the peer is gone
    qp.wire_conn = c;
    qp.wire_bound = false;
    qp.wire_maps.clear();  // mappings belong to the old connection
  }
  // Same host, the peer's MR in alloc_shared() memory: copy it ourselves. Only when every
  // earlier WQE of this QP has completed, so the copy cannot overtake one still on the
  // wire (RC order). A mapping this QP used before needs no lock (the QP's own cache);
  // the first use of an rkey asks the peer, under the connection's lock, below.
  const bool mappable = (w.opcode == static_cast<uint8_t>(send_opcode::rdma_write) ||
                         w.opcode == static_cast<uint8_t>(send_opcode::rdma_read)) &&
                        c->cma && dev_.cfg.shm_map && w.length != 0 &&
                        (qp.wire_ops.empty() || qp.wire_ops.back()->done.load(std::memory_order_acquire));
  bool revoked = false;
  if (mappable && qp.wire_bound) {
    for (size_t i = 0; i < qp.wire_maps.size(); ++i) {
      shm::mapping& m = *qp.wire_maps[i];
      if (m.rkey != w.rkey) continue;
      const mapped_result mr = mapped_copy(c->fd, qp.wire_copies, m, r, w);
      if (mr == mapped_result::copied) return finish_now({outcome::done, syndrome::none});
      if (mr == mapped_result::revoked) {
        qp.wire_maps.erase(qp.wire_maps.begin() + static_cast<std::ptrdiff_t>(i));
        revoked = true;
      }
      if (mr == mapped_result::dead) {
        std::lock_guard lk(c->mu);
        kill_locked(*c);
        return finish_now({outcome::fatal});
      }
      break;
    }
  }
  std::lock_guard lk(c->mu);
  if (c->dead.load(std::memory_order_relaxed)) return finish_now({outcome::fatal});
  if (revoked) c->maps.erase(w.rkey);  // a new MR may get this rkey's slot: ask again then
  // Read from the clock only when something may wait (the mapped path never does).
  uint64_t deadline_at = 0;
  auto deadline = [&] {
    if (deadline_at == 0) deadline_at = now_ms() + dev_.cfg.wire_timeout_ms;
    return deadline_at;
  };
  auto fail = [&] {
    kill_locked(*c);
    return finish_now({outcome::fatal});
  };
  const uint32_t src = qp.qpn, dst = qp.attr.dest_qp_num;
  if (!qp.wire_bound) {
    // The bind's reply must be the next frame we read: wait until nothing is in flight.
    if (!c->fifo.empty()) return issue_status::busy;
    // The bind carries our next PSN: the responder expects it from this pair.
    frame_hdr h = make_hdr(ftype::bind, sizeof(bind_body), src, dst, op->psn);
    bind_body b{};
    std::memcpy(b.token, qp.attr.av.token, 16);
    iovec v[2] = {{&h, sizeof(h)}, {&b, sizeof(b)}};
    frame_hdr rh{};
    if (!writev_full(c->fd, v, 2, deadline()) || !rx_read(c->fd, c->rx, &rh, sizeof(rh), deadline())) return fail();
    const bind_reply br = check_bind_reply(rh, h.seq);
    if (br == bind_reply::nak) return finish_now({outcome::retry});  // peer QP not ready yet
    if (br != bind_reply::ok) return fail();
    qp.wire_bound = true;
  }
  if (mappable && !revoked) {
    bool in_cache = false;
    for (const auto& m : qp.wire_maps) in_cache = in_cache || m->rkey == w.rkey;
    bool alive = true;
    shm::mapping* m = in_cache ? nullptr : map_peer_mr(*c, w.rkey, src, dst, op->psn, deadline(), &alive);
    if (!alive) return fail();
    if (m != nullptr) {
      qp.wire_maps.push_back(c->maps[w.rkey]);
      const mapped_result mr = mapped_copy(c->fd, qp.wire_copies, *m, r, w);
      if (mr == mapped_result::copied) return finish_now({outcome::done, syndrome::none});
      if (mr == mapped_result::dead) return fail();
      if (mr == mapped_result::revoked) {
        qp.wire_maps.pop_back();
        c->maps.erase(w.rkey);
      }
    }
  }
  const uint32_t window = dev_.cfg.wire_window == 0 ? 1 : dev_.cfg.wire_window;
  if (c->fifo.size() >= window) return issue_status::busy;

  const bool atomic = w.atomic_size != 0;
  const bool read = w.opcode == static_cast<uint8_t>(send_opcode::rdma_read);
  const bool payload_op = carries_payload(w.opcode);
  bool all_pointers = true;
  for (uint32_t i = 0; i < w.num_sg; ++i) all_pointers = all_pointers && !w.sg[i].is_inline;
  const bool cma = c->cma && (payload_op || read) && all_pointers && w.length >= dev_.cfg.shm_single_copy_min;
  if (!cma && w.length > max_body - sizeof(request_body)) return finish_now({outcome::done, syndrome::local_length});
  const uint64_t resp_len = read && !cma ? w.length : atomic ? 8 : 0;
  // A response bigger than the budget goes alone: nothing else in flight with it.
  if (!c->fifo.empty() && c->resp_bytes + resp_len + response_overhead > response_budget) return issue_status::busy;
  const uint64_t req_len = payload_op && !cma ? w.length : 0;  // bytes in the socket
  if (c->fifo.size() >= 2 && c->req_bytes + req_len > dev_.cfg.wire_window_bytes) return issue_status::busy;

  frame_hdr h = make_hdr(ftype::request, sizeof(request_body), src, dst, op->psn);
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
        if (inl_used + g.length > sizeof(inl)) return finish_now({outcome::done, syndrome::local_qp_op});
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
  if (!writev_full(c->fd, v, nv, deadline())) return fail();
  if (drop_after_send) ::shutdown(c->fd, SHUT_RDWR);

  op->src_qpn = src;
  op->dst_qpn = dst;
  op->resp_len = resp_len;
  op->pdn = qp.pd->pdn;
  op->atomic_size = w.atomic_size;
  op->num_sg = 0;
  if (resp_len != 0) {
    op->num_sg = w.num_sg;
    op->sg = std::make_unique<gather_entry[]>(w.num_sg);
    for (uint32_t i = 0; i < w.num_sg; ++i) op->sg[i] = w.sg[i];
  }
  op->sent_ms = now_ms();
  op->req_len = req_len;
  c->fifo.push_back(op);
  c->resp_bytes += resp_len + response_overhead;
  c->req_bytes += req_len;
  return issue_status::sent;
}

int endpoint::response_fd(const soft_qp& qp) const { return qp.wire_conn ? qp.wire_conn->fd : -1; }

void endpoint::poll(soft_qp& qp, uint32_t wait_us) {
  std::shared_ptr<client_conn> c = qp.wire_conn;
  if (!c) return;
  const uint32_t timeout_ms = dev_.cfg.wire_timeout_ms;
  for (int round = 0; round < 2; ++round) {
    {
      std::shared_lock kl(keys().lock());  // READ data lands in registered memory
      std::lock_guard lk(c->mu);
      if (c->dead.load(std::memory_order_relaxed) || read_responses_locked(*c, timeout_ms) != 0 || c->fifo.empty()) return;
      if (now_ms() - c->fifo.front()->sent_ms > timeout_ms) {
        kill_locked(*c);  // the peer stopped answering (dead process, dropped link)
        return;
      }
    }
    if (round == 1 || wait_us == 0) return;
    // Wait without the lock: other QPs on this connection keep sending meanwhile.
    pollfd p{c->fd, POLLIN, 0};
    const timespec ts{0, static_cast<long>(wait_us) * 1000};
    (void)::ppoll(&p, 1, &ts, nullptr);
  }
}

}  // namespace gdaki::soft::wire
