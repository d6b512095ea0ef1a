// Shared harness of the wire tier: two processes (the test forks its peer before opening
// any device), each with soft0 and one RC QP, connected through the OOB helper with the
// wire address and token. Helpers from the soft tier post through the real data path.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
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

inline int reap(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace wire_test
