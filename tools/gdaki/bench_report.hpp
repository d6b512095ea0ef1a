// Results of `gdaki bench` and their three renderings: a perftest-style table (here), one
// JSON object (docs/bench-schema.json) and CSV (bench/plot.py reads it), both rendered by
// the benchmark framework (bench/framework) from the report to_report() makes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_options.hpp"

namespace gdaki::tool::bench {

// One size of one test. Bandwidth tests fill bw_*/msg_rate; latency tests the t_* fields
// (microseconds, one-way for ping-pong tests as perftest reports them).
struct row {
  uint64_t bytes = 0;
  uint64_t iterations = 0;  // per initiator thread (bw) or round trips (lat)
  uint64_t messages = 0;    // messages counted in the figure
  double seconds = 0;
  double bw_avg_mbps = 0;    // MB/s with MB = 2^20 bytes, as perftest and ucx_perftest
  double msg_rate_mpps = 0;  // million messages per second
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, t_99 = 0, t_999 = 0;
};

struct run {
  test_kind kind;
  std::vector<row> rows;
  uint32_t inline_size = 0;  // messages up to this size were posted inline
};

// What the runs were made with, for the header and the JSON "config" object.
struct run_context {
  std::string mode;  // "loopback (in-process)" or "client" / "server"
  std::string device;
  const options* opt = nullptr;
  uint32_t inline_size = 0;  // effective: the -I value or the test's default
};

// Latency statistics over samples (microseconds); sorts the vector.
void fill_latency(std::vector<double>& samples_us, row* r);

// Prints the table header of one test (perftest prints it before the first size), one
// row, and the closing rule. Split so rows appear as soon as each size finishes.
std::string table_header(const run_context& ctx, test_kind kind);
std::string table_row(test_kind kind, const row& r);
std::string table_footer();

// The framework's report of these runs: config, units, one run per test, one row per size.
benchfw::report to_report(const run_context& ctx, const std::vector<run>& runs);

// The JSON (--json) or CSV (--csv, the columns bench/plot.py reads) of these runs.
std::string render(const run_context& ctx, const std::vector<run>& runs);

}  // namespace gdaki::tool::bench
