// What the benchmarks in bench/ share: command-line parsing (CLI11, with --runs and --json
// on every benchmark) and the summary of repeated runs (median, min, max). Each benchmark
// keeps only its own measurement.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gdaki_bench {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// Median, min and max of a benchmark's repeated runs (the figures docs/performance.md quotes).
struct run_stats {
  double median = 0, min = 0, max = 0;
};

inline run_stats summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Options every benchmark has.
struct common_options {
  uint32_t runs = 3;
  bool json = false;
};

inline void add_common_options(CLI::App& app, common_options& o) {
  app.add_option("--runs", o.runs, "Runs per figure; the median is reported")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  app.add_flag("--json", o.json, "Print one JSON object instead of the table");
}

// Thread (or producer) counts 1, 2, 4, ... up to and including max.
inline std::vector<uint32_t> doubling_counts(uint32_t max) {
  std::vector<uint32_t> counts;
  for (uint32_t t = 1; t <= max; t *= 2) counts.push_back(t);
  if (counts.back() != max) counts.push_back(max);
  return counts;
}

}  // namespace gdaki_bench
