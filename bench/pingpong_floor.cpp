// The floor under any shared-memory ping-pong on this machine, and what work on the path
// adds to it. Two processes share one page; each spins until the other's one-byte tag
// arrives and then stores its own, so a round trip is two trips of a cache line between
// two cores and nothing else. That is what UCX's 8-byte put latency over shared memory
// comes close to, and what gdaki's `write_lat` adds its WQE, doorbell and NIC model to
// (docs/performance.md, "The ping-pong floor").
//
// --work N1,N2,...: each side also runs N units of independent integer work (four adds or
// XORs, a loop step; about 6 instructions a unit) between seeing the tag and storing its
// own, as a put's instructions sit between a poll and the store that answers it. Each row
// gives the one-way time (half a round trip, the way `gdaki bench write_lat` reports it:
// the median of per-round-trip samples read with steady_clock, then median, min and max of
// those over the runs), the time the same work takes alone (a loop of calls on one core),
// and how much of it the ping-pong added: 1 means the work was wholly serial with the
// line's trips, 0 that it hid behind them.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <new>
#include <vector>

#include "framework/bench_framework.hpp"

namespace {

namespace fw = gdaki::benchfw;

// Two cache lines: the ping side's tag and the pong side's, each written by one process.
struct alignas(64) shared_page {
  alignas(64) std::atomic<uint8_t> ping{0};
  alignas(64) std::atomic<uint8_t> pong{0};
  alignas(64) std::atomic<uint32_t> go{0};  // 1 + the row the pong side is to run, 0 = wait
  alignas(64) std::atomic<uint32_t> ready{0};
};

[[gnu::noinline]] uint64_t work(uint32_t units) {
  uint64_t a = 1, b = 2, c = 3, d = 4;
  for (uint32_t i = 0; i < units; ++i) {
    a += i;
    b ^= i;
    c += b;
    d ^= a;
    asm volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));  // kept, and not folded into one step
  }
  return a ^ b ^ c ^ d;
}

// The pong side: answers every tag of a row, then waits for the next row (or the end).
[[noreturn]] void pong_main(shared_page& p, const std::vector<uint32_t>& units, uint64_t rounds) {
  for (;;) {
    uint32_t g;
    while ((g = p.go.load(std::memory_order_acquire)) == 0) {
    }
    if (g == ~uint32_t{0}) _exit(0);
    const uint32_t n = units[g - 1];
    p.go.store(0, std::memory_order_relaxed);
    p.ready.store(1, std::memory_order_release);
    uint64_t sink = 0;
    for (uint64_t i = 0; i < rounds; ++i) {
      const auto tag = static_cast<uint8_t>(i % 255 + 1);
      while (p.ping.load(std::memory_order_acquire) != tag) {
      }
      sink += work(n);
      p.pong.store(tag, std::memory_order_release);
    }
    if (sink == 42) std::fputs("", stderr);  // keeps the work's result alive
  }
}

// One row's run on the ping side: the median one-way time in microseconds.
double ping_run(shared_page& p, uint32_t row, uint32_t units, uint64_t warmup, uint64_t iters) {
  p.ready.store(0, std::memory_order_relaxed);
  p.ping.store(0, std::memory_order_relaxed);
  p.pong.store(0, std::memory_order_relaxed);
  p.go.store(row + 1, std::memory_order_release);
  while (p.ready.load(std::memory_order_acquire) == 0) {
  }
  std::vector<double> samples;
  samples.reserve(iters);
  uint64_t sink = 0;
  for (uint64_t i = 0; i < warmup + iters; ++i) {
    const auto tag = static_cast<uint8_t>(i % 255 + 1);
    const auto t0 = fw::clock::now();
    p.ping.store(tag, std::memory_order_release);
    while (p.pong.load(std::memory_order_acquire) != tag) {
    }
    sink += work(units);  // the ping side's own answer, as in write_lat both sides post
    const auto t1 = fw::clock::now();
    if (i >= warmup) samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  if (sink == 42) std::fputs("", stderr);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

// The work alone, in microseconds per call: the best of five loops of `calls` calls.
double work_alone_us(uint32_t units, uint64_t calls) {
  double best = 1e30;
  uint64_t sink = 0;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = fw::clock::now();
    for (uint64_t i = 0; i < calls; ++i) sink += work(units);
    best = std::min(best, std::chrono::duration<double, std::micro>(fw::clock::now() - t0).count() / double(calls));
  }
  if (sink == 42) std::fputs("", stderr);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  fw::common_options o;
  o.runs = 5;
  uint64_t iters = 200000, warmup = 2000;
  std::vector<uint32_t> units{0, 32, 64, 128, 256};
  CLI::App app{"The shared-memory ping-pong floor: two processes, one cache line each way, and what work on the path adds"};
  fw::add_common_options(app, o);
  app.add_option("-n,--iters", iters, "Round trips per run")->capture_default_str()->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 32));
  app.add_option("--warmup", warmup, "Round trips before the timed ones")->capture_default_str()->check(CLI::Range(uint64_t{0}, uint64_t{1} << 24));
  app.add_option("--work", units, "Units of work per side between the tag seen and the tag stored (comma-separated)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(0u, 100000u));
  CLI11_PARSE(app, argc, argv);

  auto* p = static_cast<shared_page*>(
      ::mmap(nullptr, sizeof(shared_page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  new (p) shared_page();
  // The pong side is forked before any thread exists (the progress line starts one).
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  if (child == 0) pong_main(*p, units, warmup + iters);

  fw::writer w(o, "pingpong_floor", "Shared-memory ping-pong floor (one cache line each way)",
               {fw::integer("iters", iters), fw::integer("warmup", warmup)});
  // Runs interleave the rows: run 1 of every row, then run 2 ..., so a machine that
  // changes speed in between shifts every row alike.
  std::vector<std::vector<double>> one_way(units.size());
  for (uint32_t r = 0; r < o.runs; ++r) {
    for (size_t k = 0; k < units.size(); ++k) {
      one_way[k].push_back(ping_run(*p, static_cast<uint32_t>(k), units[k], warmup, iters));
    }
  }
  p->go.store(~uint32_t{0}, std::memory_order_release);
  int st = 0;
  ::waitpid(child, &st, 0);

  w.begin_run("pingpong_floor", "Shared-memory ping-pong floor (one cache line each way)");
  const fw::stats base = fw::summarize(one_way[0]);
  for (size_t k = 0; k < units.size(); ++k) {
    const fw::stats s = fw::summarize(one_way[k]);
    const double alone = work_alone_us(units[k], 200000);
    const double serial = alone > 0 ? (s.median - base.median) / alone : 0;
    w.add_row({fw::integer("work_units", units[k]), fw::figure("one_way", "usec", s),
               fw::number("work_alone", alone, 4, "usec"), fw::number("serial_share", serial, 2)});
  }
  return w.finish();
}
