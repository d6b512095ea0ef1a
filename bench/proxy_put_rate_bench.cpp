// Put message rate on the soft NIC, direct versus CPU-assisted doorbells versus the proxy
// backend: 1..N initiator threads, each on its own RC QP pair, post 8-byte puts (RDMA
// WRITE) and keep a window of them in flight. The same device-API call (dev::put, thread
// scope, exclusive sharing) runs in every mode; only the exported handle differs:
//   direct        db_store handle; the soft NIC executes on the posting thread
//   cpu_assisted  DBR-only handle; one doorbell_service thread rings for every QP
//   proxy         proxy-backend handle; one thread drains every QP's ring through a
//                 wqe_poster into the same kind of direct QP
// Median of --runs runs per (mode, thread count).
//
//   proxy_put_rate_bench [--puts N] [--runs R] [--max-threads T] [--window W] [--json|--csv]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gdaki/device/datapath.hpp"
#include "gdaki/proxy/doorbell_service.hpp"
#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/proxy_service.hpp"
#include "gdaki/proxy/wqe_poster.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "bench_framework.hpp"

using namespace gdaki;
namespace d = gdaki::dev;

namespace {

enum class mode { direct, cpu_assisted, proxy };
const char* name_of(mode m) {
  switch (m) {
    case mode::direct: return "direct";
    case mode::cpu_assisted: return "cpu_assisted";
    case mode::proxy: return "proxy";
  }
  return "?";
}

struct options : gdaki::benchfw::common_options {
  uint64_t puts = 200'000;  // per thread per run
  uint32_t max_threads = 4;
  uint32_t window = 32;  // puts in flight per thread (SQ and ring depth are 4x this)
};

// One initiator's QP pair and buffers. Members are destroyed in reverse order.
struct lane {
  verbs::cq a_scq, a_rcq, b_scq, b_rcq;
  verbs::qp a, b;
  d::cq_handle a_send{}, a_recv{};
  d::qp_handle nic{};     // A's direct handle (the poster's, in proxy mode)
  d::qp_handle handle{};  // what the initiator posts on
  std::unique_ptr<uint8_t[]> src_mem, dst_mem;
  verbs::mr src, dst;
  proxy::host_ring ring;
  std::unique_ptr<proxy::wqe_poster> poster;
  std::unique_ptr<proxy::proxy_service> service;
};

// One thread drives every lane's proxy service (as the proxy thread of a process would).
void drive(std::vector<std::unique_ptr<lane>>& lanes, std::atomic<bool>& stop) {
  uint32_t idle = 0;
  while (!stop.load(std::memory_order_acquire)) {
    size_t n = 0;
    for (auto& l : lanes) n += l->service->progress();
    if (n != 0) {
      idle = 0;
    } else {
      d::arch::spin_pause(++idle < 1024 ? idle : 64);  // pause, then yield: never sleep mid-run
    }
  }
}

// Seconds for `threads` initiators to finish o.puts puts each.
double run_once(const options& o, mode m, uint32_t threads) {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pda(dev), pdb(dev);
  std::vector<std::unique_ptr<lane>> lanes;
  const uint32_t depth = 4 * o.window;
  for (uint32_t i = 0; i < threads; ++i) {
    auto l = std::make_unique<lane>();
    verbs::cq_init ci;
    ci.depth = depth;
    l->a_scq = verbs::cq(dev, ci);
    l->a_rcq = verbs::cq(dev, ci);
    l->b_scq = verbs::cq(dev, ci);
    l->b_rcq = verbs::cq(dev, ci);
    verbs::qp_init qa;
    qa.send_cq = &l->a_scq;
    qa.recv_cq = &l->a_rcq;
    qa.sq_wqebbs = depth;
    qa.rq_wqes = 16;
    qa.max_inline = 64;
    l->a = verbs::qp(pda, qa);
    verbs::qp_init qb = qa;
    qb.send_cq = &l->b_scq;
    qb.recv_cq = &l->b_rcq;
    l->b = verbs::qp(pdb, qb);
    verbs::connect_rc(l->a, l->b.qpn(), verbs::access::all);
    verbs::connect_rc(l->b, l->a.qpn(), verbs::access::all);
    l->a_send = l->a_scq.export_handle();
    l->a_recv = l->a_rcq.export_handle();
    verbs::qp_export_options eo;
    eo.db_mode = m == mode::cpu_assisted ? d::doorbell_mode::cpu_assisted : d::doorbell_mode::db_store;
    l->nic = l->a.export_handle(&l->a_send, &l->a_recv, eo);
    l->src_mem.reset(new uint8_t[4096]());
    l->dst_mem.reset(new uint8_t[4096]());
    l->src = verbs::mr(pda, l->src_mem.get(), 4096, verbs::access::local_write);
    l->dst = verbs::mr(pdb, l->dst_mem.get(), 4096, verbs::access::all);
    l->handle = l->nic;
    lanes.push_back(std::move(l));
  }
  proxy::doorbell_service bells;
  if (m == mode::cpu_assisted) {
    for (auto& l : lanes) bells.add(l->nic);
    bells.start();
  }
  if (m == mode::proxy) {
    for (auto& l : lanes) {
      l->ring.init(10, 1);
      l->poster = std::make_unique<proxy::wqe_poster>(std::vector<d::qp_handle*>{&l->nic});
      l->service = std::make_unique<proxy::proxy_service>(l->ring.handle(), *l->poster);
      d::qp_handle h{};
      h.backend = d::qp_backend::proxy;
      h.proxy_ring = &l->ring.handle();
      h.max_inline = l->nic.max_inline;
      l->handle = h;
    }
  }
  std::atomic<bool> stop{false};
  std::thread driver;
  if (m == mode::proxy) driver = std::thread([&] { drive(lanes, stop); });

  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> failures{0};
  std::vector<std::thread> ts;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      lane& l = *lanes[i];
      ready.fetch_add(1);
      while (ready.load() != threads) std::this_thread::yield();
      std::vector<uint64_t> tickets(o.window, 0);
      for (uint64_t k = 0; k < o.puts; ++k) {
        uint64_t& slot = tickets[k % o.window];
        // Window: the put o.window ago must be done before this one reuses its slot.
        if (slot != 0 && d::wait(l.handle, slot) != status::ok) failures.fetch_add(1);
        const d::remote_ptr dst{reinterpret_cast<uint64_t>(l.dst_mem.get()) + 8 * (k % 64), l.dst.rkey()};
        const d::local_ptr src{reinterpret_cast<uint64_t>(l.src_mem.get()), l.src.lkey()};
        if (d::put<d::scope_thread, d::sharing::exclusive>(l.handle, dst, src, 8, &slot) != status::ok) {
          failures.fetch_add(1);
        }
      }
      if (d::quiet<d::scope_thread, d::sharing::exclusive>(l.handle) != status::ok) failures.fetch_add(1);
    });
  }
  for (auto& t : ts) t.join();
  const auto t1 = std::chrono::steady_clock::now();
  stop.store(true, std::memory_order_release);
  if (driver.joinable()) driver.join();
  bells.stop();
  if (failures.load() != 0) {
    std::fprintf(stderr, "%s: %u operations failed\n", name_of(m), failures.load());
    std::exit(1);
  }
  // Measured up to the last quiet; the ring's services close before the lanes go.
  for (auto& l : lanes) l->service.reset();
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fw = gdaki::benchfw;
  options o;
  CLI::App app{"8-byte put rate on soft0: direct vs CPU-assisted doorbells vs proxy backend"};
  fw::add_common_options(app, o);
  app.add_option("--puts", o.puts, "Puts per thread per run")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-threads", o.max_threads, "Initiator threads, doubling from 1")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--window", o.window, "Puts in flight per thread")->check(CLI::Range(1u, 64u))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<uint32_t> counts = fw::doubling_counts(o.max_threads);
  fw::writer w(o, "proxy_put_rate_bench", "8-byte put rate on soft0: direct vs CPU-assisted doorbells vs proxy",
               {fw::integer("bytes", 8), fw::integer("puts_per_thread", o.puts), fw::integer("window", o.window),
                fw::integer("hardware_threads", std::thread::hardware_concurrency())});
  w.expect_steps(3 * counts.size());
  for (mode m : {mode::direct, mode::cpu_assisted, mode::proxy}) {
    for (uint32_t threads : counts) {
      w.step(std::string(name_of(m)) + ", " + std::to_string(threads) + " thread(s)");
      std::vector<double> rates;
      for (uint32_t r = 0; r < o.runs; ++r) {
        rates.push_back(static_cast<double>(o.puts * threads) / run_once(o, m, threads) / 1e6);
      }
      w.add_row({fw::text("mode", name_of(m)), fw::integer("threads", threads),
                 fw::figure("puts_per_second", "Mput/s", fw::summarize(rates))});
    }
  }
  return w.finish();
}
