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
  void connect(const setup_blob& peer, const uint8_t* token) {
    verbs::connect_rc(ep.qp, peer.qpn, verbs::access::all, remote_attr(peer, token));
    ep.export_handles(true);
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

}  // namespace wire_test
