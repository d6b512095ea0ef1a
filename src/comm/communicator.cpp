// The communicator's host half: opens the NIC, builds one RC QP per peer per context
// (a loopback pair for the rank itself), exchanges QP numbers, wire addresses and keys over
// the bootstrap, and keeps the device communicator (dev_comm) that kernels take.
#include "gdaki/comm/communicator.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "comm/comm_describe.hpp"
#include "gdaki/error.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/export.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::comm {
namespace {

constexpr size_t page = 4096;
size_t round_page(size_t n) { return (n + page - 1) / page * page; }

// What every rank tells the others about itself at creation.
struct rank_card {
  uint8_t address[16];  // soft wire address (zero for providers without one)
  int32_t pid;
  uint32_t has_address;
  char host[48];
};

// One RC QP to one peer in one context, with its CQs and its exported handle.
struct link {
  verbs::cq scq, rcq;
  verbs::qp qp;
  dev::cq_handle hs{}, hr{};
  std::unique_ptr<exported_qp> ex;
};

struct window_card {
  uint64_t bytes;
  uint64_t base;
  uint32_t rkey;
  uint32_t slot;
  uint32_t bad;  // 1: this rank refuses (its reason is in its own exception)
  uint32_t pad;
};

}  // namespace

struct communicator::impl {
  std::unique_ptr<bootstrap> boot;
  options opt;
  int rank = 0, size = 1;
  std::vector<rank_card> cards;
  uint8_t job[16] = {};

  verbs::device device;
  verbs::pd pd;
  // Where each QP's signal atomics return the original value, which nobody reads: one
  // cache line per QP, because the executors of different QPs run at once and one word
  // shared by all of them was written concurrently (a data race TSan reported).
  std::vector<uint64_t> scratch;
  verbs::mr scratch_mr;
  std::vector<std::unique_ptr<link>> links;   // [ctx * size + peer]
  std::vector<std::unique_ptr<link>> twins;   // [ctx]: the far end of the loopback pair
  std::vector<dev::qp_handle*> qp_table;

  // Windows: the device table and what backs each slot on the host.
  struct window_host {
    verbs::mr mr;
    std::vector<uint64_t> bases;
    std::vector<uint32_t> rkeys;
    void* owned = nullptr;  // alloc_window / signals: freed with the window
  };
  std::array<dev_window, max_windows> windows{};
  std::array<window_host, max_windows> window_hosts;
  window_host signal_host;

  std::vector<uint64_t> counter_issued, counter_completed, counter_ticket;
  std::array<uint64_t, max_teams> barrier_epoch{};
  comm_diag diag{};
  uint32_t next_team = 1;  // 0 is the world's barrier
  std::deque<std::vector<int32_t>> team_members;

  // The symmetric heap: one window, first-fit over a free list (offset -> bytes). The
  // same calls in the same order give the same offsets on every rank (checked).
  window_t heap_window = max_windows;
  std::map<uint64_t, uint64_t> heap_free;

  dev_comm dc{};

  void setup();
  void make_links();
  window_t add_window(void* base, size_t bytes, void* owned);
  std::string name(int r) const { return describe_rank(r, cards[static_cast<size_t>(r)].pid, cards[static_cast<size_t>(r)].host); }
  ~impl();
};

namespace {

void token_for(const uint8_t job[16], uint32_t ctx, int a, int b, uint8_t out[16]) {
  // Both ends of a pair derive the same token: the job tag mixed with (ctx, lower rank,
  // higher rank). The soft wire accepts a connection only with the token given at RTR.
  const uint32_t lo = static_cast<uint32_t>(std::min(a, b)), hi = static_cast<uint32_t>(std::max(a, b));
  std::memcpy(out, job, 16);
  for (int i = 0; i < 4; ++i) {
    out[i] ^= static_cast<uint8_t>(ctx >> (8 * i));
    out[4 + i] ^= static_cast<uint8_t>(lo >> (8 * i));
    out[8 + i] ^= static_cast<uint8_t>(hi >> (8 * i));
  }
}

}  // namespace

void communicator::impl::setup() {
  rank = boot->rank();
  size = boot->size();
  const std::string me = "communicator rank " + std::to_string(rank);
  if (opt.contexts == 0 || opt.contexts > max_contexts)
    throw error(status::invalid, me + ": options.contexts = " + std::to_string(opt.contexts) + " (allowed 1.." +
                                     std::to_string(max_contexts) + ")");
  if (opt.signals == 0 || opt.counters == 0)
    throw error(status::invalid, me + ": options.signals and options.counters must be at least 1");

  device = verbs::device::open(opt.device);
  const verbs::device_attr attr = device.query();
  if (opt.sq_wqebbs == 0 || opt.sq_wqebbs > attr.max_qp_wr)
    throw error(status::invalid, me + ": options.sq_wqebbs = " + std::to_string(opt.sq_wqebbs) + " but " + opt.device +
                                     " allows 1.." + std::to_string(attr.max_qp_wr));
  if (opt.traffic_class != 0 && !device.caps().traffic_class)
    throw error(status::not_supported, me + ": options.traffic_class on " + opt.device + " is not supported");
  pd = verbs::pd(device);

  // Who is who: wire address, pid and host of every rank (errors name ranks by these).
  rank_card mine{};
  mine.pid = static_cast<int32_t>(::getpid());
  ::gethostname(mine.host, sizeof(mine.host) - 1);
  if (device.provider_name() == "soft") {
    const auto a = soft::local_address(device);
    std::memcpy(mine.address, a.data(), 16);
    mine.has_address = 1;
  }
  cards.resize(static_cast<size_t>(size));
  boot->allgather(&mine, cards.data(), sizeof(rank_card));

  // The job tag (connection tokens derive from it): rank 0's random bytes.
  std::array<uint8_t, 16> tag{};
  if (rank == 0 && ::getrandom(tag.data(), tag.size(), 0) != static_cast<ssize_t>(tag.size()))
    throw error(status::io_error, me + ": getrandom failed");
  std::vector<std::array<uint8_t, 16>> tags(static_cast<size_t>(size));
  boot->allgather(tag.data(), tags.data(), 16);
  std::memcpy(job, tags[0].data(), 16);

  make_links();

  // Signals: user words, then max_teams * size barrier slots, remote-atomic everywhere.
  const size_t sig_bytes = round_page((opt.signals + size_t{max_teams} * static_cast<size_t>(size)) * 8);
  signal_host.owned = soft::alloc_shared(sig_bytes);
  signal_host.mr = verbs::mr(pd, signal_host.owned, sig_bytes, verbs::access::all);
  struct key_card {
    uint64_t base;
    uint32_t rkey, pad;
  } kc{reinterpret_cast<uint64_t>(signal_host.owned), signal_host.mr.rkey(), 0};
  std::vector<key_card> keys(static_cast<size_t>(size));
  boot->allgather(&kc, keys.data(), sizeof(kc));
  for (const key_card& k : keys) {
    signal_host.bases.push_back(k.base);
    signal_host.rkeys.push_back(k.rkey);
  }

  counter_issued.assign(opt.counters, 0);
  counter_completed.assign(opt.counters, 0);
  counter_ticket.assign(size_t{opt.contexts} * static_cast<size_t>(size), 0);

  dc.abi_size = sizeof(dev_comm);
  dc.abi_version = abi_version;
  dc.rank = rank;
  dc.nranks = static_cast<uint32_t>(size);
  dc.ncontexts = opt.contexts;
  dc.nsignals = opt.signals;
  dc.ncounters = opt.counters;
  // The communicator's initiators are CPU threads (make_links exports for them), so on a
  // NIC modelled by CPU threads the NIC's atomics and theirs are one kind.
  dc.self_direct = opt.self_direct && device.caps().nic_on_cpu_threads ? 1u : 0u;
  dc.timeout_ns = uint64_t{opt.timeout_ms} * 1'000'000ull;
  dc.qps = qp_table.data();
  dc.windows = windows.data();
  dc.signals.size = sig_bytes;
  dc.signals.local_base = reinterpret_cast<uint64_t>(signal_host.owned);
  dc.signals.lkey = signal_host.mr.lkey();
  dc.signals.live = 1;
  dc.signals.peer_base = signal_host.bases.data();
  dc.signals.peer_rkey = signal_host.rkeys.data();
  dc.counter_issued = counter_issued.data();
  dc.counter_completed = counter_completed.data();
  dc.counter_ticket = counter_ticket.data();
  dc.barrier_epoch = barrier_epoch.data();
  dc.world = dev_team{rank, static_cast<uint32_t>(size), 0, 1, nullptr, 0, 0};
  dc.diag = &diag;

  // Nobody posts before every peer's QPs are connected and its signal words registered.
  boot->barrier();
  if (opt.heap_bytes != 0) {
    const size_t bytes = round_page(opt.heap_bytes);
    void* mem = soft::alloc_shared(bytes);
    heap_window = add_window(mem, bytes, mem);
    heap_free[0] = bytes;
  }
}

void communicator::impl::make_links() {
  const uint32_t nctx = opt.contexts;
  verbs::cq_init ci;
  ci.depth = opt.sq_wqebbs;  // the export needs a send CQ as deep as the SQ
  verbs::qp_init qi;
  qi.sq_wqebbs = opt.sq_wqebbs;
  qi.rq_wqes = 1;
  auto make = [&] {
    auto l = std::make_unique<link>();
    l->scq = verbs::cq(device, ci);
    l->rcq = verbs::cq(device, ci);
    qi.send_cq = &l->scq;
    qi.recv_cq = &l->rcq;
    l->qp = verbs::qp(pd, qi);
    return l;
  };
  for (uint32_t c = 0; c < nctx; ++c) {
    for (int p = 0; p < size; ++p) links.push_back(make());
    twins.push_back(make());
  }
  // QP numbers: entry (ctx, p) of rank r is what rank p's QP (ctx, r) connects to; for the
  // rank itself, the twin of its loopback pair.
  std::vector<uint32_t> mine(size_t{nctx} * static_cast<size_t>(size));
  for (uint32_t c = 0; c < nctx; ++c)
    for (int p = 0; p < size; ++p)
      mine[c * static_cast<size_t>(size) + static_cast<size_t>(p)] =
          p == rank ? twins[c]->qp.qpn() : links[c * static_cast<size_t>(size) + static_cast<size_t>(p)]->qp.qpn();
  std::vector<uint32_t> all(mine.size() * static_cast<size_t>(size));
  boot->allgather(mine.data(), all.data(), mine.size() * sizeof(uint32_t));

  auto attr_to = [&](int peer, uint32_t c) {
    verbs::qp_attr at;
    const rank_card& card = cards[static_cast<size_t>(peer)];
    if (card.has_address) {
      at.av.is_global = true;
      std::memcpy(at.av.dgid, card.address, 16);
    }
    at.av.traffic_class = opt.traffic_class;
    token_for(job, c, rank, peer, at.av.token);
    return at;
  };
  const size_t per_rank = size_t{nctx} * static_cast<size_t>(size);
  for (uint32_t c = 0; c < nctx; ++c) {
    for (int p = 0; p < size; ++p) {
      link& l = *links[c * static_cast<size_t>(size) + static_cast<size_t>(p)];
      const uint32_t remote = all[static_cast<size_t>(p) * per_rank + c * static_cast<size_t>(size) + static_cast<size_t>(rank)];
      try {
        verbs::connect_rc(l.qp, remote, verbs::access::all, attr_to(p, c));
      } catch (const error& e) {
        throw error(e.code(), "communicator rank " + std::to_string(rank) + ": connecting context " + std::to_string(c) +
                                  " to " + name(p) + ": " + e.what());
      }
    }
    verbs::connect_rc(twins[c]->qp, links[c * static_cast<size_t>(size) + static_cast<size_t>(rank)]->qp.qpn(),
                      verbs::access::all, attr_to(rank, c));
  }
  constexpr size_t words_per_line = 8;
  scratch.assign(links.size() * words_per_line, 0);
  scratch_mr = verbs::mr(pd, scratch.data(), scratch.size() * sizeof(uint64_t), verbs::access::local_write);
  export_options eo;
  eo.scratch_lkey = scratch_mr.lkey();
  for (size_t i = 0; i < links.size(); ++i) {
    link* l = links[i].get();
    eo.scratch_addr = reinterpret_cast<uint64_t>(&scratch[i * words_per_line]);
    l->hs = l->scq.export_handle();
    l->hr = l->rcq.export_handle();
    l->ex = std::make_unique<exported_qp>(l->qp, &l->hs, &l->hr, eo);
    qp_table.push_back(&l->ex->handle());
  }
}

window_t communicator::impl::add_window(void* base, size_t bytes, void* owned) {
  std::string why;
  window_t slot = max_windows;
  for (window_t w = 0; w < max_windows; ++w)
    if (windows[w].live == 0) {
      slot = w;
      break;
    }
  if (slot == max_windows) why = "all " + std::to_string(max_windows) + " window slots are taken";
  const uint64_t addr = reinterpret_cast<uint64_t>(base);
  if (why.empty() && (base == nullptr || bytes == 0)) why = "an empty buffer";
  if (why.empty() && (addr % page != 0 || bytes % page != 0))
    why = "base " + hex(addr) + " and size " + std::to_string(bytes) + " must be multiples of 4096";
  verbs::mr m;
  if (why.empty()) {
    try {
      m = verbs::mr(pd, base, bytes, verbs::access::all);
    } catch (const error& e) {
      why = e.what();
    }
  }
  window_card mine{bytes, addr, m ? m.rkey() : 0, slot, why.empty() ? 0u : 1u, 0};
  std::vector<window_card> all(static_cast<size_t>(size));
  boot->allgather(&mine, all.data(), sizeof(mine));
  const std::string label = "window " + std::to_string(slot) + " (rank " + std::to_string(rank) + ")";
  if (!why.empty()) throw error(status::invalid, "register " + label + ": " + why);
  for (int r = 0; r < size; ++r) {
    const window_card& c = all[static_cast<size_t>(r)];
    if (c.bad) throw error(status::invalid, "register " + label + ": " + name(r) + " refused its part (see its error)");
    if (c.bytes != bytes)
      throw error(status::invalid, "register " + label + ": size " + std::to_string(bytes) + " here but " +
                                       std::to_string(c.bytes) + " on " + name(r) + "; windows are symmetric");
    if (c.slot != slot)
      throw error(status::invalid, "register " + label + ": " + name(r) + " put it in slot " + std::to_string(c.slot) +
                                       "; every rank must register and free windows in the same order");
  }
  window_host& h = window_hosts[slot];
  h.mr = std::move(m);
  h.owned = owned;
  h.bases.clear();
  h.rkeys.clear();
  for (const window_card& c : all) {
    h.bases.push_back(c.base);
    h.rkeys.push_back(c.rkey);
  }
  dev_window& d = windows[slot];
  d.size = bytes;
  d.local_base = addr;
  d.lkey = h.mr.lkey();
  d.peer_base = h.bases.data();
  d.peer_rkey = h.rkeys.data();
  d.live = 1;
  return slot;
}

communicator::impl::~impl() {
  // Local: no barrier here (ranks of one process are destroyed one after another);
  // communicator::finalize() is the collective "everyone is done" before destruction.
  links.clear();
  twins.clear();
  for (window_t w = 0; w < max_windows; ++w) {
    window_hosts[w].mr = verbs::mr();
    if (window_hosts[w].owned) soft::free_shared(window_hosts[w].owned);
  }
  signal_host.mr = verbs::mr();
  if (signal_host.owned) soft::free_shared(signal_host.owned);
}

communicator::communicator(std::unique_ptr<bootstrap> boot, const options& opt) : impl_(std::make_unique<impl>()) {
  if (!boot) throw error(status::invalid, "communicator: no bootstrap");
  impl_->boot = std::move(boot);
  impl_->opt = opt;
  impl_->setup();
}

communicator communicator::from_unique_id(const unique_id& id, int rank, int size, const options& opt) {
  // Before any wire starts: the id's secret is the soft NIC's job secret too.
  soft::set_secret(id.secret, sizeof(id.secret));
  return communicator(bootstrap_tcp(id, rank, size, static_cast<int>(opt.timeout_ms)), opt);
}

communicator communicator::from_env(const options& opt) {
  int rank = 0, size = 1;
  rank_from_env(&rank, &size);
  return from_unique_id(unique_id_from_env(), rank, size, opt);
}

std::vector<communicator> communicator::create_local(int size, const options& opt) {
  auto boots = make_local_bootstraps(size, static_cast<int>(opt.timeout_ms));
  std::vector<std::unique_ptr<communicator>> made(static_cast<size_t>(size));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        made[static_cast<size_t>(r)] = std::make_unique<communicator>(std::move(boots[static_cast<size_t>(r)]), opt);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<communicator> out;
  for (auto& m : made) out.push_back(std::move(*m));
  return out;
}

communicator::communicator(communicator&&) noexcept = default;
communicator& communicator::operator=(communicator&&) noexcept = default;
communicator::~communicator() = default;

int communicator::rank() const { return impl_->rank; }
int communicator::size() const { return impl_->size; }
std::string communicator::rank_name(int r) const {
  if (r < 0 || r >= impl_->size) return "rank " + std::to_string(r) + " (not a rank)";
  return impl_->name(r);
}
dev_comm& communicator::device() { return impl_->dc; }
const dev_comm& communicator::device() const { return impl_->dc; }

window_t communicator::register_window(void* base, size_t bytes) { return impl_->add_window(base, bytes, nullptr); }

window_t communicator::alloc_window(size_t bytes) {
  const size_t n = round_page(bytes == 0 ? 1 : bytes);
  void* mem = soft::alloc_shared(n);
  try {
    return impl_->add_window(mem, n, mem);
  } catch (...) {
    soft::free_shared(mem);
    throw;
  }
}

void communicator::free_window(window_t w) {
  if (w >= max_windows || impl_->windows[w].live == 0)
    throw error(status::invalid, "free window " + std::to_string(w) + " (rank " + std::to_string(impl_->rank) +
                                     "): not a registered window");
  impl_->boot->barrier();  // nobody frees memory a peer may still be writing
  impl_->windows[w] = dev_window{};
  auto& h = impl_->window_hosts[w];
  h.mr = verbs::mr();
  if (h.owned) soft::free_shared(h.owned);
  h.owned = nullptr;
}

void* communicator::window_base(window_t w) const {
  if (w >= max_windows || impl_->windows[w].live == 0) return nullptr;
  return reinterpret_cast<void*>(impl_->windows[w].local_base);
}

sym_ptr communicator::heap_alloc(size_t bytes) {
  impl& m = *impl_;
  if (m.heap_window == max_windows)
    throw error(status::invalid, "heap_alloc on rank " + std::to_string(m.rank) + ": options.heap_bytes was 0");
  const uint64_t want = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  uint64_t off = ~uint64_t{0};
  for (auto it = m.heap_free.begin(); it != m.heap_free.end(); ++it) {
    if (it->second >= want) {
      off = it->first;
      const uint64_t rest = it->second - want;
      m.heap_free.erase(it);
      if (rest) m.heap_free[off + want] = rest;
      break;
    }
  }
  std::vector<uint64_t> all(static_cast<size_t>(m.size));
  m.boot->allgather(&off, all.data(), sizeof(off));
  if (off == ~uint64_t{0})
    throw error(status::no_memory, "heap_alloc of " + std::to_string(bytes) + " bytes on rank " + std::to_string(m.rank) +
                                       ": the heap (" + std::to_string(m.windows[m.heap_window].size) + " bytes) is full");
  for (int r = 0; r < m.size; ++r)
    if (all[static_cast<size_t>(r)] != off)
      throw error(status::invalid, "heap_alloc of " + std::to_string(bytes) + " bytes on rank " + std::to_string(m.rank) +
                                       ": offset " + std::to_string(off) + " here but " +
                                       std::to_string(all[static_cast<size_t>(r)]) + " on " + m.name(r) +
                                       "; allocate and free in the same order on every rank");
  return sym_ptr{m.heap_window, off, want};
}

void communicator::heap_free(const sym_ptr& p) {
  impl& m = *impl_;
  if (p.window != m.heap_window || p.bytes == 0)
    throw error(status::invalid, "heap_free on rank " + std::to_string(m.rank) + ": not a heap allocation");
  m.heap_free[p.offset] = p.bytes;
  // Merge with the neighbours so the heap does not fragment into unusable pieces.
  auto it = m.heap_free.find(p.offset);
  auto next = std::next(it);
  if (next != m.heap_free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    m.heap_free.erase(next);
  }
  if (it != m.heap_free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      m.heap_free.erase(it);
    }
  }
}

void* communicator::local(const sym_ptr& p) const {
  return static_cast<uint8_t*>(window_base(p.window)) + p.offset;
}

dev_team communicator::world() const { return impl_->dc.world; }

dev_team communicator::split_stride(int start, int stride, int size) {
  impl& m = *impl_;
  const std::string what = "split_stride(start " + std::to_string(start) + ", stride " + std::to_string(stride) +
                           ", size " + std::to_string(size) + ") on rank " + std::to_string(m.rank);
  if (start < 0 || stride < 1 || size < 1 || start + static_cast<int64_t>(stride) * (size - 1) >= m.size)
    throw error(status::invalid, what + ": the team does not fit in " + std::to_string(m.size) + " ranks");
  if (m.next_team >= max_teams) throw error(status::no_memory, what + ": all " + std::to_string(max_teams) + " team slots are taken");
  dev_team t{-1, static_cast<uint32_t>(size), static_cast<uint32_t>(start), static_cast<uint32_t>(stride), nullptr,
             m.next_team++, 0};
  const int d = m.rank - start;
  if (d >= 0 && d % stride == 0 && d / stride < size) t.rank = d / stride;
  return t;
}

dev_team communicator::split_colour(int colour, int key) {
  impl& m = *impl_;
  const std::string what = "split_colour(" + std::to_string(colour) + ", " + std::to_string(key) + ") on rank " +
                           std::to_string(m.rank);
  const int32_t mine[2] = {colour, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(m.size));
  m.boot->allgather(mine, all.data(), sizeof(mine));
  if (m.next_team >= max_teams) throw error(status::no_memory, what + ": all " + std::to_string(max_teams) + " team slots are taken");
  const uint32_t id = m.next_team++;
  if (colour < 0) return dev_team{-1, 0, 0, 1, nullptr, id, 0};
  std::vector<int32_t> members;
  for (int r = 0; r < m.size; ++r)
    if (all[2 * static_cast<size_t>(r)] == colour) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int32_t a, int32_t b) { return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1]; });
  m.team_members.push_back(members);
  const auto& stored = m.team_members.back();
  int32_t me = -1;
  for (size_t i = 0; i < stored.size(); ++i)
    if (stored[i] == m.rank) me = static_cast<int32_t>(i);
  return dev_team{me, static_cast<uint32_t>(stored.size()), 0, 0, stored.data(), id, 0};
}

void communicator::barrier() { impl_->boot->barrier(); }

void communicator::finalize() {
  for (uint32_t c = 0; c < impl_->dc.ncontexts; ++c) {
    for (uint32_t p = 0; p < impl_->dc.nranks; ++p) {
      const status st = dev::quiet(*impl_->qp_table[c * impl_->dc.nranks + p], impl_->dc.timeout_ns);
      if (st != status::ok)
        throw error(st, "finalize on rank " + std::to_string(impl_->rank) + ": operations of context " +
                            std::to_string(c) + " to " + rank_name(static_cast<int>(p)) + " did not complete (" +
                            to_string(st) + ")");
    }
  }
  impl_->boot->barrier();
}

std::string communicator::describe_error() const {
  const impl& m = *impl_;
  return describe_diag(m.diag, m.rank, [&](int r) { return rank_name(r); },
                       [&](window_t w) { return w < max_windows ? m.windows[w].size : 0; }, m.opt.signals);
}

void communicator::clear_error() { impl_->diag = comm_diag{}; }

}  // namespace gdaki::comm
