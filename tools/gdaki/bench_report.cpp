// Rendering of `gdaki bench` results (bench_report.hpp).
#include "bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace gdaki::tool::bench {
namespace {

const char* rule =
    "---------------------------------------------------------------------------------------------------------\n";

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size()))) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
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
                "   Post list: %u   TX depth: %u\n",
                o.provider.c_str(), ctx.device.c_str(), o.wire.c_str(), ctx.mode.c_str(), t.latency ? 1 : o.qps,
                t.latency ? 1 : o.blocks, t.latency ? 1 : o.threads, to_string(t.latency ? scope_kind::thread : o.scope),
                ctx.inline_size, o.cq_mod, t.latency ? 1 : o.post_list, o.tx_depth);
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

benchfw::report to_report(const run_context& ctx, const std::vector<run>& runs) {
  const options& o = *ctx.opt;
  benchfw::report rep;
  rep.command = "bench";
  rep.config = {benchfw::text("provider", o.provider),
                benchfw::text("device", ctx.device),
                benchfw::text("wire", o.wire),
                benchfw::text("mode", ctx.mode),
                benchfw::integer("qps", o.qps),
                benchfw::integer("blocks", o.blocks),
                benchfw::integer("threads", o.threads),
                benchfw::text("scope", to_string(o.scope)),
                o.inline_set ? benchfw::integer("inline_size", o.inline_size) : benchfw::text("inline_size", "default"),
                benchfw::integer("cq_mod", o.cq_mod),
                benchfw::integer("post_list", o.post_list),
                benchfw::integer("tx_depth", o.tx_depth)};
  rep.units = {{"bw", "MB/s (2^20 bytes per second)"}, {"msg_rate", "Mpps"}, {"time", "usec"}};
  for (const run& r : runs) {
    const test_info& t = info(r.kind);
    benchfw::run fr{t.name, t.title, t.latency ? "latency" : "bandwidth", {benchfw::integer("inline_size", r.inline_size)}, {}};
    for (const row& x : r.rows) {
      benchfw::row w = {benchfw::integer("bytes", x.bytes), benchfw::integer("iterations", x.iterations),
                        benchfw::integer("messages", x.messages)};
      if (t.latency) {
        const std::pair<const char*, double> times[] = {
            {"t_min_us", x.t_min}, {"t_max_us", x.t_max}, {"t_typical_us", x.t_typical}, {"t_avg_us", x.t_avg},
            {"t_stdev_us", x.t_stdev}, {"t_99_us", x.t_99}, {"t_999_us", x.t_999}};
        for (const auto& [name, v] : times) w.push_back(benchfw::number(name, v, 3));
      } else {
        w.push_back(benchfw::number("seconds", x.seconds, 6));
        w.push_back(benchfw::number("bw_avg_mbps", x.bw_avg_mbps, 3));
        w.push_back(benchfw::number("msg_rate_mpps", x.msg_rate_mpps, 6));
      }
      fr.rows.push_back(std::move(w));
    }
    rep.runs.push_back(std::move(fr));
  }
  return rep;
}

std::string render(const run_context& ctx, const std::vector<run>& runs) {
  const benchfw::report rep = to_report(ctx, runs);
  if (ctx.opt->json) return benchfw::to_json(rep);
  // The columns bench/plot.py reads, both kinds in one table (the other kind's left empty).
  return benchfw::to_csv(rep, {"bytes", "iterations", "bw_avg_mbps", "msg_rate_mpps", "t_min_us", "t_typical_us",
                               "t_avg_us", "t_99_us", "t_max_us"});
}

}  // namespace gdaki::tool::bench
