// Descriptors per second through the proxy ring: 1..N producer threads, one proxy
// service draining into a poster that completes every operation at once (so the figure
// is the ring + service cost, not a fabric's). Median of --runs runs per producer count.
//
//   proxy_ring_bench [--count N] [--runs R] [--max-producers P] [--log2-slots K] [--json]
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

struct options {
  uint64_t count = 4'000'000;
  uint32_t runs = 3;
  uint32_t max_producers = 8;
  uint32_t log2_slots = 10;
  bool json = false;
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

bool parse(int argc, char** argv, options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](uint64_t* v) {
      if (i + 1 >= argc) return false;
      *v = std::strtoull(argv[++i], nullptr, 10);
      return true;
    };
    uint64_t v = 0;
    if (a == "--json") {
      o->json = true;
    } else if (a == "--count" && next(&v)) {
      o->count = v;
    } else if (a == "--runs" && next(&v)) {
      o->runs = static_cast<uint32_t>(v);
    } else if (a == "--max-producers" && next(&v)) {
      o->max_producers = static_cast<uint32_t>(v);
    } else if (a == "--log2-slots" && next(&v)) {
      o->log2_slots = static_cast<uint32_t>(v);
    } else {
      std::fprintf(stderr, "usage: %s [--count N] [--runs R] [--max-producers P] [--log2-slots K] [--json]\n",
                   argv[0]);
      return false;
    }
  }
  return o->count > 0 && o->runs > 0 && o->max_producers > 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  std::vector<uint32_t> counts;
  for (uint32_t p = 1; p <= o.max_producers; p *= 2) counts.push_back(p);
  if (counts.back() != o.max_producers) counts.push_back(o.max_producers);

  if (o.json) {
    std::printf("{\"benchmark\":\"proxy_ring\",\"slots\":%u,\"descriptors_per_run\":%llu,\"runs\":%u,"
                "\"hardware_threads\":%u,\"results\":[",
                1u << o.log2_slots, static_cast<unsigned long long>(o.count), o.runs,
                std::thread::hardware_concurrency());
  } else {
    std::printf("proxy ring: %u slots, %llu descriptors per run, median of %u runs, %u hardware threads\n",
                1u << o.log2_slots, static_cast<unsigned long long>(o.count), o.runs,
                std::thread::hardware_concurrency());
    std::printf("%10s %16s %16s %16s\n", "producers", "Mdesc/s median", "Mdesc/s min", "Mdesc/s max");
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    const uint32_t producers = counts[k];
    std::vector<double> rates;
    for (uint32_t run = 0; run < o.runs; ++run) {
      const double s = run_once(o, producers);
      rates.push_back(static_cast<double>(o.count / producers * producers) / s);
    }
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    if (o.json) {
      std::printf("%s{\"producers\":%u,\"descriptors_per_second_median\":%.0f,\"min\":%.0f,\"max\":%.0f}",
                  k ? "," : "", producers, median, rates.front(), rates.back());
    } else {
      std::printf("%10u %16.2f %16.2f %16.2f\n", producers, median / 1e6, rates.front() / 1e6, rates.back() / 1e6);
    }
    std::fflush(stdout);
  }
  if (o.json) std::printf("]}\n");
  return 0;
}
