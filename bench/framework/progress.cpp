// The progress line of the benchmarks (bench_framework.hpp).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "bench_framework.hpp"

namespace gdaki::benchfw {

progress::progress(std::string prefix, int mode, uint64_t total_steps, std::string noun, double quiet_s)
    : prefix_(std::move(prefix)),
      noun_(std::move(noun)),
      total_(total_steps),
      tty_(isatty(STDERR_FILENO) != 0),
      quiet_s_(mode == 1 ? 0.0 : quiet_s) {
  if (mode != 0) ticker_ = std::thread([this] { loop(); });
}

progress::~progress() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (printed_ && tty_) std::fprintf(stderr, "\r\033[K");
}

void progress::set(const std::string& what) {
  {
    std::lock_guard<std::mutex> g(mu_);
    what_ = what;
  }
  cv_.notify_all();  // with --progress the first line appears at once
}

void progress::step_done() {
  std::lock_guard<std::mutex> g(mu_);
  ++done_;
}

void progress::loop() {
  const auto t0 = std::chrono::steady_clock::now();
  const auto period = std::chrono::seconds(tty_ ? 1 : 5);  // a log file gets fewer lines
  auto last = t0;
  std::unique_lock<std::mutex> lk(mu_);
  // Wakes every 250 ms, or at once when --progress wants its first line.
  const auto first_now = [this] { return quiet_s_ == 0 && !printed_ && !what_.empty(); };
  for (;;) {
    cv_.wait_for(lk, std::chrono::milliseconds(250), [&] { return stop_ || first_now(); });
    // --progress promises a line: a run that ends before this thread first woke (a short
    // run on a busy machine) still prints it, once, before the thread stops.
    if (stop_ && !first_now()) return;
    const auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - t0).count();
    if (!stop_ && (el < quiet_s_ || what_.empty() || (printed_ && now - last < period))) continue;
    last = now;
    std::fprintf(stderr, "%s[%s] %.0f s: %s (%llu/%llu %s done)%s", tty_ ? "\r\033[K" : "", prefix_.c_str(), el,
                 what_.c_str(), static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                 noun_.c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
    printed_ = true;
  }
}

}  // namespace gdaki::benchfw
