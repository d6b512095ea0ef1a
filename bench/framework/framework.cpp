// Common options and statistics of the benchmarks (bench_framework.hpp).
#include <algorithm>

#include "bench_framework.hpp"

namespace gdaki::benchfw {

stats summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::vector<uint32_t> doubling_counts(uint32_t max) {
  std::vector<uint32_t> counts;
  for (uint32_t t = 1; t <= max; t *= 2) counts.push_back(t);
  if (counts.back() != max) counts.push_back(max);
  return counts;
}

std::string size_text(uint64_t b) {
  if (b >= (uint64_t{1} << 20) && b % (uint64_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

const char* version() { return GDAKI_VERSION; }

void add_common_options(CLI::App& app, common_options& o, option_set which) {
  if (which.runs) {
    app.add_option("--runs", o.runs, "Runs per figure; the median is reported")
        ->check(CLI::Range(1u, 1000u))
        ->capture_default_str();
  }
  CLI::Option* json = app.add_flag("--json", o.json, "Print one JSON object (docs/bench-schema.json)");
  app.add_flag("--csv", o.csv, "Print CSV (bench/plot.py draws gdaki bench's)")->excludes(json);
  app.add_option("-o,--output", o.output, "Write the JSON/CSV to FILE (the table still goes to stdout)");
  CLI::Option* on = app.add_flag_callback("--progress", [&o] { o.progress = 1; }, "Progress line on stderr from the start");
  app.add_flag_callback("--no-progress", [&o] { o.progress = 0; }, "No progress line (default: after ~3 s)")
      ->excludes(on);
}

}  // namespace gdaki::benchfw
