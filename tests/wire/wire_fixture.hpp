// Shared harness of the wire tier: two processes (the test forks its peer before opening
// any device), each with soft0 and one RC QP, connected through the OOB helper with the
// wire address and token. Helpers from the soft tier post through the real data path.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gdaki/oob/tcp_exchange.hpp"
#include "gdaki/providers/soft.hpp"
#include "soft/soft_fixture.hpp"

namespace wire_test {

using namespace soft_test;
namespace oob = gdaki::oob;

// What one side tells the other at setup.
struct setup_blob {
  uint8_t address[16];
  uint8_t token[16];
  uint32_t qpn;
  uint32_t rkey;
  uint64_t buf;
};

inline std::vector<uint8_t> to_bytes(const setup_blob& b) {
  std::vector<uint8_t> v(sizeof(b));
  std::memcpy(v.data(), &b, sizeof(b));
  return v;
}
inline setup_blob from_bytes(const std::vector<uint8_t>& v) {
  setup_blob b{};
  if (v.size() == sizeof(b)) std::memcpy(&b, v.data(), sizeof(b));
  return b;
}
inline std::vector<uint8_t> text(const std::string& s) { return {s.begin(), s.end()}; }
inline std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

// The processes of a wire test are one job, and share its secret the way a user's
// processes would: GDAKI_SOFT_SECRET in the environment (docs/soft-nic.md, Security). Set
// before main, so peers forked later inherit it in memory and peers spawned later in their
// environment (setenv does not replace one the peer already got from us).
[[maybe_unused]] static const bool job_secret_in_environment = [] {
  std::random_device rd;
  static const char* d = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 64; ++i) hex += d[rd() & 15];
  ::setenv("GDAKI_SOFT_SECRET", hex.c_str(), 0);
  return true;
}();

inline std::array<uint8_t, 16> random_token() {
  std::random_device rd;
  std::array<uint8_t, 16> t{};
  for (auto& b : t) b = static_cast<uint8_t>(rd());
  return t;
}

inline void use_wire(const char* wire, uint32_t timeout_ms = 2000) {
  gdaki::soft::config c = gdaki::soft::get_config();
  c.wire = wire;
  c.wire_timeout_ms = timeout_ms;
  gdaki::soft::set_config(c);
}

// RTR attributes naming the peer's wire address and the agreed token.
inline verbs::qp_attr remote_attr(const setup_blob& peer, const uint8_t* token) {
  verbs::qp_attr a = fast_attr();
  a.av.is_global = true;
  std::memcpy(a.av.dgid, peer.address, 16);
  std::memcpy(a.av.token, token, 16);
  return a;
}

// One side: device, PD, one QP (endpoint from the soft tier), a registered buffer.
struct side {
  verbs::device dev;
  verbs::pd pd;
  endpoint ep;
  std::vector<uint8_t> buf;
  verbs::mr mr;
  explicit side(size_t bytes, endpoint_options o = {}) : buf(bytes) {
    dev = verbs::device::open("soft0");
    pd = verbs::pd(dev);
    ep.create(dev, pd, o);
    mr = verbs::mr(pd, buf.data(), buf.size(), verbs::access::all);
  }
  setup_blob blob(const uint8_t* token) const {
    setup_blob b{};
    const auto a = gdaki::soft::local_address(dev);
    std::memcpy(b.address, a.data(), 16);
    std::memcpy(b.token, token, 16);
    b.qpn = ep.qp.qpn();
    b.rkey = mr.rkey();
    b.buf = reinterpret_cast<uint64_t>(buf.data());
    return b;
  }
  // attr: the QP's timers (timeout, retry counts) when not fast_attr()'s.
  void connect(const setup_blob& peer, const uint8_t* token, const verbs::qp_attr& attr = fast_attr()) {
    verbs::qp_attr a = remote_attr(peer, token);
    a.timeout = attr.timeout;
    a.retry_cnt = attr.retry_cnt;
    a.rnr_retry = attr.rnr_retry;
    a.min_rnr_timer = attr.min_rnr_timer;
    verbs::connect_rc(ep.qp, peer.qpn, verbs::access::all, a);
    ep.export_handles(true);
  }
  // The rendezvous as the side that speaks first: sends its blob with a fresh token,
  // receives the peer's and connects to it. Returns the peer's blob.
  setup_blob join(oob::tcp_exchange& x) {
    const auto token = random_token();
    x.send(to_bytes(blob(token.data())));
    const setup_blob peer = from_bytes(x.recv());
    connect(peer, token.data());
    return peer;
  }
};

// FNV-1a of n bytes: how the mapped-path tests compare a target's bytes with theirs.
inline uint64_t fnv(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The target of a mapped-path test (the shared-memory wire): soft0, one QP, and a zeroed
// buffer from soft::alloc_shared (so peers may map it) registered with every right.
// Construct it after use_wire. meet() answers an initiator's side::join; answer() serves
// the queries every such test asks, "hash OFF LEN" (fnv() of LEN bytes at OFF) and "word
// OFF" (the 8 bytes at OFF, in decimal), and returns false for any other command.
struct shared_target {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pd{dev};
  endpoint ep;
  size_t bytes;
  uint8_t* buf;
  std::unique_ptr<verbs::mr> mr;
  explicit shared_target(size_t n) : bytes(n), buf(static_cast<uint8_t*>(gdaki::soft::alloc_shared(n))) {
    std::memset(buf, 0, n);
    ep.create(dev, pd, {});
    mr = std::make_unique<verbs::mr>(pd, buf, n, verbs::access::all);
  }
  ~shared_target() {
    mr.reset();
    gdaki::soft::free_shared(buf);
  }
  shared_target(const shared_target&) = delete;
  shared_target& operator=(const shared_target&) = delete;
  void meet(oob::tcp_exchange& x) {
    const setup_blob peer = from_bytes(x.recv());
    verbs::connect_rc(ep.qp, peer.qpn, verbs::access::all, remote_attr(peer, peer.token));
    ep.export_handles(true);
    setup_blob mine{};
    const auto a = gdaki::soft::local_address(dev);
    std::memcpy(mine.address, a.data(), 16);
    mine.qpn = ep.qp.qpn();
    mine.rkey = mr->rkey();
    mine.buf = reinterpret_cast<uint64_t>(buf);
    x.send(to_bytes(mine));
  }
  bool answer(const std::string& cmd, oob::tcp_exchange& x) {
    if (cmd.rfind("word ", 0) == 0) {
      uint64_t v = 0;
      std::memcpy(&v, buf + std::stoul(cmd.substr(5)), 8);
      x.send(text(std::to_string(v)));
      return true;
    }
    if (cmd.rfind("hash ", 0) == 0) {
      const size_t sp = cmd.find(' ', 5);
      const size_t off = std::stoul(cmd.substr(5, sp - 5)), len = std::stoul(cmd.substr(sp + 1));
      x.send(text(std::to_string(fnv(buf + off, len))));
      return true;
    }
    return false;
  }
  // Connects to the initiator's OOB listener at `port`, meets it, and answers its commands
  // until "bye": answer()'s own, else `other(cmd, x)` (which sends any reply itself).
  template <class Other>
  void serve(uint16_t port, Other other) {
    oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
    meet(x);
    for (;;) {
      const std::string cmd = text(x.recv(60000));
      if (cmd == "bye") return;
      if (!answer(cmd, x)) other(cmd, x);
    }
  }
};

// Forks a peer that runs fn(port) and exits with its return value. The parent gets the
// child's pid; it must reap it (reap()).
template <class Fn>
pid_t fork_peer(uint16_t port, Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn(port);
    } catch (...) {
      rc = 2;
    }
    ::_exit(rc);
  }
  return pid;
}

// Starts this test binary again as a peer process running `role` (see peer_role_main in
// the test file) with the OOB port and one argument. Unlike fork_peer it is safe after
// devices are open: a forked child of a process with running threads can inherit locks
// in their held state (e.g. the sanitizer allocator's), and hang.
inline pid_t spawn_peer(const std::string& role, uint16_t port, const std::string& arg) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("GDAKI_WIRE_TEST_PEER=" + role + ":" + std::to_string(port) + ":" + arg);
  std::vector<char*> envp;
  for (std::string& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  pid_t pid = -1;
  if (::posix_spawn(&pid, exe, nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

// In a binary that uses spawn_peer: runs the requested role instead of the tests (from a
// static initializer placed after the roles), or returns false when this is no peer.
template <class Dispatch>
bool run_as_peer(Dispatch dispatch) {
  const char* v = std::getenv("GDAKI_WIRE_TEST_PEER");
  if (v == nullptr) return false;
  const std::string s = v;
  const size_t a = s.find(':'), b = s.find(':', a + 1);
  int rc = 2;
  try {
    rc = dispatch(s.substr(0, a), static_cast<uint16_t>(std::stoul(s.substr(a + 1, b - a - 1))), s.substr(b + 1));
  } catch (...) {
    rc = 2;
  }
  std::fflush(nullptr);
  ::_exit(rc);
}

inline int reap(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The initiator of a test whose target is a forked process that answers commands: the
// OOB listener, the target's pid, this side and the target's blob. fork_target() first
// (before any device is open here), then the caller's configuration, then meet().
struct forked_initiator {
  oob::tcp_exchange srv = oob::tcp_exchange::listen("127.0.0.1");
  pid_t child = -1;
  std::unique_ptr<side> s;
  setup_blob t{};

  template <class Target>
  void fork_target(Target target_main) {
    child = fork_peer(srv.port(), target_main);
  }
  // Opens this side with `bytes` of buffer, byte i set to fill(i), and meets the target.
  template <class Fill>
  void meet(size_t bytes, Fill fill) {
    s = std::make_unique<side>(bytes);
    for (size_t i = 0; i < s->buf.size(); ++i) s->buf[i] = fill(i);
    srv.accept();
    t = s->join(srv);
  }
  std::string ask(const std::string& cmd) {
    srv.send(text(cmd));
    return text(srv.recv(30000));
  }
  // Says "bye" and returns the target's exit status.
  int finish() {
    srv.send(text("bye"));
    return reap(child);
  }
};

}  // namespace wire_test
