// The result model's renderings: JSON, CSV and the generic table (bench_framework.hpp).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "bench_framework.hpp"

namespace gdaki::benchfw {
namespace {

nlohmann::json value_json(const cell& c) {
  switch (c.t) {
    case cell::type::integer: return c.i;
    case cell::type::text: return c.s;
    case cell::type::number: return c.d;
    case cell::type::stats: return {{"median", c.st.median}, {"min", c.st.min}, {"max", c.st.max}, {"unit", c.unit}};
  }
  return nullptr;
}

nlohmann::json object_of(const std::vector<cell>& cells) {
  nlohmann::json j = nlohmann::json::object();
  for (const cell& c : cells) j[c.name] = value_json(c);
  return j;
}

std::string fixed(double v, int precision) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

// The CSV columns a cell fills, with their text.
std::vector<std::pair<std::string, std::string>> csv_fields(const cell& c) {
  switch (c.t) {
    case cell::type::integer: return {{c.name, std::to_string(c.i)}};
    case cell::type::text: return {{c.name, c.s}};
    case cell::type::number: return {{c.name, fixed(c.d, c.precision)}};
    case cell::type::stats:
      return {{c.name + "_median", fixed(c.st.median, c.precision)},
              {c.name + "_min", fixed(c.st.min, c.precision)},
              {c.name + "_max", fixed(c.st.max, c.precision)}};
  }
  return {};
}

std::string heading(const cell& c) { return c.unit.empty() ? c.name : c.name + " " + c.unit; }

std::string table_text(const cell& c) {
  switch (c.t) {
    case cell::type::integer: return std::to_string(c.i);
    case cell::type::text: return c.s;
    case cell::type::number: return fixed(c.d, c.precision);
    case cell::type::stats:
      return fixed(c.st.median, c.precision) + " (" + fixed(c.st.min, c.precision) + "-" +
             fixed(c.st.max, c.precision) + ")";
  }
  return {};
}

// Column width: the heading, or room for a typical value of the cell's type.
size_t width(const cell& c) {
  const size_t typical = c.t == cell::type::stats ? 24 : c.t == cell::type::text ? 12 : 10;
  return std::max(heading(c).size(), typical);
}

std::string pad(const std::string& s, size_t w, bool left) {
  if (s.size() >= w) return s;
  return left ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

// A cell's common part; each factory below fills in its value.
cell named(std::string name, cell::type t, int precision = 3, std::string unit = {}) {
  cell c;
  c.name = std::move(name);
  c.t = t;
  c.precision = precision;
  c.unit = std::move(unit);
  return c;
}

}  // namespace

cell integer(std::string name, uint64_t v) {
  cell c = named(std::move(name), cell::type::integer);
  c.i = v;
  return c;
}

cell text(std::string name, std::string v) {
  cell c = named(std::move(name), cell::type::text);
  c.s = std::move(v);
  return c;
}

cell number(std::string name, double v, int precision, std::string unit) {
  cell c = named(std::move(name), cell::type::number, precision, std::move(unit));
  c.d = v;
  return c;
}

cell figure(std::string name, std::string unit, const stats& s, int precision) {
  cell c = named(std::move(name), cell::type::stats, precision, std::move(unit));
  c.st = s;
  return c;
}

nlohmann::json host_json() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  double load[3] = {0, 0, 0};
  const int n = getloadavg(load, 3);
  nlohmann::json h = {{"hostname", name}, {"cpus", std::thread::hardware_concurrency()}};
  // The machines this runs on are often shared: the load says how far to trust a figure.
  h["load_average"] = n == 3 ? nlohmann::json::array({load[0], load[1], load[2]}) : nlohmann::json::array();
  return h;
}

std::string to_json(const report& r) {
  nlohmann::json j;
  j["tool"] = "gdaki";
  j["command"] = r.command;
  j["version"] = version();
  j["host"] = host_json();
  j["config"] = object_of(r.config);
  j["units"] = nlohmann::json::object();
  for (const auto& [k, v] : r.units) j["units"][k] = v;
  j["runs"] = nlohmann::json::array();
  for (const run& x : r.runs) {
    nlohmann::json jr = {{"test", x.test}, {"title", x.title}, {"kind", x.kind}};
    jr.update(object_of(x.attrs));
    jr["results"] = nlohmann::json::array();
    for (const row& w : x.rows) jr["results"].push_back(object_of(w));
    j["runs"].push_back(jr);
  }
  return j.dump(2) + "\n";
}

std::string to_csv(const report& r, const std::vector<std::string>& columns) {
  std::vector<std::string> cols = columns;
  if (cols.empty()) {
    for (const run& x : r.runs) {
      for (const row& w : x.rows) {
        for (const cell& c : w) {
          for (const auto& f : csv_fields(c)) {
            if (std::find(cols.begin(), cols.end(), f.first) == cols.end()) cols.push_back(f.first);
          }
        }
      }
    }
  }
  std::string s = "test";
  for (const std::string& c : cols) s += "," + c;
  s += "\n";
  for (const run& x : r.runs) {
    for (const row& w : x.rows) {
      std::vector<std::pair<std::string, std::string>> fields;
      for (const cell& c : w) {
        for (auto& f : csv_fields(c)) fields.push_back(std::move(f));
      }
      s += x.test;
      for (const std::string& col : cols) {
        s += ",";
        for (const auto& f : fields) {
          if (f.first == col) s += f.second;
        }
      }
      s += "\n";
    }
  }
  return s;
}

std::string table_header(const report& r, const row& first) {
  std::string s = "# " + r.title + "\n#";
  for (const cell& c : r.config) s += " " + c.name + "=" + table_text(c);
  s += "\n";
  std::string names, sub;
  for (size_t k = 0; k < first.size(); ++k) {
    const cell& c = first[k];
    const bool left = c.t == cell::type::text;
    names += (k ? "  " : "") + pad(heading(c), width(c), left);
    sub += (k ? "  " : "") + pad(c.t == cell::type::stats ? "median (min-max)" : "", width(c), left);
  }
  s += names + "\n";
  if (std::any_of(first.begin(), first.end(), [](const cell& c) { return c.t == cell::type::stats; })) {
    while (!sub.empty() && sub.back() == ' ') sub.pop_back();
    s += sub + "\n";
  }
  return s;
}

std::string table_row(const row& first, const row& x) {
  std::string s;
  for (size_t k = 0; k < x.size(); ++k) {
    const cell& c = x[k];
    const size_t w = k < first.size() ? width(first[k]) : width(c);
    s += (k ? "  " : "") + pad(table_text(c), w, c.t == cell::type::text);
  }
  return s + "\n";
}

int emit(const common_options& o, const std::string& program, const std::string& text) {
  if (o.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  std::ofstream f(o.output);
  if (!(f << text)) {
    std::fprintf(stderr, "%s: cannot write %s\n", program.c_str(), o.output.c_str());
    return 1;
  }
  return 0;
}

writer::writer(const common_options& o, std::string program, std::string title, std::vector<cell> config,
               std::vector<std::pair<std::string, std::string>> units)
    : o_(o) {
  rep_.command = std::move(program);
  rep_.title = std::move(title);
  rep_.config = std::move(config);
  rep_.config.push_back(integer("runs", o.runs));
  rep_.units = std::move(units);
}

void writer::expect_steps(uint64_t total_steps) {
  prog_ = std::make_unique<progress>(rep_.command, o_.progress, total_steps, "measurements");
}

void writer::step(const std::string& what) {
  if (!prog_) return;
  if (stepped_) prog_->step_done();
  stepped_ = true;
  prog_->set(what);
}

void writer::begin_run(std::string test, std::string title) {
  rep_.runs.push_back(run{std::move(test), std::move(title), "figures", {}, {}});
}

void writer::add_row(row r) {
  if (rep_.runs.empty()) begin_run(rep_.command, rep_.title);
  std::vector<row>& rows = rep_.runs.back().rows;
  if (o_.table_to_stdout()) {
    const row& first = rows.empty() ? r : rows.front();
    if (rows.empty()) std::printf("%s", table_header(rep_, r).c_str());
    std::printf("%s", table_row(first, r).c_str());
    std::fflush(stdout);
  }
  rows.push_back(std::move(r));
}

int writer::finish() {
  prog_.reset();
  switch (o_.format()) {
    case output_format::table: return 0;
    case output_format::json: return emit(o_, rep_.command, to_json(rep_));
    case output_format::csv: return emit(o_, rep_.command, to_csv(rep_));
  }
  return 0;
}

}  // namespace gdaki::benchfw
