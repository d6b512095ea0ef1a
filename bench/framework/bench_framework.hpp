// The benchmark framework shared by the programs in bench/ and `gdaki bench`: one set of
// common options, one result model, one renderer per format (table, JSON after
// docs/bench-schema.json, CSV) and one progress line. A benchmark keeps only its own
// measurement: it fills a report (runs of rows of cells) and hands it here.
//
//   gdaki::benchfw::common_options o;
//   CLI::App app{"..."};
//   gdaki::benchfw::add_common_options(app, o);          // --runs --json --csv -o --progress ...
//   gdaki::benchfw::writer w(o, "my_bench", "What it measures", {benchfw::integer("depth", 64)});
//   w.begin_run("my_bench", "title");
//   w.add_row({benchfw::integer("bytes", 64), benchfw::figure("rate", "Mop/s", summarize(v))});
//   return w.finish();
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gdaki::benchfw {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// Median, min and max of a figure's repeated runs (the figures docs/performance.md quotes).
struct stats {
  double median = 0, min = 0, max = 0;
};

// Sorts a copy; the median of an even count is the upper middle value. Empty: all zero.
stats summarize(std::vector<double> v);

// Thread (or producer) counts 1, 2, 4, ... up to and including max.
std::vector<uint32_t> doubling_counts(uint32_t max);

// Human text for a size: 8, 4K, 1M (progress lines, gdaki bench's sizes).
std::string size_text(uint64_t bytes);

// The library version the benchmarks were built with (the JSON "version").
const char* version();

// --- options --------------------------------------------------------------------------

enum class output_format { table, json, csv };

// Options every benchmark has. runs is absent from `gdaki bench` (one measurement per
// size, as perftest), present in every bench/ program.
struct common_options {
  uint32_t runs = 3;
  bool json = false;
  bool csv = false;
  std::string output;  // -o FILE: the JSON/CSV go there, the table still to stdout
  int progress = -1;   // -1: auto (runs longer than ~3 s), 0: off, 1: from the start

  output_format format() const { return json ? output_format::json : csv ? output_format::csv : output_format::table; }
  // The table goes to stdout unless JSON or CSV take stdout's place.
  bool table_to_stdout() const { return format() == output_format::table || !output.empty(); }
};

struct option_set {
  bool runs = true;  // --runs (gdaki bench has none)
};

// Registers --runs (1..1000), --json, --csv (exclusive with --json), -o/--output,
// --progress and --no-progress (exclusive with each other) on `app`, writing into `o`.
// Defaults already in `o` (a program's own --runs default) show in --help.
void add_common_options(CLI::App& app, common_options& o, option_set which = {});

// --- result model ---------------------------------------------------------------------

// One named value: a key column (integer, text), a single measurement (number) or a
// figure over repeated runs (stats: median, min, max in `unit`).
struct cell {
  enum class type { integer, text, number, stats };
  std::string name;  // JSON key and CSV column (stats: name_median, name_min, name_max)
  type t = type::integer;
  uint64_t i = 0;
  std::string s;
  double d = 0;
  benchfw::stats st;
  int precision = 3;  // digits after the point in the table and CSV
  std::string unit;   // table heading suffix; stats carry it into the JSON too
};

cell integer(std::string name, uint64_t v);
cell text(std::string name, std::string v);
cell number(std::string name, double v, int precision = 3, std::string unit = {});
cell figure(std::string name, std::string unit, const stats& s, int precision = 3);

using row = std::vector<cell>;

struct run {
  std::string test;         // what ran: gdaki bench's test name, a bench program's name
  std::string title;        // heading
  std::string kind;         // "bandwidth", "latency" (gdaki bench), "figures" (median/min/max rows)
  std::vector<cell> attrs;  // further run-level fields (gdaki bench: inline_size)
  std::vector<row> rows;
};

struct report {
  std::string command;      // "bench" for gdaki bench, else the bench/ program's name
  std::string title;        // the table's first line (bench/ programs)
  std::vector<cell> config; // what the runs were made with: scalars only
  std::vector<std::pair<std::string, std::string>> units;
  std::vector<run> runs;
};

// --- renderers ------------------------------------------------------------------------

// The host the run was made on: hostname, cpus, load_average (a shared machine's figures
// are only as good as its load).
nlohmann::json host_json();

// One JSON object (docs/bench-schema.json), pretty-printed, ending in a newline.
std::string to_json(const report& r);

// CSV: "test" then `columns`, or (empty) the union of every row's columns in order of
// first appearance. A row without a column leaves its field empty.
std::string to_csv(const report& r, const std::vector<std::string>& columns = {});

// The generic table of bench/ programs: a heading line per column (name and unit; figures
// as "median (min-max)"), then one line per row. Split so rows print as they finish.
std::string table_header(const report& r, const row& first);
std::string table_row(const row& first, const row& x);

// Writes the JSON or CSV text to stdout, or to o.output. Returns 0, or 1 when the file
// cannot be written (with a message on stderr naming `program`).
int emit(const common_options& o, const std::string& program, const std::string& text);

// --- progress -------------------------------------------------------------------------

// A progress line on stderr: silent for the first few seconds (short runs stay clean),
// then once a second "[prefix] N s: what (done/total noun done)", rewritten in place on a
// terminal, one line every 5 s otherwise.
class progress {
 public:
  // mode: -1 auto (after quiet_s seconds), 0 never, 1 from the start.
  progress(std::string prefix, int mode, uint64_t total_steps, std::string noun = "steps", double quiet_s = 3.0);
  ~progress();  // clears the line
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  // What runs now (e.g. "write_bw 64K"); step_done() after each step.
  void set(const std::string& what);
  void step_done();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::string prefix_, noun_, what_;
  uint64_t done_ = 0, total_ = 0;
  bool stop_ = false, printed_ = false, tty_ = false;
  double quiet_s_;
  std::thread ticker_;
};

// --- the bench/ programs' driver ------------------------------------------------------

// Collects a bench/ program's report and renders it: the table row by row as rows arrive
// (stdout), the JSON or CSV at finish(). Also owns the progress line.
class writer {
 public:
  writer(const common_options& o, std::string program, std::string title, std::vector<cell> config,
         std::vector<std::pair<std::string, std::string>> units = {});
  // Progress over `total_steps` measurements; step(what) names the next one.
  void expect_steps(uint64_t total_steps);
  void step(const std::string& what);
  // A new run (the table prints its header at its first row).
  void begin_run(std::string test, std::string title);
  void add_row(row r);
  // Stops the progress line, emits JSON/CSV; returns the exit status (0, or 1 when -o
  // could not be written).
  int finish();
  const report& result() const { return rep_; }

 private:
  const common_options& o_;
  report rep_;
  std::unique_ptr<progress> prog_;
  bool stepped_ = false;
};

}  // namespace gdaki::benchfw
