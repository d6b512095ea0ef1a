// Randomized fault-injection stress on the soft NIC (ctest -L stress): several QP pairs,
// one driver thread each, random operations of the device API (put, p, get, atomics,
// signals, put_signal; send through sq.hpp) with random sizes and scopes (thread scope
// with exclusive or grid sharing; warp and block scope through the host grid launcher),
// and injected faults: bad lkey / rkey, out-of-bounds ranges, MRs without the access
// right (remote or LOCAL_WRITE), the QP forced to ERR mid-stream, the peer QP destroyed
// mid-stream (the in-process analogue of a killed peer), a full SQ (tiny ring: posters
// wait for space) and a full CQ (overrun without ignore_overrun). After a fault the pair
// is recreated and the run goes on.
//
// Checked, round by round (a round = a burst of operations, then a signalled NOP and a
// drain of the send CQ by the driver itself, so it sees every CQE):
//   - exactly one CQE per signalled WQE, none for a successful unsignalled one, one for
//     every failed or flushed WQE, and after the first failure only WR_FLUSH;
//   - an injected fault fails exactly the faulty WQE with the PRM syndrome;
//   - shadow copies of every target and result buffer: data of successful operations is
//     there (which is the checksum), failed operations changed nothing, and every byte
//     around the targets (guards between and around them) is unchanged;
//   - a watchdog fails the run if no driver makes progress for GDAKI_FAULT_STRESS_WATCHDOG_S
//     seconds (default 60), dumping the state of every QP.
// Size: GDAKI_FAULT_STRESS_OPS operations in all (default 15,000: 5-10 s);
// GDAKI_FAULT_STRESS_SEED fixes the random seed. Counts are printed at the end.
// Wire faults (peer process killed, connection dropped, corrupted frame) need the
// cross-process wire: wire_fault_stress.cpp injects them.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gdaki/device/datapath.hpp"
#include "gdaki/device/dump.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/prm/decode.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace {

namespace dev = gdaki::dev;
namespace prm = gdaki::prm;
namespace verbs = gdaki::verbs;
using gdaki::status;
using prm::syndrome;

uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::strtoull(v, nullptr, 0) : def;
}

// ---- what is counted -------------------------------------------------------------------

enum class fault : uint8_t {
  none,
  bad_lkey,
  bad_rkey,
  out_of_bounds,
  no_remote_access,
  no_local_write,
  qp_to_err,
  peer_destroyed,
  full_cq,
  full_ring,
  count
};
constexpr const char* fault_names[] = {"none",          "bad_lkey",       "bad_rkey",   "out_of_bounds",
                                       "no_remote_access", "no_local_write", "qp_to_err", "peer_destroyed",
                                       "full_cq",       "full_ring"};
static_assert(sizeof(fault_names) / sizeof(fault_names[0]) == static_cast<size_t>(fault::count));

enum class op_kind : uint8_t { put, p, get, fetch_add, compare_swap, signal_add, signal_set, put_signal, send, count };
constexpr const char* op_names[] = {"put",        "p",          "get",        "fetch_add", "compare_swap",
                                    "signal_add", "signal_set", "put_signal", "send"};

struct totals {
  std::mutex mu;
  uint64_t ops = 0, rounds = 0, recreated = 0;
  std::array<uint64_t, static_cast<size_t>(fault::count)> faults{};
  std::array<uint64_t, static_cast<size_t>(op_kind::count)> kinds{};
  std::map<std::string, uint64_t> completions;  // by CQE syndrome
  std::array<uint64_t, 4> scopes{};             // thread/exclusive, thread/grid, warp, block
};

std::atomic<uint64_t> g_progress{0};  // bumped on every CQE and round: the watchdog's pulse

// ---- memory --------------------------------------------------------------------------

constexpr size_t target_bytes = 256 * 1024;  // the peer's target buffer
constexpr size_t guard = 256;                // never targeted at either end
constexpr size_t local_bytes = 128 * 1024;   // get destinations and atomic results

struct host_mem {
  std::unique_ptr<uint8_t, decltype(&std::free)> p{nullptr, &std::free};
  size_t n = 0;
  explicit host_mem(size_t bytes) : p(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)), &std::free), n(bytes) {}
  uint8_t* data() const { return p.get(); }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(p.get()); }
};

// A buffer whose expected contents are kept beside it.
struct shadowed {
  host_mem mem;
  std::vector<uint8_t> shadow;
  explicit shadowed(size_t n, std::mt19937_64& rng) : mem(n), shadow(n) {
    for (size_t i = 0; i < n; ++i) shadow[i] = static_cast<uint8_t>(rng());
    std::memcpy(mem.data(), shadow.data(), n);
  }
  // Offset of the first differing byte, or -1.
  long first_difference() const {
    if (std::memcmp(mem.data(), shadow.data(), shadow.size()) == 0) return -1;
    for (size_t i = 0; i < shadow.size(); ++i) {
      if (mem.data()[i] != shadow[i]) return static_cast<long>(i);
    }
    return -1;
  }
};

// ---- one planned operation --------------------------------------------------------------

struct op_plan {
  op_kind kind = op_kind::put;
  fault f = fault::none;
  bool skip = false;       // collective rounds: this lane takes part without posting
  bool signalled = true;
  uint32_t len = 0;
  size_t roff = 0;         // in the target buffer (data, or the atomic/signal word)
  size_t loff = 0;         // in the source (put) or local (get, atomic result) buffer
  size_t sig_off = 0;      // put_signal: the signal word
  uint64_t value = 0, compare = 0;
  // filled by posting
  status post_st = status::ok;
  uint64_t ticket = 0;
  uint32_t nbb = 0;        // WQEBBs of the whole operation
  uint32_t first_nbb = 0;  // put_signal: WQEBBs of the data part
};

// One WQE as the checker sees it.
struct wqe_rec {
  size_t op;           // index into the round's plans
  bool signalled;
  bool faulty;         // carries the injected fault
  bool signal_part = false;  // put_signal: the signal WQE (the put is a WQE of its own)
  int cqes = 0;
  syndrome synd = syndrome::none;
};

// ---- one pair -------------------------------------------------------------------------

struct world;

struct channel {
  world& w;
  int id;
  std::mt19937_64 rng;
  // Faults that need a fresh pair are set up at creation.
  bool tiny_sq = false, small_cq = false;
  verbs::cq a_scq, a_rcq, b_scq, b_rcq;
  verbs::qp a, b;
  std::unique_ptr<dev::cq_handle> ha_s, ha_r, hb_s, hb_r;
  std::unique_ptr<dev::qp_handle> ha, hb;
  std::mutex dump_mu;  // the watchdog reads ha while the driver may replace it
  bool b_alive = false;
  // This pair's memory (its own, so pairs run concurrently): B's target buffer (all
  // rights), A's get / atomic-result buffer, B's buffer without remote rights and A's
  // without LOCAL_WRITE; each with the shadow of what it must hold.
  shadowed target, local, no_remote, no_lw;
  verbs::mr target_mr, local_mr, no_remote_mr, no_lw_mr;

  channel(world& wr, int i, uint64_t seed);

  void create();
  void run(uint64_t ops);
  std::string dump() {
    std::lock_guard lk(dump_mu);
    return ha ? dev::dump_qp_state(*ha) : std::string("(no QP)\n");
  }

 private:
  uint64_t round(uint64_t budget);
};

// Shared by every pair: the device, the two protection domains (A = initiators, B =
// peers), the read-only put source and the signal scratch words.
struct world {
  verbs::device d;
  verbs::pd pda, pdb;
  std::mt19937_64 seed_rng;
  host_mem src;  // A's put / send source (never written by the NIC)
  host_mem scratch;
  verbs::mr src_mr, scratch_mr;
  totals t;

  explicit world(uint64_t seed)
      : d(verbs::device::open("soft0")), pda(d), pdb(d), seed_rng(seed), src(64 * 1024), scratch(4096) {
    for (size_t i = 0; i < src.n; ++i) src.data()[i] = static_cast<uint8_t>(seed_rng());
    src_mr = verbs::mr(pda, src.data(), src.n, 0);
    scratch_mr = verbs::mr(pda, scratch.data(), scratch.n, verbs::access::local_write);
  }
};

channel::channel(world& wr, int i, uint64_t seed)
    : w(wr),
      id(i),
      rng(seed),
      target(target_bytes, rng),
      local(local_bytes, rng),
      no_remote(4096, rng),
      no_lw(4096, rng),
      target_mr(w.pdb, target.mem.data(), target_bytes, verbs::access::all),
      local_mr(w.pda, local.mem.data(), local_bytes, verbs::access::local_write),
      no_remote_mr(w.pdb, no_remote.mem.data(), 4096, verbs::access::local_write),
      no_lw_mr(w.pda, no_lw.mem.data(), 4096, 0) {}

verbs::qp_attr fast_attr() {
  verbs::qp_attr a;
  a.timeout = 6;  // ~0.26 ms per try
  a.retry_cnt = 2;
  a.min_rnr_timer = 1;
  a.rnr_retry = 7;
  return a;
}

void channel::create() {
  std::lock_guard lk(dump_mu);
  ha.reset();
  hb.reset();
  b = verbs::qp();
  a = verbs::qp();
  verbs::cq_init ci;
  ci.depth = small_cq ? 4 : 1024;
  ci.ignore_overrun = !small_cq;
  a_scq = verbs::cq(w.d, ci);
  ci = verbs::cq_init{};
  ci.depth = 1024;
  a_rcq = verbs::cq(w.d, ci);
  b_scq = verbs::cq(w.d, ci);
  b_rcq = verbs::cq(w.d, ci);
  verbs::qp_init qa;
  qa.send_cq = &a_scq;
  qa.recv_cq = &a_rcq;
  qa.sq_wqebbs = tiny_sq ? 8 : 256;
  qa.rq_wqes = 64;
  qa.max_inline = 64;
  a = verbs::qp(w.pda, qa);
  verbs::qp_init qb = qa;
  qb.send_cq = &b_scq;
  qb.recv_cq = &b_rcq;
  qb.sq_wqebbs = 64;
  b = verbs::qp(w.pdb, qb);
  verbs::connect_rc(a, b.qpn(), verbs::access::all, fast_attr());
  verbs::connect_rc(b, a.qpn(), verbs::access::all, fast_attr());
  b_alive = true;
  ha_s = std::make_unique<dev::cq_handle>(a_scq.export_handle());
  ha_r = std::make_unique<dev::cq_handle>(a_rcq.export_handle());
  hb_s = std::make_unique<dev::cq_handle>(b_scq.export_handle());
  hb_r = std::make_unique<dev::cq_handle>(b_rcq.export_handle());
  verbs::qp_export_options eo;
  eo.check_cq_depth = !small_cq;  // the small CQ is the overrun fault this run injects
  // The run counts CQEs against the WQEs it signalled (and signals what it must itself).
  eo.auto_signal_wqebbs = verbs::qp_export_options::no_auto_signal;
  ha = std::make_unique<dev::qp_handle>(a.export_handle(ha_s.get(), ha_r.get(), eo));
  hb = std::make_unique<dev::qp_handle>(b.export_handle(hb_s.get(), hb_r.get()));
  ha->scratch_addr = w.scratch.addr() + 64ull * id;
  ha->scratch_lkey = w.scratch_mr.lkey();
}

// Ranges handed out for one round: distinct, with random guard gaps, so every operation's
// effect can be checked on its own.
struct bump {
  size_t next, end;
  std::mt19937_64* rng;
  bool take(size_t len, size_t align, size_t* off) {
    size_t o = next + (*rng)() % 48;
    o = (o + align - 1) / align * align;
    if (o + len > end) return false;
    *off = o;
    next = o + len;
    return true;
  }
};

uint32_t random_len(std::mt19937_64& rng) {
  const uint64_t r = rng() % 100;
  if (r < 60) return static_cast<uint32_t>(1 + rng() % 64);
  if (r < 95) return static_cast<uint32_t>(1 + rng() % 1024);
  return static_cast<uint32_t>(1 + rng() % 8192);
}

constexpr uint32_t bad_key = 0x7fff0013;  // slot 0x7fff00: far beyond any live key

// Posts one planned operation with scope Scope / sharing S (every lane of a collective
// call runs this with its own plan). Returns the posting status.
template <typename Scope, dev::sharing S>
void post_op(channel& c, dev::qp_handle& qp, op_plan& o) {
  world& w = c.w;
  const uint32_t flags = (o.skip ? dev::op_flags::skip : 0) | (o.signalled ? 0 : dev::op_flags::unsignaled);
  const bool bad_l = o.f == fault::bad_lkey, bad_r = o.f == fault::bad_rkey;
  dev::remote_ptr dst{c.target.mem.addr() + o.roff, bad_r ? bad_key : c.target_mr.rkey()};
  if (o.f == fault::out_of_bounds) {
    // Crossing the end (a word-sized operation starts right after it, aligned, so the
    // fault is the range and not the alignment).
    dst.addr = c.target.mem.addr() + target_bytes - (o.len <= 8 ? 0 : o.len / 2);
  }
  if (o.f == fault::no_remote_access) dst = {c.no_remote.mem.addr() + o.roff % 2048, c.no_remote_mr.rkey()};
  dev::local_ptr src{w.src.addr() + o.loff, bad_l ? bad_key : w.src_mr.lkey()};
  dev::local_ptr res{c.local.mem.addr() + o.loff, bad_l ? bad_key : c.local_mr.lkey()};
  if (o.f == fault::no_local_write) res = {c.no_lw.mem.addr() + o.loff % 2048, c.no_lw_mr.lkey()};
  constexpr uint64_t tmo = 30'000'000'000ull;
  uint64_t t = 0;
  switch (o.kind) {
    case op_kind::put:
      o.post_st = dev::put<Scope, S>(qp, dst, src, o.len, &t, flags, tmo);
      break;
    case op_kind::p:
      o.post_st = dev::p<Scope, S>(qp, dst, w.src.data() + o.loff, o.len, &t, flags, tmo);
      break;
    case op_kind::get:
      o.post_st = dev::get<Scope, S>(qp, res, dst, o.len, &t, flags, tmo);
      break;
    case op_kind::fetch_add:
      o.post_st = dev::atomic_fetch_add<Scope, S>(qp, dst, o.value, res, &t, flags, tmo);
      break;
    case op_kind::compare_swap:
      o.post_st = dev::atomic_compare_swap<Scope, S>(qp, dst, o.compare, o.value, res, &t, flags, tmo);
      break;
    case op_kind::signal_add:
    case op_kind::signal_set:
      o.post_st = dev::signal<Scope, S>(qp, dst, o.kind == op_kind::signal_add ? dev::signal_op::add : dev::signal_op::set,
                                        o.value, &t, flags, tmo);
      break;
    case op_kind::put_signal: {
      const dev::remote_ptr sig{c.target.mem.addr() + o.sig_off, c.target_mr.rkey()};
      o.post_st = dev::put_signal<Scope, S>(qp, dst, src, o.len, sig, dev::signal_op::add, o.value, &t, flags, tmo);
      break;
    }
    default: {  // send: thread scope only, through sq.hpp
      const dev::sge g{src.addr, o.len, src.lkey};
      uint64_t start = 0;
      o.post_st = dev::sq_acquire(qp, dev::wqebbs_send(1), &start, tmo);
      if (o.post_st == status::ok) {
        const uint8_t fl = o.signalled ? prm::ctrl_flags::cq_update : prm::ctrl_flags::ce_error_only;
        t = dev::sq_commit(qp, start, dev::prepare_send(qp, start, &g, 1, fl));
      }
      break;
    }
  }
  o.ticket = t;
}

// WQEBBs an operation occupies (its WQE layout is the data path's: wqe.hpp).
void size_op(op_plan& o) {
  switch (o.kind) {
    case op_kind::put:
    case op_kind::get:
      o.nbb = dev::wqebbs_rdma(1);
      break;
    case op_kind::p:
      o.nbb = dev::wqebbs_write_inline(o.len);
      break;
    case op_kind::put_signal:
      o.first_nbb = dev::wqebbs_rdma(1);
      o.nbb = o.first_nbb + 1;
      break;
    case op_kind::send:
      o.nbb = dev::wqebbs_send(1);
      break;
    default:
      o.nbb = 1;
  }
}

syndrome expected_syndrome(fault f) {
  switch (f) {
    case fault::bad_lkey:
    case fault::no_local_write:
      return syndrome::local_prot;
    case fault::bad_rkey:
    case fault::out_of_bounds:
    case fault::no_remote_access:
      return syndrome::remote_access;
    default:
      return syndrome::none;
  }
}

#define STRESS_CHECK(cond, ...)                                                      \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "fault_stress: channel %d: check failed: %s: ", id, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                             \
      std::fprintf(stderr, "\n%s", dump().c_str());                                  \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

uint64_t channel::round(uint64_t budget) {
  // --- plan ---
  const uint64_t r = rng() % 100;
  fault f = fault::none;
  if (r < 30) f = static_cast<fault>(1 + rng() % (static_cast<uint32_t>(fault::count) - 1));
  // Pair-level faults need a pair built for them.
  if ((f == fault::full_ring) != tiny_sq || (f == fault::full_cq) != small_cq) {
    tiny_sq = f == fault::full_ring;
    small_cq = f == fault::full_cq;
    create();
  }
  const uint32_t scope = static_cast<uint32_t>(rng() % 4);  // 0 thread/excl, 1 thread/grid, 2 warp, 3 block
  const bool collective = scope >= 2 && f != fault::qp_to_err && f != fault::peer_destroyed;
  const uint32_t lanes = collective ? 2 + static_cast<uint32_t>(rng() % 3) : 1;
  const uint32_t steps = 1 + static_cast<uint32_t>(rng() % (collective ? 8 : 24));
  // The SQ must hold a whole round, so the driver alone consumes CQEs (a poster waiting
  // for room would consume some itself); full_ring rounds overfill it on purpose.
  const uint32_t ring_room = tiny_sq ? 1000000 : 200;

  bump tb{guard, target_bytes - guard, &rng}, lb{guard, local_bytes - guard, &rng}, sb{0, w.src.n - 64, &rng};
  std::vector<op_plan> plan(static_cast<size_t>(lanes) * steps);
  uint32_t planned_bbs = 0;
  size_t fault_at = plan.size();
  if (expected_syndrome(f) != syndrome::none || f == fault::qp_to_err || f == fault::peer_destroyed) {
    fault_at = rng() % plan.size();
  }
  uint32_t used_steps = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    // Every lane of a collective step calls the same operation.
    op_kind k = static_cast<op_kind>(rng() % static_cast<uint32_t>(op_kind::count));
    if (k == op_kind::send && collective) k = op_kind::put;
    bool ok = true;
    uint32_t step_bbs = 0;
    for (uint32_t l = 0; l < lanes && ok; ++l) {
      op_plan& o = plan[static_cast<size_t>(s) * lanes + l];
      o.kind = k;
      o.skip = collective && rng() % 4 == 0;
      // In a tiny SQ every WQE is signalled: room comes back only through CQEs, so a ring's
      // worth of unsignalled WQEs would leave a waiting poster nothing to wait for.
      o.signalled = tiny_sq || rng() % 3 != 0;
      o.value = rng();
      const size_t idx = static_cast<size_t>(s) * lanes + l;
      // Per-operation faults ride on one WQE; qp_to_err / peer_destroyed happen before it.
      if (idx == fault_at && !o.skip && expected_syndrome(f) != syndrome::none) o.f = f;
      switch (k) {
        case op_kind::put:
        case op_kind::get:
        case op_kind::send:
          o.len = random_len(rng);
          if (o.f != fault::none && o.len < 16) o.len = 16;  // zero bytes would skip the key checks
          ok = tb.take(o.len, 1, &o.roff) && (k == op_kind::get ? lb.take(o.len, 1, &o.loff) : sb.take(o.len, 1, &o.loff));
          break;
        case op_kind::p:
          o.len = 1 + static_cast<uint32_t>(rng() % 64);
          if (o.f != fault::none && o.len < 16) o.len = 16;
          ok = tb.take(o.len, 1, &o.roff) && sb.take(o.len, 1, &o.loff);
          break;
        case op_kind::put_signal:
          o.len = random_len(rng);
          if (o.f != fault::none && o.len < 16) o.len = 16;
          o.value = 1 + rng() % 1000;
          ok = tb.take(o.len, 1, &o.roff) && sb.take(o.len, 1, &o.loff) && tb.take(8, 8, &o.sig_off);
          break;
        default:  // atomics and signals: one aligned word, results into local
          o.len = 8;
          ok = tb.take(8, 8, &o.roff) && lb.take(8, 8, &o.loff);
          if (k == op_kind::compare_swap) {
            uint64_t cur;
            std::memcpy(&cur, &target.shadow[o.roff], 8);
            o.compare = rng() % 2 ? cur : cur ^ 1;  // succeed or fail, both are checked
          }
          break;
      }
      // Faults that concern only one side of an operation: move to a kind that has it.
      if (o.f == fault::bad_lkey && (k == op_kind::p || k == op_kind::signal_add || k == op_kind::signal_set)) o.f = fault::bad_rkey;
      if (o.f == fault::no_local_write && k != op_kind::get && k != op_kind::fetch_add && k != op_kind::compare_swap) o.f = fault::no_remote_access;
      if (k == op_kind::send && expected_syndrome(o.f) != syndrome::none && o.f != fault::bad_lkey) o.f = fault::bad_lkey;
      size_op(o);
      if (!o.skip) step_bbs += o.nbb;
    }
    if (!ok || planned_bbs + step_bbs > ring_room) break;
    planned_bbs += step_bbs;
    ++used_steps;
  }
  if (used_steps == 0) return 0;
  plan.resize(static_cast<size_t>(used_steps) * lanes);
  if (fault_at >= plan.size()) fault_at = plan.size();
  for (size_t i = plan.size(); i-- > 0;) {
    if (plan[i].skip) plan[i].f = fault::none;
  }
  // Receives for the sends, on B (one each, each into its own target range).
  for (op_plan& o : plan) {
    if (o.kind != op_kind::send || o.skip) continue;
    const dev::sge g{target.mem.addr() + o.roff, o.len, target_mr.lkey()};
    STRESS_CHECK(dev::rq_post(*hb, &g, 1) == status::ok, "rq_post");
  }

  // --- post ---
  const uint64_t ci0 = ha_s->ci;
  if (collective) {
    auto body = [&](auto scope_tag) {
      using Scope = decltype(scope_tag);
      const uint32_t lane = scope == 2 ? dev::arch::lane_id() : dev::arch::thread_rank_in_block();
      for (uint32_t s = 0; s < used_steps; ++s) post_op<Scope, dev::sharing::grid>(*this, *ha, plan[static_cast<size_t>(s) * lanes + lane]);
    };
    if (scope == 2) {
      dev::host::launch(1, lanes, [&] { body(dev::scope_warp{}); });
    } else {
      dev::host::launch(1, lanes, [&] { body(dev::scope_block{}); });
    }
  } else {
    for (size_t i = 0; i < plan.size(); ++i) {
      if (i == fault_at && f == fault::qp_to_err) a.to_err();
      if (i == fault_at && f == fault::peer_destroyed) {
        std::lock_guard lk(dump_mu);
        hb.reset();
        b = verbs::qp();
        b_alive = false;
      }
      if (scope == 0) {
        post_op<dev::scope_thread, dev::sharing::exclusive>(*this, *ha, plan[i]);
      } else {
        post_op<dev::scope_thread, dev::sharing::grid>(*this, *ha, plan[i]);
      }
    }
  }
  // The closing signalled NOP: once its CQE is in, every WQE before it has one or is done.
  uint64_t nop_start = 0;
  STRESS_CHECK(dev::sq_acquire(*ha, 1, &nop_start, 30'000'000'000ull) == status::ok, "closing NOP: no room");
  const uint64_t end = dev::sq_commit(*ha, nop_start, dev::prepare_nop(*ha, nop_start, prm::ctrl_flags::cq_update));

  // --- the WQEs, by first WQEBB ---
  std::map<uint64_t, wqe_rec> wqes;
  for (size_t i = 0; i < plan.size(); ++i) {
    const op_plan& o = plan[i];
    if (o.skip) continue;
    STRESS_CHECK(o.post_st == status::ok, "posting %s returned %s", op_names[static_cast<int>(o.kind)],
                 gdaki::to_string(o.post_st));
    const uint64_t first = o.ticket - o.nbb;
    if (o.kind == op_kind::put_signal) {
      wqes[first] = {i, false, o.f != fault::none};
      wqes[first + o.first_nbb] = {i, o.signalled, false, true};
    } else {
      wqes[first] = {i, o.signalled, o.f != fault::none};
    }
  }
  wqes[nop_start] = {plan.size(), true, false};

  // --- drain the send CQ ourselves ---
  bool cq_broken = false;
  uint64_t cqes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (ha->sq_completed < end) {
    dev::completion c;
    if (dev::sq_poll(*ha, &c) == status::ok) {
      ++cqes;
      g_progress.fetch_add(1, std::memory_order_relaxed);
      const uint64_t first = dev::widen16(ha->sq_rung, c.wqe_counter);
      {
        std::lock_guard lk(w.t.mu);
        ++w.t.completions[prm::to_string(c.syndrome)];
      }
      if (!tiny_sq) {
        auto it = wqes.find(first);
        STRESS_CHECK(it != wqes.end(), "CQE names WQEBB %llu, which starts no WQE", (unsigned long long)first);
        STRESS_CHECK(it->second.cqes == 0, "second CQE for the WQE at %llu", (unsigned long long)first);
        it->second.cqes = 1;
        it->second.synd = c.syndrome;
      }
      continue;
    }
    if (small_cq && a_scq.in_error()) {
      cq_broken = true;  // the CQE of the overrun is lost by definition; the QP is in ERR
      break;
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(120)) {
      STRESS_CHECK(false, "round did not complete in 120 s");
    }
    std::this_thread::yield();
  }
  if (f == fault::full_cq) {
    // A 4-entry CQ without overrun-ignore and more signalled WQEs than that either
    // overruns (CQ and QP in error) or, if we drained fast enough, does not.
    STRESS_CHECK(cq_broken || ha->sq_completed >= end, "full CQ: neither overrun nor complete");
  }

  // --- check every WQE's CQEs ---
  bool failed_seen = false;
  if (tiny_sq) {
    // Posters waited for room and consumed CQEs themselves: check the count only.
    uint64_t expect = 0;
    for (auto& [pos, rec] : wqes) expect += rec.signalled ? 1 : 0;
    const uint64_t got = ha_s->ci - ci0;
    STRESS_CHECK(got == expect || gdaki::dev::err_index_of(ha->err_state) != dev::no_error_index, "full ring: %llu CQEs for %llu signalled WQEs",
                 (unsigned long long)got, (unsigned long long)expect);
  } else if (!cq_broken) {
    for (auto& [pos, rec] : wqes) {
      const bool is_nop = rec.op == plan.size();
      if (!failed_seen) {
        if (rec.cqes == 1 && rec.synd != syndrome::none) {
          failed_seen = true;
          if (rec.faulty) {
            STRESS_CHECK(rec.synd == expected_syndrome(plan[rec.op].f), "fault %s gave %s",
                         fault_names[static_cast<int>(plan[rec.op].f)], prm::to_string(rec.synd));
          } else {
            // Only the asynchronous faults may fail a WQE that carries no fault.
            STRESS_CHECK(f == fault::qp_to_err || f == fault::peer_destroyed,
                         "WQE at %llu failed with %s without a fault", (unsigned long long)pos, prm::to_string(rec.synd));
            STRESS_CHECK(rec.synd == syndrome::wr_flush || rec.synd == syndrome::transport_retry_exc,
                         "%s after %s", prm::to_string(rec.synd), fault_names[static_cast<int>(f)]);
          }
        } else {
          STRESS_CHECK(!rec.faulty, "faulty WQE at %llu (%s) succeeded", (unsigned long long)pos,
                       fault_names[static_cast<int>(plan[rec.op].f)]);
          STRESS_CHECK(rec.cqes == (rec.signalled ? 1 : 0), "WQE at %llu: %d CQEs, signalled %d",
                       (unsigned long long)pos, rec.cqes, rec.signalled);
        }
      } else {
        STRESS_CHECK(rec.cqes == 1 && rec.synd == syndrome::wr_flush, "WQE at %llu after the first error: %d CQEs, %s",
                     (unsigned long long)pos, rec.cqes, prm::to_string(rec.synd));
      }
      (void)is_nop;
    }
  }

  // --- memory: apply what succeeded to the shadows, then compare everything ---
  // An operation succeeded iff its WQEs got no error CQE (an unsignalled success has
  // none). After a lost CQE (full CQ) or in a full-ring round that failed, an operation's
  // fate is unknown: its ranges may hold either version, and are re-read.
  const bool fate_known = !cq_broken && !(tiny_sq && gdaki::dev::err_index_of(ha->err_state) != dev::no_error_index);
  auto succeeded = [&](size_t i) {
    for (auto& [pos, rec] : wqes) {
      if (rec.op == i && rec.synd != syndrome::none) return false;
    }
    return true;
  };
  // A put_signal is two WQEs: an asynchronous fault (QP to ERR, peer destroyed) can land
  // between them, so the put may have succeeded while the signal failed.
  auto put_part_succeeded = [&](size_t i) {
    for (auto& [pos, rec] : wqes) {
      if (rec.op == i && !rec.signal_part && rec.synd != syndrome::none) return false;
    }
    return true;
  };
  bool bad_recv = false;
  for (size_t i = 0; i < plan.size(); ++i) {
    const op_plan& o = plan[i];
    if (o.skip) continue;
    const bool ok = fate_known ? succeeded(i) : true;
    uint8_t* tsh = &target.shadow[o.roff];
    uint8_t* lsh = &local.shadow[o.loff];
    if (!fate_known) {
      // Either all of the old or all of the new bytes: the new ones are what the memory
      // holds; accept them into the shadow only if they are one of the two versions.
      std::vector<uint8_t> now(o.len);
      std::memcpy(now.data(), target.mem.data() + o.roff, o.len);
      const bool old_ok = std::memcmp(now.data(), tsh, o.len) == 0;
      bool new_ok = false;
      if (o.kind == op_kind::put || o.kind == op_kind::p || o.kind == op_kind::put_signal || o.kind == op_kind::send) {
        new_ok = std::memcmp(now.data(), w.src.data() + o.loff, o.len) == 0;
      } else {
        new_ok = true;  // atomics and gets: a word or a copy; re-read below
      }
      STRESS_CHECK(old_ok || new_ok, "op %zu (%s): target is neither the old nor the new data", i,
                   op_names[static_cast<int>(o.kind)]);
      std::memcpy(tsh, now.data(), o.len);
      if (o.kind == op_kind::put_signal) std::memcpy(&target.shadow[o.sig_off], target.mem.data() + o.sig_off, 8);
      if (o.kind != op_kind::put && o.kind != op_kind::p && o.kind != op_kind::put_signal && o.kind != op_kind::send) {
        std::memcpy(lsh, local.mem.data() + o.loff, o.len);
      }
      continue;
    }
    if (!ok) {
      if (o.kind == op_kind::send) bad_recv = true;
      if (o.kind == op_kind::put_signal && put_part_succeeded(i)) std::memcpy(tsh, w.src.data() + o.loff, o.len);
      continue;
    }
    switch (o.kind) {
      case op_kind::put:
      case op_kind::p:
      case op_kind::send:
        std::memcpy(tsh, w.src.data() + o.loff, o.len);
        break;
      case op_kind::put_signal: {
        std::memcpy(tsh, w.src.data() + o.loff, o.len);
        uint64_t v;
        std::memcpy(&v, &target.shadow[o.sig_off], 8);
        v += o.value;
        std::memcpy(&target.shadow[o.sig_off], &v, 8);
        break;
      }
      case op_kind::get:
        std::memcpy(lsh, tsh, o.len);
        break;
      case op_kind::signal_set:
        std::memcpy(tsh, &o.value, 8);
        break;
      default: {  // fetch_add, compare_swap, signal_add
        uint64_t old;
        std::memcpy(&old, tsh, 8);
        uint64_t next = old;
        if (o.kind == op_kind::compare_swap) {
          if (old == o.compare) next = o.value;
        } else {
          next = old + o.value;
        }
        std::memcpy(tsh, &next, 8);
        if (o.kind != op_kind::signal_add) std::memcpy(lsh, &old, 8);  // signal results go to scratch
        break;
      }
    }
  }
  const long dt = target.first_difference(), dl = local.first_difference();
  STRESS_CHECK(dt < 0, "target buffer differs at offset %ld (fault %s)", dt, fault_names[static_cast<int>(f)]);
  STRESS_CHECK(dl < 0, "local buffer differs at offset %ld (fault %s)", dl, fault_names[static_cast<int>(f)]);
  STRESS_CHECK(no_remote.first_difference() < 0, "a buffer without remote rights was written");
  STRESS_CHECK(no_lw.first_difference() < 0, "a buffer without LOCAL_WRITE was written");

  // --- receive side: one CQE per consumed receive WQE ---
  if (b_alive) {
    dev::completion c;
    uint32_t recvs = 0, sends = 0;
    for (const op_plan& o : plan) sends += (o.kind == op_kind::send && !o.skip) ? 1 : 0;
    while (dev::rq_poll(*hb, &c) == status::ok) {
      ++recvs;
      if (f == fault::none && fate_known) {
        STRESS_CHECK(c.ok() && c.opcode == prm::cqe_opcode::resp_send, "receive CQE %s", prm::to_string(c.syndrome));
      }
    }
    if (f == fault::none && fate_known && !bad_recv) STRESS_CHECK(recvs == sends, "%u receive CQEs for %u sends", recvs, sends);
  }

  // --- counts, and a fresh pair after anything that broke this one ---
  {
    std::lock_guard lk(w.t.mu);
    ++w.t.rounds;
    ++w.t.scopes[collective ? scope : scope % 2];
    bool injected = f == fault::qp_to_err || f == fault::peer_destroyed || f == fault::full_cq || f == fault::full_ring;
    for (const op_plan& o : plan) {
      if (o.f != fault::none) {
        ++w.t.faults[static_cast<int>(o.f)];  // the kind actually injected (may be remapped)
      }
    }
    if (injected) ++w.t.faults[static_cast<int>(f)];
    for (const op_plan& o : plan) {
      if (o.skip) continue;
      ++w.t.ops;
      ++w.t.kinds[static_cast<int>(o.kind)];
    }
  }
  g_progress.fetch_add(1, std::memory_order_relaxed);
  // Anything that failed leaves the pair in ERR (requester and often responder) or with
  // receives that were never consumed: start the next round on a fresh pair.
  const bool broken = failed_seen || cq_broken || !b_alive || gdaki::dev::err_index_of(ha->err_state) != dev::no_error_index ||
                      f == fault::qp_to_err;
  if (broken) {
    create();
    std::lock_guard lk(w.t.mu);
    ++w.t.recreated;
  }
  (void)budget;
  uint64_t n = 0;
  for (const op_plan& o : plan) n += o.skip ? 0 : 1;
  return n;
}

void channel::run(uint64_t ops) {
  create();
  uint64_t done = 0;
  while (done < ops) done += round(ops - done);
}

TEST(fault_stress, random_operations_with_injected_faults_keep_every_invariant) {
  const uint64_t total = env_u64("GDAKI_FAULT_STRESS_OPS", 15000);
  const uint64_t seed = env_u64("GDAKI_FAULT_STRESS_SEED", std::random_device{}());
  const uint64_t watchdog_s = env_u64("GDAKI_FAULT_STRESS_WATCHDOG_S", 60);
  constexpr int pairs = 3;
  std::printf("fault_stress: %llu operations, %d QP pairs, seed %llu (GDAKI_FAULT_STRESS_SEED to replay)\n",
              (unsigned long long)total, pairs, (unsigned long long)seed);
  world w(seed);
  std::vector<std::unique_ptr<channel>> ch;
  for (int i = 0; i < pairs; ++i) ch.push_back(std::make_unique<channel>(w, i, seed * 7919 + i));

  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    uint64_t last = g_progress.load();
    auto since = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const uint64_t now = g_progress.load();
      if (now != last) {
        last = now;
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since > std::chrono::seconds(watchdog_s)) {
        std::fprintf(stderr, "fault_stress: watchdog: no progress for %llu s\n", (unsigned long long)watchdog_s);
        for (auto& c : ch) std::fprintf(stderr, "channel %d:\n%s", c->id, c->dump().c_str());
        std::abort();
      }
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> drivers;
  for (auto& c : ch) drivers.emplace_back([&c, total] { c->run(total / pairs + 1); });
  for (auto& d : drivers) d.join();
  done = true;
  watchdog.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("fault_stress: %llu operations in %llu rounds, %.2f s; pairs recreated %llu times\n",
              (unsigned long long)w.t.ops, (unsigned long long)w.t.rounds, secs, (unsigned long long)w.t.recreated);
  std::printf("  operations:");
  for (size_t i = 0; i < w.t.kinds.size(); ++i) std::printf(" %s=%llu", op_names[i], (unsigned long long)w.t.kinds[i]);
  std::printf("\n  scopes: thread/exclusive=%llu thread/grid=%llu warp=%llu block=%llu (rounds)\n",
              (unsigned long long)w.t.scopes[0], (unsigned long long)w.t.scopes[1], (unsigned long long)w.t.scopes[2],
              (unsigned long long)w.t.scopes[3]);
  std::printf("  faults (rounds):");
  for (size_t i = 1; i < w.t.faults.size(); ++i) std::printf(" %s=%llu", fault_names[i], (unsigned long long)w.t.faults[i]);
  std::printf("\n  send completions by status:");
  for (auto& [name, n] : w.t.completions) std::printf(" %s=%llu", name.c_str(), (unsigned long long)n);
  std::printf("\n");
  EXPECT_GE(w.t.ops, total);
}

}  // namespace
