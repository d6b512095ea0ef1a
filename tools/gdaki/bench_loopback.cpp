// Benchmark endpoints (bench_loopback.hpp). Bandwidth tests: every initiator thread posts
// `iterations` operations on its QP, every cq_mod-th one signalled, then quiets; the time
// runs from the moment the last thread is ready to the moment the last one's quiet
// returns. Latency tests: one pair, A = ping (timed per round trip), B = pong.
#include "bench_loopback.hpp"
#include "bench_path.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gdaki/device/datapath.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/prm/decode.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::tool::bench {
namespace {

namespace arch = gdaki::dev::arch;
using dev::local_ptr;
using dev::remote_ptr;

// No single operation of a benchmark may take this long; a stuck QP becomes an error
// message instead of a hang.
constexpr uint64_t op_timeout_ns = 30'000'000'000ull;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// A registered buffer. Across processes on the soft NIC it lives in soft::alloc_shared()
// memory, as a symmetric heap's would: the peer then maps it and the shared-memory wire
// moves WRITEs and READs into it with one memcpy (docs/soft-nic.md, Wires); in plain
// memory every message is a frame and a cross-process copy (1 MiB: ~16 GB/s against
// ~45 GB/s mapped, docs/performance.md). The MR (declared after the memory) goes first.
struct buffer_deleter {
  bool shared = false;  // from soft::alloc_shared, else std::aligned_alloc
  void operator()(uint8_t* p) const {
    if (shared) {
      soft::free_shared(p);
    } else {
      std::free(p);
    }
  }
};

struct buffer {
  std::unique_ptr<uint8_t, buffer_deleter> mem;
  size_t bytes = 0;
  verbs::mr mr;
  void allocate(const verbs::pd& pd, size_t n, bool shared) {
    bytes = (n + 4095) / 4096 * 4096;
    mr = verbs::mr();
    mem.reset();
    mem.get_deleter().shared = shared;
    mem.reset(static_cast<uint8_t*>(shared ? soft::alloc_shared(bytes) : std::aligned_alloc(4096, bytes)));
    if (!mem) throw std::bad_alloc();
    std::memset(mem.get(), 0, bytes);
    mr = verbs::mr(pd, mem.get(), bytes, verbs::access::all);
  }
  uint8_t* data(uint64_t off = 0) const { return mem.get() + off; }
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(mem.get()) + off; }
  local_ptr local(uint64_t off = 0) const { return {addr(off), mr.lkey()}; }
  remote_ptr remote(uint64_t off = 0) const { return {addr(off), mr.rkey()}; }
};

struct side {
  verbs::cq scq, rcq;
  verbs::qp qp;
  dev::cq_handle hs{}, hr{};
  dev::qp_handle h{};
};

// A and B of one connected pair (one of them only, across processes). Held by pointer:
// the exported qp_handle points at the cq_handles beside it.
struct pair {
  side a, b;
};

// Releases all initiators at once and records when the first starts and the last ends.
struct gate {
  uint32_t total = 0;
  std::atomic<uint32_t> arrived{0};
  std::atomic<bool> go{false};
  std::atomic<uint64_t> t0{0}, t1{0};
  void wait() {
    if (arrived.fetch_add(1) + 1 == total) {
      t0.store(now_ns());
      go.store(true, std::memory_order_release);
      return;
    }
    // More initiator threads than cores is normal here: yield rather than burn the core
    // the last thread needs to arrive.
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void done() {
    const uint64_t t = now_ns();
    uint64_t cur = t1.load();
    while (cur < t && !t1.compare_exchange_weak(cur, t)) {
    }
  }
};

uint32_t next_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

void check(gdaki::status st, const dev::qp_handle& h, const char* what) {
  if (st == gdaki::status::ok) return;
  std::string msg = std::string(what) + " on QP " + std::to_string(h.qpn) + ": " + gdaki::to_string(st);
  if (st == gdaki::status::io_error) {
    const dev::op_error e = dev::last_error(h);
    msg += std::string(" (completion syndrome ") + prm::to_string(e.syndrome) + ")";
  }
  throw std::runtime_error(msg);
}

uint8_t load_byte(const uint8_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

bool from_hex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    const auto v = std::strtoul(s.substr(2 * i, 2).c_str(), nullptr, 16);
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

nlohmann::json ptr_json(remote_ptr p) { return {{"addr", p.addr}, {"rkey", p.rkey}}; }
remote_ptr ptr_from(const nlohmann::json& j) { return {j.at("addr").get<uint64_t>(), j.at("rkey").get<uint32_t>()}; }

#ifdef GDAKI_HAVE_SOFT_WIRE
// The two bench processes are one job and must share the soft wire's secret
// (docs/soft-nic.md, Security). Configured (GDAKI_SOFT_SECRET or GDAKI_SOFT_SECRET_FILE on
// both sides), it stays off the network; otherwise each process made its own, and they
// agree on the client's through the rendezvous, as a job's bootstrap would pass it.
bool soft_secret_configured() {
  return std::getenv("GDAKI_SOFT_SECRET") != nullptr || !soft::get_config().secret_file.empty();
}
#endif

}  // namespace

struct loopback::state {
  options opt;
  test_kind kind;
  endpoint_role role = endpoint_role::both;
  uint64_t max_bytes = 0;
  verbs::device dev;
  std::string dev_name;
  verbs::pd pd;
  buffer a_src, a_dst, b_src, b_dst, aux;
  std::vector<std::unique_ptr<pair>> pairs;
  uint32_t qps = 1;
  uint32_t units = 1;           // posting units: threads, warps or blocks
  uint32_t lanes_per_unit = 1;  // threads that post in one collective call
  uint32_t posters_per_qp = 1;
  uint32_t cq_mod = 16;
  uint32_t inline_size = 0;

  // Where A's operations land (B's buffers) and where B's pong lands (A's destination):
  // this process's own registrations in loopback, the peer's (from the rendezvous) across
  // processes.
  remote_ptr to_b_dst{}, to_b_src{}, to_b_aux{}, to_a_dst{};

  // A NIC that is not modelled on CPU threads needs the RTR path (bench_path.hpp); the
  // soft NIC needs none.
  bool hardware() const { return !dev.caps().nic_on_cpu_threads; }
  port_address own_port() const { return address_of(dev.query_port(1)); }
  verbs::qp_attr path(const port_address& peer) const { return path_to(peer, 1, opt.gid_index); }

  bool has_a() const { return role != endpoint_role::server; }
  bool has_b() const { return role != endpoint_role::client; }
  bool is_send() const { return kind == test_kind::send_bw || kind == test_kind::send_lat; }

  // aux layout, 64 bytes per slot: [0, qps) signal words (B), [qps, 2 qps) signal scratch
  // (A), then one atomic result slot per initiator thread (A).
  remote_ptr signal_word(uint32_t q) const { return {to_b_aux.addr + 64ull * q, to_b_aux.rkey}; }
  local_ptr result_slot(uint32_t gid) const { return aux.local(64ull * (2ull * qps + gid)); }

  uint32_t total_threads() const { return opt.blocks * opt.threads; }

  void make_side(side& sd, uint32_t depth, uint32_t max_inline) {
    verbs::cq_init ci;
    ci.depth = depth;  // no more signalled WQEs can be outstanding than the SQ holds
    sd.scq = verbs::cq(dev, ci);
    sd.rcq = verbs::cq(dev, ci);
    verbs::qp_init qi;
    qi.send_cq = &sd.scq;
    qi.recv_cq = &sd.rcq;
    qi.sq_wqebbs = depth;
    qi.rq_wqes = 512;
    qi.max_send_sge = 1;
    qi.max_recv_sge = 1;
    qi.max_inline = max_inline;
    sd.qp = verbs::qp(pd, qi);
  }

  void export_side(side& sd, uint32_t i) {
    sd.hs = sd.scq.export_handle();
    sd.hr = sd.rcq.export_handle();
    sd.h = sd.qp.export_handle(&sd.hs, &sd.hr);
    if (sd.h.scratch_addr == 0) {  // the soft export leaves the signal scratch to the caller
      sd.h.scratch_addr = aux.addr(64ull * (qps + i));
      sd.h.scratch_lkey = aux.mr.lkey();
    }
  }

  // Receive WQEs for SEND: every one scatters into the whole destination buffer.
  void fill_rq(side& sd, const buffer& dst) {
    const dev::sge r{dst.addr(), static_cast<uint32_t>(dst.bytes), dst.mr.lkey()};
    while (dev::rq_post(sd.h, &r, 1) == gdaki::status::ok) {
    }
  }
};

loopback::loopback(const options& opt, test_kind kind, uint64_t max_bytes, endpoint_role role)
    : s_(std::make_unique<state>()) {
  state& s = *s_;
  s.opt = opt;
  s.kind = kind;
  s.role = role;
  s.max_bytes = max_bytes;
  const test_info& t = info(kind);
  if (t.latency) {
    if (opt.qps != 1 || opt.blocks != 1 || opt.threads != 1 || opt.scope != scope_kind::thread) {
      throw std::invalid_argument(std::string(t.name) +
                                  " is a ping-pong between one pair of QPs: -q, --blocks, --threads and --scope "
                                  "apply to bandwidth tests only");
    }
  }
  if (s.is_send() && opt.scope != scope_kind::thread) {
    throw std::invalid_argument("send tests post through the data-path core (sq_acquire/prepare_send/sq_commit), "
                                "which has thread scope only: use --scope thread");
  }

  if (role != endpoint_role::both && opt.provider == "soft") {
    soft::config c = soft::get_config();
    c.wire = opt.wire;  // shm or tcp, before the device opens
    soft::set_config(c);
  }
  std::string name = opt.device;
  if (name.empty()) {
    for (const verbs::device_info& d : verbs::device::list()) {
      if (d.provider == opt.provider) {
        name = d.name;
        break;
      }
    }
    if (name.empty()) {
      throw gdaki::error(gdaki::status::not_found, "no device of provider '" + opt.provider +
                                                       "' on this machine (see `gdaki devices`, `gdaki doctor`)");
    }
  }
  s.dev = verbs::device::open(name);
  s.dev_name = name;
  if (s.dev.provider_name() != opt.provider) {
    throw std::invalid_argument("device " + name + " belongs to provider " + s.dev.provider_name() + ", not " +
                                opt.provider);
  }
  const verbs::device_attr da = s.dev.query();
  s.pd = verbs::pd(s.dev);

  // Posting units and how many share a QP: decides the sharing mode and the signalling.
  const uint32_t warps_per_block = (opt.threads + 31) / 32;
  switch (opt.scope) {
    case scope_kind::thread: s.units = opt.blocks * opt.threads; s.lanes_per_unit = 1; break;
    case scope_kind::warp: s.units = opt.blocks * warps_per_block; s.lanes_per_unit = std::min(opt.threads, 32u); break;
    case scope_kind::block: s.units = opt.blocks; s.lanes_per_unit = opt.threads; break;
  }
  s.qps = t.latency ? 1 : opt.qps;
  s.posters_per_qp = (s.units + s.qps - 1) / s.qps;

  s.inline_size = opt.inline_set ? opt.inline_size : (t.latency ? 64 : 0);
  if (kind == test_kind::read_bw || kind == test_kind::read_lat || kind == test_kind::atomic_rate) s.inline_size = 0;
  const uint32_t max_inline = std::min<uint32_t>(std::max<uint32_t>(64, s.inline_size), da.max_inline);
  if (s.inline_size > max_inline) {
    throw std::invalid_argument("inline size " + std::to_string(s.inline_size) + " exceeds the device's max_inline " +
                                std::to_string(da.max_inline));
  }

  // Ring depth: the largest collective call must fit twice over, so signalling every
  // cq_mod-th WQE always leaves a signalled one within reach of the flow control.
  const uint32_t nbb_max = std::max<uint32_t>(dev::wqebbs_write_inline(max_inline), 2);
  uint32_t depth = next_pow2(std::max<uint32_t>(opt.tx_depth, 4 * s.posters_per_qp * s.lanes_per_unit * nbb_max));
  depth = std::min(depth, next_pow2(da.max_qp_wr) == da.max_qp_wr ? da.max_qp_wr : next_pow2(da.max_qp_wr) / 2);
  const uint32_t per_round = s.posters_per_qp * s.lanes_per_unit * nbb_max;
  if (per_round * 2 > depth) {
    throw std::invalid_argument("too many initiators per QP for the SQ (" + std::to_string(per_round) +
                                " WQEBBs per round, SQ of " + std::to_string(depth) + "): add QPs (-q)");
  }
  s.cq_mod = std::max<uint32_t>(1, std::min<uint32_t>(opt.cq_mod, depth / (2 * per_round)));

  const uint64_t bytes = std::max<uint64_t>(max_bytes, 64);
  const bool shared = role != endpoint_role::both && opt.provider == "soft";
  if (s.has_a()) {
    s.a_src.allocate(s.pd, bytes, shared);
    s.a_dst.allocate(s.pd, bytes, shared);
    std::memset(s.a_src.data(), 0x5a, s.a_src.bytes);
  }
  if (s.has_b()) {
    s.b_src.allocate(s.pd, bytes, shared);
    s.b_dst.allocate(s.pd, bytes, shared);
    std::memset(s.b_src.data(), 0xa5, s.b_src.bytes);
  }
  s.aux.allocate(s.pd, 64ull * (2ull * s.qps + s.total_threads() + 1), shared);
  if (role == endpoint_role::both) {
    s.to_b_dst = s.b_dst.remote();
    s.to_b_src = s.b_src.remote();
    s.to_b_aux = s.aux.remote();
    s.to_a_dst = s.a_dst.remote();
  }

  for (uint32_t i = 0; i < s.qps; ++i) {
    auto p = std::make_unique<pair>();
    if (s.has_a()) s.make_side(p->a, depth, max_inline);
    if (s.has_b()) s.make_side(p->b, depth, max_inline);
    if (role == endpoint_role::both) {
      // Loopback: both QPs sit behind the same port.
      const verbs::qp_attr attr = s.hardware() ? s.path(s.own_port()) : verbs::qp_attr{};
      verbs::connect_rc(p->a.qp, p->b.qp.qpn(), verbs::access::all, attr);
      verbs::connect_rc(p->b.qp, p->a.qp.qpn(), verbs::access::all, attr);
      s.export_side(p->a, i);
      s.export_side(p->b, i);
      if (s.is_send()) {
        s.fill_rq(p->a, s.a_dst);
        s.fill_rq(p->b, s.b_dst);
      }
    }
    s.pairs.push_back(std::move(p));
  }
}

loopback::~loopback() = default;

const std::string& loopback::device_name() const { return s_->dev_name; }

uint32_t loopback::inline_size() const { return s_->inline_size; }

nlohmann::json loopback::local_info() const {
  const state& s = *s_;
  nlohmann::json j = {{"qpns", nlohmann::json::array()}};
  if (s.hardware()) {
    const port_address p = s.own_port();
    j["lid"] = p.lid;
    j["gid"] = to_hex(p.gid, sizeof(p.gid));
    j["ethernet"] = p.ethernet;
  } else {
#ifdef GDAKI_HAVE_SOFT_WIRE
    const std::array<uint8_t, 16> addr = soft::local_address(s.dev);
    j["address"] = to_hex(addr.data(), addr.size());
    if (!soft_secret_configured()) j["secret"] = soft::secret_hex();
#else
    throw std::runtime_error("cross-process mode on the soft NIC needs its wire: not available in this build");
#endif
  }
  for (const auto& p : s.pairs) j["qpns"].push_back(s.has_a() ? p->a.qp.qpn() : p->b.qp.qpn());
  if (s.has_b()) {
    j["dst"] = ptr_json(s.b_dst.remote());
    j["src"] = ptr_json(s.b_src.remote());
    j["aux"] = ptr_json(s.aux.remote());
  } else {
    j["dst"] = ptr_json(s.a_dst.remote());
  }
  return j;
}

void loopback::connect_remote(const nlohmann::json& peer, const std::string& token_hex) {
  state& s = *s_;
  verbs::qp_attr attr;
  if (s.hardware()) {
    port_address p;
    p.lid = peer.at("lid").get<uint16_t>();
    p.ethernet = peer.at("ethernet").get<bool>();
    if (!from_hex(peer.at("gid").get<std::string>(), p.gid, 16)) {
      throw std::runtime_error("rendezvous: malformed GID from the peer");
    }
    if (p.ethernet != s.own_port().ethernet) {
      throw std::runtime_error("rendezvous: the peer's port is " + std::string(p.ethernet ? "RoCE" : "InfiniBand") +
                               ", ours is not: the two ports cannot reach each other");
    }
    attr = s.path(p);
  } else {
    attr.av.is_global = true;
    if (!from_hex(peer.at("address").get<std::string>(), attr.av.dgid, 16) ||
        !from_hex(token_hex, attr.av.token, 16)) {
      throw std::runtime_error("rendezvous: malformed wire address or token from the peer");
    }
#ifdef GDAKI_HAVE_SOFT_WIRE
    if (!soft_secret_configured() && peer.contains("secret")) {
      uint8_t secret[32];
      if (!from_hex(peer.at("secret").get<std::string>(), secret, sizeof(secret))) {
        throw std::runtime_error("rendezvous: malformed wire secret from the peer");
      }
      soft::set_secret(secret, sizeof(secret));
    }
#endif
  }
  const auto& qpns = peer.at("qpns");
  if (qpns.size() != s.pairs.size()) throw std::runtime_error("rendezvous: the peer has a different number of QPs");
  if (s.has_a()) {
    s.to_b_dst = ptr_from(peer.at("dst"));
    s.to_b_src = ptr_from(peer.at("src"));
    s.to_b_aux = ptr_from(peer.at("aux"));
  } else {
    s.to_a_dst = ptr_from(peer.at("dst"));
  }
  for (uint32_t i = 0; i < s.pairs.size(); ++i) {
    side& sd = s.has_a() ? s.pairs[i]->a : s.pairs[i]->b;
    verbs::connect_rc(sd.qp, qpns[i].get<uint32_t>(), verbs::access::all, attr);
    s.export_side(sd, i);
    if (s.is_send()) s.fill_rq(sd, s.has_a() ? s.a_dst : s.b_dst);
  }
}

void loopback::prepare_size(uint64_t bytes) {
  state& s = *s_;
  // The flag bytes start cleared, so a tag from an earlier size can not be mistaken.
  if (s.has_a()) s.a_dst.data()[bytes - 1] = 0;
  if (s.has_b()) s.b_dst.data()[bytes - 1] = 0;
}

namespace {

using state = loopback::state;

// One SEND through the data-path core (the device API has no two-sided call).
gdaki::status post_send(dev::qp_handle& h, const buffer& src, uint64_t bytes, uint32_t inline_size, uint32_t flags) {
  const bool inl = bytes <= inline_size;
  const uint32_t nbb = inl ? dev::wqebbs_send_inline(static_cast<uint32_t>(bytes)) : dev::wqebbs_send(1);
  uint64_t start = 0;
  const gdaki::status st = dev::sq_acquire(h, nbb, &start, op_timeout_ns);
  if (st != gdaki::status::ok) return st;
  const uint8_t ctrl = (flags & dev::op_flags::unsignaled) ? prm::ctrl_flags::ce_error_only : prm::ctrl_flags::cq_update;
  if (inl) {
    dev::prepare_send_inline(h, start, src.data(), static_cast<uint32_t>(bytes), ctrl);
  } else {
    const dev::sge g{src.addr(), static_cast<uint32_t>(bytes), src.mr.lkey()};
    dev::prepare_send(h, start, &g, 1, ctrl);
  }
  if (flags & dev::op_flags::defer) {
    dev::sq_mark_ready(h, start, nbb);  // a later post rings for it
  } else {
    dev::sq_commit(h, start, nbb);
  }
  return gdaki::status::ok;
}

// One bandwidth-test operation at scope Scope, sharing S, by initiator thread `gid` on
// pair `q`.
template <typename Scope, dev::sharing S>
gdaki::status post_one(const state& s, dev::qp_handle& h, uint32_t q, uint32_t gid, uint64_t bytes, uint32_t flags,
                       uint64_t* t) {
  switch (s.kind) {
    case test_kind::write_bw:
      if (bytes <= s.inline_size) {
        return dev::p<Scope, S>(h, s.to_b_dst, s.a_src.data(), static_cast<uint32_t>(bytes), t, flags, op_timeout_ns);
      }
      return dev::put<Scope, S>(h, s.to_b_dst, s.a_src.local(), bytes, t, flags, op_timeout_ns);
    case test_kind::read_bw:
      return dev::get<Scope, S>(h, s.a_dst.local(), s.to_b_src, bytes, t, flags, op_timeout_ns);
    case test_kind::atomic_rate:
      return dev::atomic_fetch_add<Scope, S>(h, s.to_b_dst, 1, s.result_slot(gid), t, flags, op_timeout_ns);
    case test_kind::put_signal_bw:
      return dev::put_signal<Scope, S>(h, s.to_b_dst, s.a_src.local(), bytes, s.signal_word(q), dev::signal_op::add,
                                       1, t, flags, op_timeout_ns);
    default:
      *t = 0;
      return post_send(h, s.a_src, bytes, s.inline_size, flags);
  }
}

// The body every initiator thread runs in a bandwidth test.
template <typename Scope, dev::sharing S>
void bw_thread(state& s, gate& g, uint64_t bytes, uint64_t warmup, uint64_t iters) {
  const uint32_t tid = arch::thread_rank_in_block(), block = arch::block_rank_in_grid();
  const uint32_t gid = block * s.opt.threads + tid;
  uint32_t unit = gid;
  if constexpr (std::is_same_v<Scope, dev::scope_warp>) unit = block * ((s.opt.threads + 31) / 32) + tid / 32;
  if constexpr (std::is_same_v<Scope, dev::scope_block>) unit = block;
  const uint32_t q = unit % static_cast<uint32_t>(s.pairs.size());
  dev::qp_handle& h = s.pairs[q]->a.h;
  // Looked up once: inside the loop the lookup cost ~26 instructions per operation, a
  // tenth of the poster's own work for an 8 B WRITE (callgrind).
  const char* const name = info(s.kind).name;
  const uint32_t cq_mod = s.cq_mod, post_list = s.opt.post_list;
  const auto phase = [&](uint64_t n) {
    uint64_t t = 0;
    // Countdowns, not i % cq_mod: two 64-bit divisions per operation were ~10 % of the
    // poster's cycles at 8 B (the loop is the measured poster's own).
    uint32_t to_signal = cq_mod, to_ring = post_list;
    for (uint64_t i = 0; i < n; ++i) {
      const bool last = i + 1 == n;
      const bool signalled = --to_signal == 0 || last;
      // A post list: every post_list-th operation (and the last) rings for the ones
      // deferred before it.
      const bool rings = --to_ring == 0 || last;
      if (to_signal == 0) to_signal = cq_mod;
      if (to_ring == 0) to_ring = post_list;
      const uint32_t flags =
          (signalled ? dev::op_flags::none : dev::op_flags::unsignaled) | (rings ? dev::op_flags::none : dev::op_flags::defer);
      check(post_one<Scope, S>(s, h, q, gid, bytes, flags, &t), h, name);
    }
    check(dev::quiet<Scope, S>(h, op_timeout_ns), h, "quiet");
  };
  if (warmup) phase(warmup);
  g.wait();
  phase(iters);
  g.done();
}

template <typename Scope>
void launch_bw(state& s, gate& g, uint64_t bytes, uint64_t warmup, uint64_t iters) {
  const auto body = [&]<dev::sharing S>() {
    dev::host::launch(s.opt.blocks, s.opt.threads, [&] { bw_thread<Scope, S>(s, g, bytes, warmup, iters); });
  };
  // A QP with one posting unit needs no atomics on its counters (the exclusive mode).
  if (s.posters_per_qp == 1) {
    body.template operator()<dev::sharing::exclusive>();
  } else {
    body.template operator()<dev::sharing::grid>();
  }
}

// The receiver of send_bw: consumes receive CQEs on every B QP and reposts the receive
// WQEs, until `expected` messages arrived or stop is set.
void send_receiver(state& s, uint64_t expected, const std::atomic<bool>& stop, std::string* error) {
  uint64_t got = 0;
  const dev::sge rb{s.b_dst.addr(), static_cast<uint32_t>(s.b_dst.bytes), s.b_dst.mr.lkey()};
  for (uint32_t spin = 0; got < expected && !stop.load(std::memory_order_relaxed);) {
    bool any = false;
    for (auto& p : s.pairs) {
      dev::completion c;
      while (dev::rq_poll(p->b.h, &c) == gdaki::status::ok) {
        any = true;
        ++got;
        if (!c.ok()) {
          *error = std::string("receive completion error: ") + prm::to_string(c.syndrome);
          return;
        }
        dev::rq_post(p->b.h, &rb, 1);
      }
    }
    if (any) {
      spin = 0;
    } else {
      arch::spin_pause(spin++);
    }
  }
}

// Ping-pong body of write_lat (WRITE, then poll the last byte) and send_lat (SEND, then
// poll the receive CQ). A is timed; B answers.
void pingpong_thread(state& s, bool a, uint64_t bytes, uint64_t warmup, uint64_t iters, std::vector<double>* samples) {
  pair& p = *s.pairs.front();
  side& me = a ? p.a : p.b;
  const buffer& src = a ? s.a_src : s.b_src;
  const buffer& my_dst = a ? s.a_dst : s.b_dst;
  const remote_ptr peer_dst = a ? s.to_b_dst : s.to_a_dst;
  const bool send = s.kind == test_kind::send_lat;
  const dev::sge rb{my_dst.addr(), static_cast<uint32_t>(my_dst.bytes), my_dst.mr.lkey()};
  uint8_t* out_flag = src.data(bytes - 1);
  const uint8_t* in_flag = my_dst.data(bytes - 1);
  const char* const name = info(s.kind).name;
  const auto post = [&](uint64_t i) {
    const uint32_t flags = i % s.cq_mod == s.cq_mod - 1 ? dev::op_flags::none : dev::op_flags::unsignaled;
    uint64_t t = 0;
    gdaki::status st;
    if (send) {
      st = post_send(me.h, src, bytes, s.inline_size, flags);
    } else if (bytes <= s.inline_size) {
      st = dev::p<dev::scope_thread, dev::sharing::exclusive>(me.h, peer_dst, src.data(), static_cast<uint32_t>(bytes),
                                                              &t, flags, op_timeout_ns);
    } else {
      st = dev::put<dev::scope_thread, dev::sharing::exclusive>(me.h, peer_dst, src.local(), bytes, &t, flags,
                                                                op_timeout_ns);
    }
    check(st, me.h, name);
  };
  const auto wait_in = [&](uint8_t tag) {
    if (send) {
      dev::completion c;
      for (uint32_t i = 1; dev::rq_poll(me.h, &c) != gdaki::status::ok; ++i) {
        if (i % 1024 == 0) dev::sq_progress(me.h);  // keeps the SQ's completions moving
        if (i % 16384 == 0) std::this_thread::yield();
      }
      if (!c.ok()) throw std::runtime_error(std::string("receive completion error: ") + prm::to_string(c.syndrome));
      dev::rq_post(me.h, &rb, 1);
    } else {
      // Spin, but give the core away now and then: with more runnable threads than
      // cores the peer may need this one to make progress.
      for (uint32_t i = 1; load_byte(in_flag) != tag; ++i) {
        if (i % 16384 == 0) std::this_thread::yield();
      }
    }
  };
  const uint64_t total = warmup + iters;
  for (uint64_t i = 0; i < total; ++i) {
    const uint8_t tag = static_cast<uint8_t>(i % 255 + 1);  // never 0, the cleared value
    if (a) {
      const uint64_t t0 = now_ns();
      *out_flag = tag;
      post(i);
      wait_in(tag);
      if (i >= warmup) (*samples)[i - warmup] = static_cast<double>(now_ns() - t0) / 2e3;  // one way, usec
    } else {
      wait_in(tag);
      *out_flag = tag;
      post(i);
    }
  }
  check(dev::quiet<dev::scope_thread, dev::sharing::exclusive>(me.h, op_timeout_ns), me.h, "quiet");
}

}  // namespace

row loopback::run_size(uint64_t bytes, uint64_t iterations, uint64_t warmup) {
  state& s = *s_;
  row r;
  r.bytes = bytes;
  r.iterations = iterations;
  if (bytes > s.max_bytes || bytes == 0) throw std::invalid_argument("size outside the buffers");
  if (info(s.kind).latency) {
    std::vector<double> samples(iterations);
    if (s.role == endpoint_role::both) prepare_size(bytes);
    if (s.kind == test_kind::read_lat) {
      dev::host::launch(1, 1, [&] {
        dev::qp_handle& h = s.pairs.front()->a.h;
        for (uint64_t i = 0; i < warmup + iterations; ++i) {
          const uint64_t t0 = now_ns();
          uint64_t t = 0;
          check(dev::get<dev::scope_thread, dev::sharing::exclusive>(h, s.a_dst.local(), s.to_b_src, bytes, &t,
                                                                     dev::op_flags::none, op_timeout_ns),
                h, "read_lat");
          check(dev::wait(h, t, op_timeout_ns), h, "read_lat wait");
          if (i >= warmup) samples[i - warmup] = static_cast<double>(now_ns() - t0) / 1e3;
        }
      });
    } else {
      dev::host::launch(1, s.role == endpoint_role::both ? 2 : 1, [&] {
        pingpong_thread(s, arch::thread_rank_in_block() == 0, bytes, warmup, iterations, &samples);
      });
    }
    r.messages = iterations;
    fill_latency(samples, &r);
    return r;
  }

  gate g;
  g.total = s.total_threads();
  std::atomic<bool> stop{false};
  std::string recv_error;
  std::thread receiver;
  if (s.kind == test_kind::send_bw && s.has_b()) {
    const uint64_t expected = static_cast<uint64_t>(s.total_threads()) * (warmup + iterations);
    receiver = std::thread([&] { send_receiver(s, expected, stop, &recv_error); });
  }
  try {
    switch (s.opt.scope) {
      case scope_kind::thread: launch_bw<dev::scope_thread>(s, g, bytes, warmup, iterations); break;
      case scope_kind::warp: launch_bw<dev::scope_warp>(s, g, bytes, warmup, iterations); break;
      case scope_kind::block: launch_bw<dev::scope_block>(s, g, bytes, warmup, iterations); break;
    }
  } catch (...) {
    stop = true;
    if (receiver.joinable()) receiver.join();
    throw;
  }
  if (receiver.joinable()) receiver.join();
  if (!recv_error.empty()) throw std::runtime_error(recv_error);
  r.messages = static_cast<uint64_t>(s.total_threads()) * iterations;
  r.seconds = static_cast<double>(g.t1.load() - g.t0.load()) / 1e9;
  const uint64_t msg_bytes = s.kind == test_kind::atomic_rate ? 8 : bytes;
  if (r.seconds > 0) {
    r.bw_avg_mbps = static_cast<double>(r.messages) * static_cast<double>(msg_bytes) / r.seconds / (1 << 20);
    r.msg_rate_mpps = static_cast<double>(r.messages) / r.seconds / 1e6;
  }
  return r;
}

void loopback::serve_size(uint64_t bytes, uint64_t iterations, uint64_t warmup, uint64_t initiator_threads) {
  state& s = *s_;
  if (s.kind == test_kind::write_lat || s.kind == test_kind::send_lat) {
    dev::host::launch(1, 1, [&] { pingpong_thread(s, false, bytes, warmup, iterations, nullptr); });
  } else if (s.kind == test_kind::send_bw) {
    std::atomic<bool> stop{false};
    std::string error;
    send_receiver(s, initiator_threads * (warmup + iterations), stop, &error);
    if (!error.empty()) throw std::runtime_error(error);
  }
  // One-sided tests: the server's NIC answers; its CPU has nothing to do.
}

uint64_t default_iterations(const options& opt, test_kind kind, uint64_t bytes) {
  const bool lat = info(kind).latency;
  const uint64_t base = lat ? (opt.quick ? 500 : 1000) : (opt.quick ? 2000 : 5000);
  // Bytes one size may move: enough for a stable figure, bounded in time on a CPU NIC.
  const uint64_t budget = (opt.quick ? uint64_t{64} : uint64_t{512}) << 20;
  const uint64_t per_iter = lat ? 2 * bytes : bytes * (static_cast<uint64_t>(opt.blocks) * opt.threads);
  return std::clamp<uint64_t>(budget / std::max<uint64_t>(per_iter, 1), 16, base);
}

}  // namespace gdaki::tool::bench
