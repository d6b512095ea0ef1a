// Descriptors per second through the proxy ring: 1..N producer threads, one proxy
// service draining into a poster that completes every operation at once (so the figure
// is the ring + service cost, not a fabric's). Median of --runs runs per producer count.
//
//   proxy_ring_bench [--count N] [--runs R] [--max-producers P] [--log2-slots K] [--json|--csv]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "gdaki/device/arch.hpp"
#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/proxy_service.hpp"
#include "bench_framework.hpp"

using namespace gdaki;
using namespace gdaki::proxy;

namespace {

// Completes every operation on the next poll.
class null_poster final : public poster {
 public:
  status post(const descriptor&, uint64_t cookie) override {
    done_.push_back(completion{cookie, status::ok});
    return status::ok;
  }
  size_t poll(completion* out, size_t max) override {
    size_t n = 0;
    while (n < max && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }
  const char* name() const override { return "null"; }

 private:
  std::deque<completion> done_;
};

struct options : gdaki::benchfw::common_options {
  uint64_t count = 4'000'000;
  uint32_t max_producers = 8;
  uint32_t log2_slots = 10;
};

// One run: seconds to push and drain `count` descriptors with `producers` threads.
double run_once(const options& o, uint32_t producers) {
  host_ring ring;
  if (ring.init(o.log2_slots, 1) != status::ok) {
    std::fprintf(stderr, "ring init failed\n");
    std::exit(1);
  }
  ring_handle r = ring.handle();
  null_poster p;
  proxy_service service(r, p);
  service.start();
  const uint64_t per = o.count / producers;
  const uint64_t total = per * producers;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < producers; ++t) {
    threads.emplace_back([&r, per, t] {
      const descriptor d = make_put(static_cast<uint16_t>(t), 0x1000, 1, 0x2000, 2, 64, 0);
      for (uint64_t i = 0; i < per; ++i) ring_push(r, d, wait_forever);
    });
  }
  for (auto& th : threads) th.join();
  // Producers are done; wait (sleeping, not spinning: 2 cores) for the proxy to catch up.
  while (ring_counter(r, 0) != total) std::this_thread::sleep_for(std::chrono::microseconds(50));
  const auto t1 = std::chrono::steady_clock::now();
  service.stop();
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fw = gdaki::benchfw;
  options o;
  CLI::App app{"Descriptors per second through the proxy ring (a null poster completes everything at once)"};
  fw::add_common_options(app, o);
  app.add_option("--count", o.count, "Descriptors per run")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-producers", o.max_producers, "Producer threads, doubling from 1")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--log2-slots", o.log2_slots, "Ring slots, as a power of two")
      ->check(CLI::Range(gdaki::proxy::ring_min_log2, gdaki::proxy::ring_max_log2))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<uint32_t> counts = fw::doubling_counts(o.max_producers);

  fw::writer w(o, "proxy_ring_bench", "Descriptors per second through the proxy ring, null poster",
               {fw::integer("slots", 1u << o.log2_slots), fw::integer("descriptors_per_run", o.count),
                fw::integer("hardware_threads", std::thread::hardware_concurrency())});
  w.expect_steps(counts.size());
  for (const uint32_t producers : counts) {
    w.step(std::to_string(producers) + " producer(s)");
    std::vector<double> rates;
    for (uint32_t run = 0; run < o.runs; ++run) {
      const double s = run_once(o, producers);
      rates.push_back(static_cast<double>(o.count / producers * producers) / s / 1e6);
    }
    w.add_row({fw::integer("producers", producers), fw::figure("descriptors_per_second", "Mdesc/s", fw::summarize(rates), 2)});
  }
  return w.finish();
}
