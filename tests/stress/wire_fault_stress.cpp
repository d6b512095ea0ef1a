// Randomized wire-fault stress (ctest -L stress): QP pairs that cross a process boundary
// over the soft wire (shared-memory wire and TCP), random operations, and the faults only
// a wire has: the peer process killed with SIGKILL, the connection dropped (before a
// request is sent, or after it is sent and before the answer), and a corrupted frame (one
// header byte flipped on the way). The in-process faults are fault_stress.cpp's.
//
// The peer is this binary started again (posix_spawn of /proc/self/exe with
// GDAKI_WIRE_STRESS_PEER set; a static initializer runs the peer instead of the tests), so
// no process forks while it runs threads. It opens soft0, registers one region between
// two guard pages and, on request over the OOB channel, creates and connects fresh QPs.
// Drops and corruptions are injected with the requester's test hooks
// (src/providers/soft/wire/wire_test_hooks.hpp).
//
// Checked, per round (every WQE is signalled; each pair's driver drains its own CQ):
//   - exactly one CQE per WQE, in posting order (wqe_counter), and none left over;
//   - statuses: successes, then at most one TRANSPORT_RETRY_EXC, then only WR_FLUSH;
//   - a fault round fails at least the pair that carried the fault, and with the peer
//     killed every pair; each error arrives within the wire timeout (+ slack) of the later
//     of the fault and the failed WQE's posting;
//   - data: a shadow of each pair's target range; reads and atomic old values must match
//     it where it is known (a WQE that failed or was flushed may have been delivered:
//     requests are pipelined; its range is unknown until read again); the peer's guard
//     pages never change;
//   - after a fault every pair is rebuilt with new QPs (a killed peer is restarted first)
//     and the run goes on; a watchdog aborts after GDAKI_WIRE_STRESS_WATCHDOG_S (60) s
//     without progress.
// Size: GDAKI_WIRE_STRESS_OPS operations per wire kind (default 3,000);
// GDAKI_WIRE_STRESS_SEED fixes the seed. Counts are printed at the end.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../../src/providers/soft/wire/wire_test_hooks.hpp"
#include "wire/wire_fixture.hpp"

extern char** environ;

namespace {

using namespace wire_test;
namespace hooks = gdaki::soft::wire::test_hooks;
using prm::syndrome;
using clk = std::chrono::steady_clock;

constexpr int n_pairs = 2;
constexpr uint32_t slot = 64 * 1024;   // each pair's target range at the peer
constexpr uint32_t guard = 4096;       // guard bytes on both sides of the peer's region
constexpr uint8_t guard_byte = 0xa5;
constexpr int max_burst = 16;
constexpr uint32_t max_len = 32 * 1024;  // >= 16 KiB takes the single-copy path on shm
constexpr uint32_t timeout_ms = 1000;    // the configured wire timeout
constexpr uint32_t slack_ms = 1000;      // scheduling slack on a loaded machine

uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::strtoull(v, nullptr, 0) : def;
}

void put_bytes(std::vector<uint8_t>& v, const void* p, size_t n) {
  const size_t at = v.size();
  v.resize(at + n);
  std::memcpy(v.data() + at, p, n);
}
template <class T>
void put(std::vector<uint8_t>& v, const T& x) {
  put_bytes(v, &x, sizeof(T));
}
template <class T>
T get(const std::vector<uint8_t>& v, size_t& off) {
  T x{};
  if (off + sizeof(T) <= v.size()) std::memcpy(&x, v.data() + off, sizeof(T));
  off += sizeof(T);
  return x;
}

verbs::qp_attr wire_attr(const uint8_t* address, const uint8_t* token) {
  verbs::qp_attr a = fast_attr();
  a.av.is_global = true;
  std::memcpy(a.av.dgid, address, 16);
  std::memcpy(a.av.token, token, 16);
  return a;
}

// ---- the peer process ------------------------------------------------------------------

// Commands: 'q' n address token qpn[n]: fresh QPs connected to those; answers address,
// rkey, base, qpn[n]. 'c': guards intact? answers "ok" or "bad". 'b': exit 0.
int peer_main(uint16_t port, const char* wire) {
  use_wire(wire, timeout_ms);
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd(d);
  std::vector<uint8_t> mem(guard + n_pairs * slot + guard, guard_byte);
  std::memset(mem.data() + guard, 0, n_pairs * slot);
  verbs::mr mr(pd, mem.data() + guard, n_pairs * slot, verbs::access::all);
  const auto addr = gdaki::soft::local_address(d);
  oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
  std::vector<std::unique_ptr<soft_test::endpoint>> eps;
  for (;;) {
    const std::vector<uint8_t> m = x.recv(24 * 3600 * 1000);  // the parent's death closes it
    if (m.empty()) return 3;
    if (m[0] == 'b') return 0;
    if (m[0] == 'c') {
      bool ok = true;
      for (uint32_t i = 0; i < guard; ++i) ok = ok && mem[i] == guard_byte && mem[guard + n_pairs * slot + i] == guard_byte;
      x.send(text(ok ? "ok" : "bad"));
      continue;
    }
    size_t off = 2;
    const uint8_t n = m[1];
    uint8_t their[16], token[16];
    std::memcpy(their, m.data() + off, 16);
    std::memcpy(token, m.data() + off + 16, 16);
    off += 32;
    eps.clear();
    std::vector<uint8_t> reply;
    put_bytes(reply, addr.data(), addr.size());
    put(reply, mr.rkey());
    put(reply, reinterpret_cast<uint64_t>(mem.data() + guard));
    for (uint8_t i = 0; i < n; ++i) {
      auto e = std::make_unique<soft_test::endpoint>();
      e->create(d, pd, {});
      verbs::connect_rc(e->qp, get<uint32_t>(m, off), verbs::access::all, wire_attr(their, token));
      put(reply, e->qp.qpn());
      eps.push_back(std::move(e));
    }
    x.send(reply);
  }
}

// Runs the peer instead of the tests when started as one.
const bool g_is_peer = [] {
  const char* p = std::getenv("GDAKI_WIRE_STRESS_PEER");
  if (p == nullptr) return false;
  const std::string s = p;
  const size_t colon = s.find(':');
  int rc = 2;
  try {
    rc = peer_main(static_cast<uint16_t>(std::stoul(s.substr(0, colon))), s.c_str() + colon + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wire_fault_stress peer: %s\n", e.what());
  }
  std::fflush(nullptr);
  ::_exit(rc);
}();

// ---- counts ------------------------------------------------------------------------------

enum class op_kind : uint8_t { write, read, fetch_add, compare_swap, count };
constexpr const char* op_names[] = {"write", "read", "fetch_add", "compare_swap"};
enum class fault : uint8_t { none, peer_killed, drop_before_send, drop_after_send, corrupt_header, count };
constexpr const char* fault_names[] = {"none", "peer_killed", "drop_before_send", "drop_after_send", "corrupt_header"};

struct counts {
  uint64_t ops[static_cast<int>(op_kind::count)] = {};
  uint64_t faults[static_cast<int>(fault::count)] = {};
  uint64_t ok = 0, retry_exc = 0, flush = 0, probes = 0;
  uint64_t rounds = 0, rebuilds = 0, restarts = 0, pairs_survived = 0;
  uint64_t max_err_ms = 0;
};

std::atomic<uint64_t> g_progress{0};

#define WS_CHECK(cond, ...)                                        \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::fprintf(stderr, "wire_fault_stress: check failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                           \
      std::fprintf(stderr, "\n");                                  \
      std::fflush(stderr);                                         \
      std::abort();                                                \
    }                                                              \
  } while (0)

// ---- the initiator -----------------------------------------------------------------------

struct peer_proc {
  pid_t pid = -1;
  oob::tcp_exchange x;
  uint8_t address[16] = {};
  uint32_t rkey = 0;
  uint64_t base = 0;

  void start(const char* wire) {
    x = oob::tcp_exchange::listen("127.0.0.1");
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back("GDAKI_WIRE_STRESS_PEER=" + std::to_string(x.port()) + ":" + wire);
    std::vector<char*> envp;
    for (std::string& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, nullptr};
    WS_CHECK(::posix_spawn(&pid, exe, nullptr, nullptr, argv, envp.data()) == 0, "spawning the peer");
    x.accept(30000);
  }
  bool guards_ok() {
    x.send(text("c"));
    return text(x.recv(30000)) == "ok";
  }
  int stop() {
    x.send(text("b"));
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
};

struct op {
  op_kind kind;
  uint32_t roff, len, loff;  // target offset in the pair's slot, length, local offset
  uint64_t a, b;             // add / compare, swap
  uint64_t ticket, first;    // producer counter after the WQE, its first WQEBB
  clk::time_point posted;
};

struct pair_state {
  std::unique_ptr<soft_test::endpoint> ep;
  std::vector<uint8_t> src, dst;  // local: write sources, read / atomic result targets
  verbs::mr src_mr, dst_mr;
  std::vector<uint8_t> shadow, known;  // the peer's slot as we believe it is
  std::mt19937_64 rng;
  uint32_t rqpn = 0;
  bool failed = false;           // this round saw an error CQE
  clk::time_point err_at{};
  uint64_t err_latency_ms = 0;
};

class runner {
 public:
  runner(const char* wire, uint64_t seed) : wire_(wire), rng_(seed) {
    use_wire(wire, timeout_ms);
    dev_ = verbs::device::open("soft0");
    pd_ = verbs::pd(dev_);
    for (int i = 0; i < n_pairs; ++i) {
      auto p = std::make_unique<pair_state>();
      p->rng.seed(seed * 31 + static_cast<uint64_t>(i));
      p->src.resize(max_len * 2);
      for (auto& c : p->src) c = static_cast<uint8_t>(p->rng());
      p->dst.resize(static_cast<size_t>(max_burst + 4) * max_len);
      p->src_mr = verbs::mr(pd_, p->src.data(), p->src.size(), verbs::access::all);
      p->dst_mr = verbs::mr(pd_, p->dst.data(), p->dst.size(), verbs::access::all);
      pairs_.push_back(std::move(p));
    }
    peer_.start(wire);
    reset_shadows();
    rebuild();
  }

  void run(uint64_t total_ops) {
    while (ops_done_ < total_ops) round();
    for (auto& p : pairs_) p->ep.reset();
    WS_CHECK(peer_.guards_ok(), "guard bytes at the peer changed");
    WS_CHECK(peer_.stop() == 0, "peer exit status");
  }

  counts n;

 private:
  void reset_shadows() {
    for (auto& p : pairs_) {
      p->shadow.assign(slot, 0);
      p->known.assign(slot, 1);
    }
  }

  // Fresh QPs on both sides (ours destroyed first; the peer replaces its own).
  void rebuild() {
    const auto token = random_token();
    const auto mine = gdaki::soft::local_address(dev_);
    std::vector<uint8_t> m;
    put(m, uint8_t{'q'});
    put(m, static_cast<uint8_t>(n_pairs));
    put_bytes(m, mine.data(), mine.size());
    put_bytes(m, token.data(), token.size());
    for (auto& p : pairs_) {
      p->ep.reset();
      p->ep = std::make_unique<soft_test::endpoint>();
      p->ep->create(dev_, pd_, {});
      put(m, p->ep->qp.qpn());
    }
    peer_.x.send(m);
    const std::vector<uint8_t> r = peer_.x.recv(30000);
    size_t off = 0;
    std::memcpy(peer_.address, r.data(), 16);
    off = 16;
    peer_.rkey = get<uint32_t>(r, off);
    peer_.base = get<uint64_t>(r, off);
    for (auto& p : pairs_) {
      p->rqpn = get<uint32_t>(r, off);
      verbs::connect_rc(p->ep->qp, p->rqpn, verbs::access::all, wire_attr(peer_.address, token.data()));
      p->ep->export_handles(true);
    }
    ++n.rebuilds;
  }

  op random_op(pair_state& p, int index) {
    op o{};
    o.kind = static_cast<op_kind>(p.rng() % static_cast<int>(op_kind::count));
    if (o.kind == op_kind::write || o.kind == op_kind::read) {
      const uint32_t r = static_cast<uint32_t>(p.rng() % 100);
      o.len = r < 60 ? 1 + static_cast<uint32_t>(p.rng() % 256) : r < 85 ? 1 + static_cast<uint32_t>(p.rng() % 8192)
                                                                           : 16384 + static_cast<uint32_t>(p.rng() % (max_len - 16384));
      o.roff = static_cast<uint32_t>(p.rng() % (slot - o.len + 1));
      o.loff = o.kind == op_kind::write ? static_cast<uint32_t>(p.rng() % (p.src.size() - o.len + 1))
                                        : static_cast<uint32_t>(index) * max_len;
    } else {
      o.len = 8;
      o.roff = static_cast<uint32_t>(p.rng() % (slot / 8)) * 8;
      o.loff = static_cast<uint32_t>(index) * max_len;
      o.a = p.rng();
      if (o.kind == op_kind::compare_swap && p.rng() % 2 == 0) std::memcpy(&o.a, &p.shadow[o.roff], 8);  // a hit
      o.b = p.rng();
    }
    return o;
  }

  void post(pair_state& p, op& o, int pair_index) {
    dev::qp_handle& h = *p.ep->h;
    const uint64_t raddr = peer_.base + static_cast<uint64_t>(pair_index) * slot + o.roff;
    o.posted = clk::now();
    switch (o.kind) {
      case op_kind::write: {
        const dev::sge g = sg(p.src.data() + o.loff, o.len, p.src_mr.lkey());
        o.ticket = post_write(h, raddr, peer_.rkey, &g, 1);
        o.first = o.ticket - dev::wqebbs_rdma(1);
        break;
      }
      case op_kind::read: {
        const dev::sge g = sg(p.dst.data() + o.loff, o.len, p.dst_mr.lkey());
        o.ticket = post_read(h, raddr, peer_.rkey, &g, 1);
        o.first = o.ticket - dev::wqebbs_rdma(1);
        break;
      }
      case op_kind::fetch_add: {
        const dev::sge g = sg(p.dst.data() + o.loff, 8, p.dst_mr.lkey());
        o.ticket = post_fa(h, raddr, peer_.rkey, o.a, g);
        o.first = o.ticket - dev::wqebbs_atomic();
        break;
      }
      default: {
        const dev::sge g = sg(p.dst.data() + o.loff, 8, p.dst_mr.lkey());
        o.ticket = post_cs(h, raddr, peer_.rkey, o.a, o.b, g);
        o.first = o.ticket - dev::wqebbs_atomic();
        break;
      }
    }
  }

  // Applies a completed operation to the shadow and checks what it returned.
  void account(pair_state& p, const op& o, const dev::completion& c, fault f) {
    uint8_t* sh = &p.shadow[o.roff];
    uint8_t* kn = &p.known[o.roff];
    if (!c.ok()) {
      // The request may have been delivered and executed (dropped after sending, a
      // corrupted seq answered), and so may a flushed one: the wire pipelines requests,
      // so those behind the failed one may have reached the peer before the link broke
      // (as on RDMA, a flushed WQE's remote effect is undefined). Its target is unknown
      // until read again.
      if (o.kind != op_kind::read) std::memset(kn, 0, o.len);
      return;
    }
    switch (o.kind) {
      case op_kind::write:
        std::memcpy(sh, p.src.data() + o.loff, o.len);
        std::memset(kn, 1, o.len);
        break;
      case op_kind::read: {
        const uint8_t* got_bytes = p.dst.data() + o.loff;
        for (uint32_t i = 0; i < o.len; ++i) {
          WS_CHECK(!kn[i] || got_bytes[i] == sh[i], "READ byte %u of %u at %u: got %02x, shadow %02x (fault %s)", i, o.len,
                   o.roff, got_bytes[i], sh[i], fault_names[static_cast<int>(f)]);
        }
        std::memcpy(sh, got_bytes, o.len);
        std::memset(kn, 1, o.len);
        break;
      }
      default: {
        uint64_t old = 0, expect = 0;
        std::memcpy(&old, p.dst.data() + o.loff, 8);
        std::memcpy(&expect, sh, 8);
        bool all_known = true;
        for (int i = 0; i < 8; ++i) all_known = all_known && kn[i];
        WS_CHECK(!all_known || old == expect, "%s at %u: old value %llx, shadow %llx (fault %s)",
                 op_names[static_cast<int>(o.kind)], o.roff, (unsigned long long)old, (unsigned long long)expect,
                 fault_names[static_cast<int>(f)]);
        const uint64_t next = o.kind == op_kind::fetch_add ? old + o.a : (old == o.a ? o.b : old);
        std::memcpy(sh, &next, 8);
        std::memset(kn, 1, 8);
        break;
      }
    }
  }

  // Waits for o's CQE: in order, one per WQE, the status sequence of a QP.
  // fault_ns: when the fault was injected (read once an error is seen: it is set by then).
  void complete(pair_state& p, const op& o, fault f, const std::atomic<int64_t>& fault_ns) {
    const got g = wait_cqe(*p.ep, false, std::chrono::milliseconds(timeout_ms * 4 + slack_ms * 4));
    WS_CHECK(g.ok, "no CQE within %u ms (fault %s)", timeout_ms * 4 + slack_ms * 4, fault_names[static_cast<int>(f)]);
    g_progress.fetch_add(1, std::memory_order_relaxed);
    const dev::completion& c = g.c;
    WS_CHECK(c.wqe_counter == static_cast<uint16_t>(o.first), "CQE for WQEBB %u, expected %u", c.wqe_counter,
             static_cast<unsigned>(o.first & 0xffff));
    if (c.ok()) {
      WS_CHECK(!p.failed, "a success after an error (fault %s)", fault_names[static_cast<int>(f)]);
    } else if (!p.failed) {
      WS_CHECK(c.syndrome == syndrome::transport_retry_exc, "first error %s (fault %s)", prm::to_string(c.syndrome),
               fault_names[static_cast<int>(f)]);
      WS_CHECK(f != fault::none, "an error without a fault: %s", prm::to_string(c.syndrome));
      p.failed = true;
      p.err_at = clk::now();
      const clk::time_point fault_at{clk::duration(fault_ns.load())};
      const auto from = o.posted > fault_at ? o.posted : fault_at;
      p.err_latency_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(p.err_at - from).count());
      WS_CHECK(p.err_latency_ms <= timeout_ms + slack_ms, "error %llu ms after the fault (wire timeout %u ms)",
               (unsigned long long)p.err_latency_ms, timeout_ms);
      if (p.err_latency_ms > n.max_err_ms) n.max_err_ms = p.err_latency_ms;
    } else {
      WS_CHECK(c.syndrome == syndrome::wr_flush, "after the first error: %s", prm::to_string(c.syndrome));
    }
    (c.ok() ? n.ok : c.syndrome == syndrome::wr_flush ? n.flush : n.retry_exc) += 1;
    account(p, o, c, f);
  }

  void round() {
    ++n.rounds;
    const uint32_t r = static_cast<uint32_t>(rng_() % 100);
    const fault f = r < 70 ? fault::none : static_cast<fault>(1 + (r - 70) % 4);
    ++n.faults[static_cast<int>(f)];
    std::vector<std::vector<op>> plans(n_pairs);
    for (int i = 0; i < n_pairs; ++i) {
      pairs_[static_cast<size_t>(i)]->failed = false;
      const int burst = 2 + static_cast<int>(rng_() % (max_burst - 1));
      for (int k = 0; k < burst; ++k) plans[static_cast<size_t>(i)].push_back(random_op(*pairs_[static_cast<size_t>(i)], k));
    }
    // Pair 0's driver injects the fault after one of its WQEs, never after the last, so
    // at least one more request follows to carry an armed hook.
    const size_t fault_after = rng_() % (plans[0].size() - 1);
    const uint32_t corrupt_offsets[] = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 15, 19, 20, 21, 22, 23};
    const uint32_t corrupt_at = corrupt_offsets[rng_() % std::size(corrupt_offsets)];
    const uint8_t corrupt_mask = static_cast<uint8_t>(1 + rng_() % 255);
    std::atomic<int64_t> fault_ns{clk::now().time_since_epoch().count() + (int64_t{1} << 60)};

    auto drive = [&](int i) {
      pair_state& p = *pairs_[static_cast<size_t>(i)];
      std::vector<op>& plan = plans[static_cast<size_t>(i)];
      for (size_t k = 0; k < plan.size(); ++k) {
        post(p, plan[k], i);
        if (i == 0 && k == fault_after && f != fault::none) {
          fault_ns.store(clk::now().time_since_epoch().count());
          switch (f) {
            case fault::peer_killed: ::kill(peer_.pid, SIGKILL); break;
            case fault::drop_before_send: hooks::arm(hooks::fault::drop_before_send); break;
            case fault::drop_after_send: hooks::arm(hooks::fault::drop_after_send); break;
            default: hooks::arm(hooks::fault::corrupt_header, corrupt_at, corrupt_mask); break;
          }
        }
      }
      for (const op& o : plan) complete(p, o, f, fault_ns);
    };
    std::vector<std::thread> th;
    for (int i = 1; i < n_pairs; ++i) th.emplace_back(drive, i);
    drive(0);
    for (auto& t : th) t.join();
    for (int i = 0; i < n_pairs; ++i) {
      for (const op& o : plans[static_cast<size_t>(i)]) ++n.ops[static_cast<int>(o.kind)];
      ops_done_ += plans[static_cast<size_t>(i)].size();
    }
    if (f == fault::none) {
      for (auto& p : pairs_) WS_CHECK(!p->failed, "an error in a round without a fault");
      return;
    }
    // The fault has hit (a kill is immediate; an armed hook is consumed by the next request
    // frame, and pair 0 posted at least one after arming).
    WS_CHECK(hooks::disarm() == hooks::fault::none, "fault %s was never delivered", fault_names[static_cast<int>(f)]);
    bool any_failed = false;
    for (int i = 0; i < n_pairs; ++i) {
      pair_state& p = *pairs_[static_cast<size_t>(i)];
      // A pair that has not failed yet: a few probes. With the peer dead one must fail; a
      // pair that bound on a fresh connection after a drop may legitimately survive.
      for (int k = 0; k < 4 && !p.failed; ++k) {
        op o{};
        o.kind = op_kind::write;
        o.len = 8;
        o.roff = static_cast<uint32_t>(p.rng() % (slot / 8)) * 8;
        o.loff = 0;
        post(p, o, i);
        ++n.probes;
        ++ops_done_;
        ++n.ops[static_cast<int>(op_kind::write)];
        complete(p, o, f, fault_ns);
      }
      WS_CHECK(p.failed || f != fault::peer_killed, "pair %d still works with its peer killed", i);
      WS_CHECK(stays_empty(*p.ep, false, std::chrono::milliseconds(2)), "a CQE nobody asked for");
      if (!p.failed) ++n.pairs_survived;
      any_failed = any_failed || p.failed;
    }
    WS_CHECK(any_failed, "fault %s failed no pair", fault_names[static_cast<int>(f)]);
    if (f == fault::peer_killed) {
      int st = 0;
      ::waitpid(peer_.pid, &st, 0);
      WS_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "killed peer's status %d", st);
      peer_.pid = -1;
      for (auto& p : pairs_) p->ep.reset();  // before the old peer's address can be reused
      peer_.start(wire_);
      reset_shadows();
      ++n.restarts;
    } else {
      WS_CHECK(peer_.guards_ok(), "guard bytes at the peer changed (fault %s)", fault_names[static_cast<int>(f)]);
    }
    rebuild();  // survivors reconnect: new QPs on both sides
  }

  const char* wire_;
  std::mt19937_64 rng_;
  verbs::device dev_;
  verbs::pd pd_;
  peer_proc peer_;
  std::vector<std::unique_ptr<pair_state>> pairs_;
  uint64_t ops_done_ = 0;
};

void run_stress(const char* wire) {
  const uint64_t total = env_u64("GDAKI_WIRE_STRESS_OPS", 3000);
  const uint64_t seed = env_u64("GDAKI_WIRE_STRESS_SEED", std::random_device{}());
  const uint64_t watchdog_s = env_u64("GDAKI_WIRE_STRESS_WATCHDOG_S", 60);
  std::printf("wire_fault_stress[%s]: %llu operations, %d QP pairs, seed %llu (GDAKI_WIRE_STRESS_SEED to replay)\n", wire,
              (unsigned long long)total, n_pairs, (unsigned long long)seed);
  std::fflush(stdout);
  std::atomic<bool> done{false};
  std::thread dog([&] {
    uint64_t last = g_progress.load();
    auto since = clk::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const uint64_t now = g_progress.load();
      if (now != last) {
        last = now;
        since = clk::now();
      } else if (clk::now() - since > std::chrono::seconds(watchdog_s)) {
        std::fprintf(stderr, "wire_fault_stress: no progress for %llu s: hang\n", (unsigned long long)watchdog_s);
        std::abort();
      }
    }
  });
  const auto t0 = clk::now();
  counts n;
  {
    runner r(wire, seed);
    r.run(total);
    n = r.n;
  }
  done.store(true);
  dog.join();
  const double secs = std::chrono::duration<double>(clk::now() - t0).count();
  uint64_t ops = 0;
  for (uint64_t v : n.ops) ops += v;
  std::printf("wire_fault_stress[%s]: %llu operations in %llu rounds, %.2f s; QP sets built %llu, peer restarts %llu\n", wire,
              (unsigned long long)ops, (unsigned long long)n.rounds, secs, (unsigned long long)n.rebuilds,
              (unsigned long long)n.restarts);
  std::printf("  operations:");
  for (int i = 0; i < static_cast<int>(op_kind::count); ++i) std::printf(" %s=%llu", op_names[i], (unsigned long long)n.ops[i]);
  std::printf(" (probes %llu)\n  faults (rounds):", (unsigned long long)n.probes);
  for (int i = 1; i < static_cast<int>(fault::count); ++i) std::printf(" %s=%llu", fault_names[i], (unsigned long long)n.faults[i]);
  std::printf(" (clean rounds %llu)\n", (unsigned long long)n.faults[0]);
  std::printf("  completions by status: NONE=%llu TRANSPORT_RETRY_EXC_ERR=%llu WR_FLUSH_ERR=%llu\n", (unsigned long long)n.ok,
              (unsigned long long)n.retry_exc, (unsigned long long)n.flush);
  std::printf("  slowest error after its fault: %llu ms (bound %u + %u ms); pairs that survived a drop/corruption: %llu\n",
              (unsigned long long)n.max_err_ms, timeout_ms, slack_ms, (unsigned long long)n.pairs_survived);
  std::fflush(stdout);
}

TEST(wire_fault_stress, shm_random_operations_with_killed_peers_dropped_connections_and_corrupted_frames) {
  run_stress("shm");
}

TEST(wire_fault_stress, tcp_random_operations_with_killed_peers_dropped_connections_and_corrupted_frames) {
  run_stress("tcp");
}

}  // namespace
