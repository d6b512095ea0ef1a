// The kernel-shaped put rate: T CPU threads started by the host grid launcher (one block of
// T threads, as a kernel's threads would be), each posting 8-byte inline puts (dev::p,
// thread scope) on the soft NIC, either all on ONE shared QP (sharing::grid: every post
// reserves its WQEBBs with an atomic) or on ONE QP EACH (sharing::exclusive). Every put
// writes a value naming its thread and sequence number into the thread's own window of W
// slots; after the run the target is read back and every slot must hold the last value
// its thread wrote there, so a lost, reordered or misplaced WRITE fails the run.
// Median, min and max of --runs runs per (mode, thread count). --post-list L: every thread
// rings one doorbell per L puts (the others op_flags::defer); on the shared QP any
// thread's doorbell publishes every thread's ready puts.
//
//   grid_put_rate [--puts N] [--runs R] [--max-threads T] [--window W] [--cq-mod K]
//                 [--post-list L] [--json|--csv]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gdaki/device/datapath.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "bench_framework.hpp"

using namespace gdaki;
namespace d = gdaki::dev;

namespace {

enum class mode { shared_qp, qp_per_thread };
const char* name_of(mode m) { return m == mode::shared_qp ? "shared_qp" : "qp_per_thread"; }

struct options : gdaki::benchfw::common_options {
  uint64_t puts = 200'000;  // per thread per run
  uint32_t max_threads = 4;
  uint32_t window = 64;  // target slots per thread
  uint32_t cq_mod = 16;  // every cq_mod-th put asks for a CQE
  uint32_t post_list = 1;  // every post_list-th put rings (the others are deferred)
};

constexpr uint64_t op_timeout_ns = 10'000'000'000ull;

// One QP pair: A posts, B is the target.
struct pair {
  verbs::cq a_scq, a_rcq, b_scq, b_rcq;
  verbs::qp a, b;
  d::cq_handle a_send{}, a_recv{};
  d::qp_handle h{};
};

uint64_t value_of(uint32_t thread, uint64_t k) { return (uint64_t{thread + 1} << 40) | (k + 1); }

// Seconds for `threads` grid threads to post o.puts puts each and quiet; checks the target.
double run_once(const options& o, mode m, uint32_t threads) {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pda(dev), pdb(dev);
  const uint32_t qps = m == mode::shared_qp ? 1 : threads;
  const uint32_t posters = threads / qps;
  // Room for every poster's unsignalled run plus its signalled one, twice over.
  uint32_t depth = 64;
  while (depth < 4 * posters * o.cq_mod) depth *= 2;
  std::vector<std::unique_ptr<pair>> pairs;
  for (uint32_t i = 0; i < qps; ++i) {
    auto p = std::make_unique<pair>();
    verbs::cq_init ci;
    ci.depth = depth;
    p->a_scq = verbs::cq(dev, ci);
    p->a_rcq = verbs::cq(dev, ci);
    p->b_scq = verbs::cq(dev, ci);
    p->b_rcq = verbs::cq(dev, ci);
    verbs::qp_init qa;
    qa.send_cq = &p->a_scq;
    qa.recv_cq = &p->a_rcq;
    qa.sq_wqebbs = depth;
    qa.rq_wqes = 16;
    qa.max_inline = 64;
    p->a = verbs::qp(pda, qa);
    verbs::qp_init qb = qa;
    qb.send_cq = &p->b_scq;
    qb.recv_cq = &p->b_rcq;
    p->b = verbs::qp(pdb, qb);
    verbs::connect_rc(p->a, p->b.qpn(), verbs::access::all);
    verbs::connect_rc(p->b, p->a.qpn(), verbs::access::all);
    p->a_send = p->a_scq.export_handle();
    p->a_recv = p->a_rcq.export_handle();
    p->h = p->a.export_handle(&p->a_send, &p->a_recv);
    pairs.push_back(std::move(p));
  }
  const size_t slots = size_t{threads} * o.window;
  std::vector<uint64_t> target(slots, 0);
  verbs::mr dst(pdb, target.data(), slots * sizeof(uint64_t), verbs::access::all);

  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> failures{0};
  std::vector<std::chrono::steady_clock::time_point> t0(threads), t1(threads);
  const auto body = [&]<d::sharing S>() {
    const uint32_t tid = d::arch::thread_rank_in_block();
    d::qp_handle& h = pairs[tid % qps]->h;
    ready.fetch_add(1);
    while (ready.load() != threads) std::this_thread::yield();
    t0[tid] = std::chrono::steady_clock::now();
    uint64_t ticket = 0;
    for (uint64_t k = 0; k < o.puts; ++k) {
      const uint64_t v = value_of(tid, k);
      const d::remote_ptr to{reinterpret_cast<uint64_t>(&target[size_t{tid} * o.window + k % o.window]), dst.rkey()};
      const bool signalled = k % o.cq_mod == o.cq_mod - 1 || k + 1 == o.puts;
      const bool rings = k % o.post_list == o.post_list - 1 || k + 1 == o.puts;
      const uint32_t flags =
          (signalled ? d::op_flags::none : d::op_flags::unsignaled) | (rings ? d::op_flags::none : d::op_flags::defer);
      if (d::p<d::scope_thread, S>(h, to, &v, sizeof(v), &ticket, flags, op_timeout_ns) != status::ok) {
        failures.fetch_add(1);
        return;
      }
    }
    if (d::quiet<d::scope_thread, S>(h, op_timeout_ns) != status::ok) failures.fetch_add(1);
    t1[tid] = std::chrono::steady_clock::now();
  };
  if (m == mode::shared_qp && threads > 1) {
    d::host::launch(1, threads, [&] { body.template operator()<d::sharing::grid>(); });
  } else {
    d::host::launch(1, threads, [&] { body.template operator()<d::sharing::exclusive>(); });
  }
  if (failures.load() != 0) throw std::runtime_error(std::string(name_of(m)) + ": a put or quiet failed");
  // Every slot holds the last value its thread put there (RC keeps one QP's WRITEs in order).
  for (uint32_t t = 0; t < threads; ++t) {
    for (uint32_t j = 0; j < o.window && j < o.puts; ++j) {
      const uint64_t last = (o.puts - 1 - j) / o.window * o.window + j;
      const uint64_t got = d::arch::load_acquire(&target[size_t{t} * o.window + j]);
      if (got != value_of(t, last)) {
        throw std::runtime_error(std::string(name_of(m)) + ": thread " + std::to_string(t) + " slot " +
                                 std::to_string(j) + " holds " + std::to_string(got) + ", expected " +
                                 std::to_string(value_of(t, last)));
      }
    }
  }
  const auto start = *std::min_element(t0.begin(), t0.end());
  const auto end = *std::max_element(t1.begin(), t1.end());
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fw = gdaki::benchfw;
  options o;
  CLI::App app{"8-byte put rate of grid threads on soft0: one shared QP versus one QP per thread, data checked"};
  fw::add_common_options(app, o);
  app.add_option("--puts", o.puts, "Puts per thread per run")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-threads", o.max_threads, "Grid threads, doubling from 1")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--window", o.window, "Target slots per thread")->check(CLI::Range(1u, 4096u))->capture_default_str();
  app.add_option("--cq-mod", o.cq_mod, "Every N-th put asks for a CQE")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--post-list", o.post_list, "Every thread rings one doorbell per N puts (the others deferred)")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<uint32_t> counts = fw::doubling_counts(o.max_threads);
  fw::writer w(o, "grid_put_rate", "8-byte inline puts from grid threads on soft0, data checked",
               {fw::integer("bytes", 8), fw::integer("puts_per_thread", o.puts), fw::integer("cq_mod", o.cq_mod),
                fw::integer("post_list", o.post_list),
                fw::integer("hardware_threads", std::thread::hardware_concurrency())});
  w.expect_steps(counts.size());
  try {
    for (uint32_t threads : counts) {
      w.step(std::to_string(threads) + " thread(s)");
      // Interleaved: one run of each mode in turn, so load changes hit both alike.
      std::vector<double> rates[2];
      for (uint32_t r = 0; r < o.runs; ++r) {
        for (mode m : {mode::shared_qp, mode::qp_per_thread}) {
          rates[static_cast<int>(m)].push_back(static_cast<double>(o.puts * threads) / run_once(o, m, threads) / 1e6);
        }
      }
      for (mode m : {mode::shared_qp, mode::qp_per_thread}) {
        w.add_row({fw::text("mode", name_of(m)), fw::integer("threads", threads),
                   fw::figure("puts_per_second", "Mput/s", fw::summarize(rates[static_cast<int>(m)]))});
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grid_put_rate: %s\n", e.what());
    return 1;
  }
  return w.finish();
}
