// Rendering of `gdaki bench` results (bench_report.hpp).
#include "bench_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <thread>

#include <nlohmann/json.hpp>

namespace gdaki::tool::bench {
namespace {

const char* rule =
    "---------------------------------------------------------------------------------------------------------\n";

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size()))) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
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

}  // namespace

void fill_latency(std::vector<double>& s, row* r) {
  std::sort(s.begin(), s.end());
  if (s.empty()) return;
  r->t_min = s.front();
  r->t_max = s.back();
  r->t_typical = s[s.size() / 2];  // perftest's t_typical is the median
  r->t_avg = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  double var = 0;
  for (double v : s) var += (v - r->t_avg) * (v - r->t_avg);
  r->t_stdev = std::sqrt(var / static_cast<double>(s.size()));
  r->t_99 = percentile(s, 0.99);
  r->t_999 = percentile(s, 0.999);
}

std::string table_header(const run_context& ctx, test_kind kind) {
  const options& o = *ctx.opt;
  const test_info& t = info(kind);
  char b[1024];
  std::string s = rule;
  std::snprintf(b, sizeof b, "                    %s\n", t.title);
  s += b;
  std::snprintf(b, sizeof b,
                " Provider: %s   Device: %s   Wire: %s   Mode: %s\n"
                " QPs: %u   Initiators: %u block(s) x %u thread(s), %s scope   Inline: <= %u B   CQ moderation: %u"
                "   TX depth: %u\n",
                o.provider.c_str(), ctx.device.c_str(), o.wire.c_str(), ctx.mode.c_str(), t.latency ? 1 : o.qps,
                t.latency ? 1 : o.blocks, t.latency ? 1 : o.threads, to_string(t.latency ? scope_kind::thread : o.scope),
                ctx.inline_size, o.cq_mod, o.tx_depth);
  s += b;
  s += rule;
  if (t.latency) {
    std::snprintf(b, sizeof b, " %-10s %-12s %-12s %-12s %-16s %-12s %-12s %-14s %-14s\n", "#bytes", "#iterations",
                  "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99%[usec]",
                  "99.9%[usec]");
  } else {
    std::snprintf(b, sizeof b, " %-10s %-12s %-20s %-16s\n", "#bytes", "#iterations", "BW average[MB/sec]",
                  "MsgRate[Mpps]");
  }
  return s + b;
}

std::string table_row(test_kind kind, const row& r) {
  char b[512];
  if (info(kind).latency) {
    std::snprintf(b, sizeof b, " %-10llu %-12llu %-12.2f %-12.2f %-16.2f %-12.2f %-12.2f %-14.2f %-14.2f\n",
                  static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.iterations), r.t_min,
                  r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.t_99, r.t_999);
  } else {
    std::snprintf(b, sizeof b, " %-10llu %-12llu %-20.2f %-16.6f\n", static_cast<unsigned long long>(r.bytes),
                  static_cast<unsigned long long>(r.iterations), r.bw_avg_mbps, r.msg_rate_mpps);
  }
  return b;
}

std::string table_footer() { return rule; }

std::string to_json(const run_context& ctx, const std::vector<run>& runs) {
  const options& o = *ctx.opt;
  nlohmann::json j;
  j["tool"] = "gdaki";
  j["command"] = "bench";
  j["version"] = GDAKI_VERSION;
  j["host"] = host_json();
  j["config"] = {{"provider", o.provider}, {"device", ctx.device},   {"wire", o.wire},
                 {"mode", ctx.mode},       {"qps", o.qps},           {"blocks", o.blocks},
                 {"threads", o.threads},   {"scope", to_string(o.scope)}, {"inline_size", o.inline_set ? nlohmann::json(o.inline_size) : nlohmann::json("default")},
                 {"cq_mod", o.cq_mod},     {"tx_depth", o.tx_depth}};
  j["units"] = {{"bw", "MB/s (2^20 bytes per second)"}, {"msg_rate", "Mpps"}, {"time", "usec"}};
  j["runs"] = nlohmann::json::array();
  for (const run& r : runs) {
    const test_info& t = info(r.kind);
    nlohmann::json jr = {{"test", t.name},
                         {"title", t.title},
                         {"kind", t.latency ? "latency" : "bandwidth"},
                         {"inline_size", r.inline_size}};
    jr["results"] = nlohmann::json::array();
    for (const row& x : r.rows) {
      nlohmann::json e = {{"bytes", x.bytes}, {"iterations", x.iterations}, {"messages", x.messages}};
      if (t.latency) {
        e.update({{"t_min_us", x.t_min},
                  {"t_max_us", x.t_max},
                  {"t_typical_us", x.t_typical},
                  {"t_avg_us", x.t_avg},
                  {"t_stdev_us", x.t_stdev},
                  {"t_99_us", x.t_99},
                  {"t_999_us", x.t_999}});
      } else {
        e.update({{"seconds", x.seconds}, {"bw_avg_mbps", x.bw_avg_mbps}, {"msg_rate_mpps", x.msg_rate_mpps}});
      }
      jr["results"].push_back(e);
    }
    j["runs"].push_back(jr);
  }
  return j.dump(2) + "\n";
}

std::string to_csv(const std::vector<run>& runs) {
  std::string s = "test,bytes,iterations,bw_avg_mbps,msg_rate_mpps,t_min_us,t_typical_us,t_avg_us,t_99_us,t_max_us\n";
  char b[512];
  for (const run& r : runs) {
    const test_info& t = info(r.kind);
    for (const row& x : r.rows) {
      if (t.latency) {
        std::snprintf(b, sizeof b, "%s,%llu,%llu,,,%.3f,%.3f,%.3f,%.3f,%.3f\n", t.name,
                      static_cast<unsigned long long>(x.bytes), static_cast<unsigned long long>(x.iterations), x.t_min,
                      x.t_typical, x.t_avg, x.t_99, x.t_max);
      } else {
        std::snprintf(b, sizeof b, "%s,%llu,%llu,%.3f,%.6f,,,,,\n", t.name, static_cast<unsigned long long>(x.bytes),
                      static_cast<unsigned long long>(x.iterations), x.bw_avg_mbps, x.msg_rate_mpps);
      }
      s += b;
    }
  }
  return s;
}

}  // namespace gdaki::tool::bench
