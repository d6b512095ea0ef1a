// `gdaki bench [TEST...]`: perftest-style benchmarks of the data path. Loopback mode (the
// default) connects QP pairs in this process; --server / -c HOST run the two ends in two
// processes or on two hosts (bench_rendezvous.hpp). Output: a perftest-style table, or
// --json (docs/bench-schema.json) / --csv (bench/plot.py).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_loopback.hpp"
#include "bench_options.hpp"
#include "bench_rendezvous.hpp"
#include "bench_report.hpp"
#include "commands.hpp"
#include "gdaki/error.hpp"

namespace gdaki::tool::bench {
namespace {

struct cli_state {
  options opt;
  std::string size;
  std::string sizes;
  bool all_sizes = false;
  double accept_timeout_s = 120;
};

// Sizes for one test: the fixed 8 bytes of atomics, else what the command line asked for,
// else --quick's four sizes, else perftest's default (64 KiB for bandwidth, 2 B latency).
std::vector<uint64_t> sizes_for(const cli_state& c, const test_info& t) {
  if (t.fixed_size) return {8};
  std::vector<uint64_t> out;
  std::string why;
  if (c.all_sizes) {
    parse_sizes("all", &out, &why);
  } else if (!c.sizes.empty()) {
    parse_sizes(c.sizes, &out, &why);  // validated at parse time
  } else if (!c.size.empty()) {
    parse_sizes(c.size, &out, &why);
  } else if (c.opt.quick) {
    out = {8, 4096, 65536, 1u << 20};
  } else {
    out = {t.latency ? uint64_t{2} : uint64_t{65536}};
  }
  return out;
}

int fail(int code, const std::string& msg) {
  std::fprintf(stderr, "gdaki bench: %s\n", msg.c_str());
  return code;
}

std::string random_token_hex() {
  std::random_device rd;  // the wire's bind check compares it: unpredictable, not secret
  std::string t;
  static const char* d = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) t += d[rd() & 15];
  return t;
}

int emit(const options& o, const run_context& ctx, const std::vector<run>& runs);

// Server/client mode. The client runs the test and prints the results; the server holds
// the target QPs and buffers and plays the passive side (the pong of latency tests, the
// receiver of send_bw). Protocol, one JSON line per step over the rendezvous socket:
//   hello (both ways: test, sizes, initiator layout, wire) -> wire check on each side ->
//   client info + token -> server info -> per size {size, iters, warmup} / ready / done
//   -> end.
int run_remote(cli_state& c, const std::vector<test_kind>& kinds) {
  options& o = c.opt;
  if (!o.server && kinds.size() != 1) return fail(exit_usage, "server/client mode runs one test at a time");
  std::string why;
  nlohmann::json hello = {{"gdaki_bench", 1}, {"role", o.server ? "server" : "client"}, {"wire", o.wire}};
  if (!o.server) {
    const test_info& t = info(kinds.front());
    hello.update({{"test", t.name},        {"sizes", sizes_for(c, t)}, {"qps", o.qps},
                  {"blocks", o.blocks},    {"threads", o.threads},     {"scope", static_cast<int>(o.scope)},
                  {"inline_size", o.inline_size}, {"inline_set", o.inline_set}, {"cq_mod", o.cq_mod},
                  {"post_list", o.post_list}, {"tx_depth", o.tx_depth}});
  }
  nlohmann::json theirs;
  oob_socket peer;
  if (o.server) {
    oob_socket l = listen_on(o.port, &why);
    if (!l) return fail(exit_failure, why);
    std::fprintf(stderr, "gdaki bench: waiting for a client on port %u\n", o.port);
    // Refuses connections that do not speak the protocol and keeps waiting (accept_client).
    peer = accept_client(l, c.accept_timeout_s, hello, &theirs, &why);
    if (!peer) return fail(exit_failure, why);
  } else {
    peer = connect_to(o.server_host, o.port, o.connect_timeout_s, &why);
    if (!peer) return fail(exit_failure, why);
    if (!exchange(peer, hello, &theirs, c.accept_timeout_s, &why)) return fail(exit_failure, why);
  }
  const double step_timeout_s = 600;  // one size of a slow run on a loaded machine
  if (theirs.value("wire", "") != o.wire) {
    return fail(exit_usage, "the peer uses wire '" + theirs.value("wire", "") + "', this side '" + o.wire + "'");
  }
  if (!wire_available(o.wire, &why)) return fail(exit_failure, why);

  try {
    if (o.server) {
      // The server follows the client's test and initiator layout, as perftest's does.
      const auto kind = find_test(theirs.value("test", ""));
      if (!kind) return fail(exit_usage, "the client asked for an unknown test");
      o.qps = theirs.at("qps");
      o.blocks = theirs.at("blocks");
      o.threads = theirs.at("threads");
      o.scope = static_cast<scope_kind>(theirs.at("scope").get<int>());
      o.inline_size = theirs.at("inline_size");
      o.inline_set = theirs.at("inline_set");
      o.cq_mod = theirs.at("cq_mod");
      o.post_list = theirs.value("post_list", 1u);
      o.tx_depth = theirs.at("tx_depth");
      const auto sizes = theirs.at("sizes").get<std::vector<uint64_t>>();
      loopback ep(o, *kind, *std::max_element(sizes.begin(), sizes.end()), endpoint_role::server);
      nlohmann::json m;
      if (!recv_json(peer, &m, step_timeout_s, &why)) return fail(exit_failure, why);
      ep.connect_remote(m.at("info"), m.at("token"));
      if (!send_json(peer, {{"gdaki_bench", 1}, {"info", ep.local_info()}}, &why)) return fail(exit_failure, why);
      uint64_t served = 0;
      while (recv_json(peer, &m, step_timeout_s, &why) && m.contains("size")) {
        const uint64_t bytes = m["size"], iters = m["iters"], warm = m["warmup"];
        ep.prepare_size(bytes);
        if (!send_json(peer, {{"gdaki_bench", 1}, {"ready", 1}}, &why)) return fail(exit_failure, why);
        ep.serve_size(bytes, iters, warm, static_cast<uint64_t>(o.blocks) * o.threads);
        if (!recv_json(peer, &m, step_timeout_s, &why) || !send_json(peer, {{"gdaki_bench", 1}, {"done", 1}}, &why)) {
          return fail(exit_failure, why);
        }
        ++served;
      }
      if (!m.contains("end")) return fail(exit_failure, why);
      std::fprintf(stderr, "gdaki bench: served %s, %llu size(s)\n", info(*kind).name,
                   static_cast<unsigned long long>(served));
      return exit_ok;
    }

    const test_kind k = kinds.front();
    const test_info& t = info(k);
    const std::vector<uint64_t> sizes = sizes_for(c, t);
    loopback ep(o, k, *std::max_element(sizes.begin(), sizes.end()), endpoint_role::client);
    const std::string token = random_token_hex();
    nlohmann::json m;
    if (!exchange(peer, {{"gdaki_bench", 1}, {"info", ep.local_info()}, {"token", token}}, &m, step_timeout_s, &why)) {
      return fail(exit_failure, why);
    }
    ep.connect_remote(m.at("info"), token);
    const run_context ctx{"client (cross-process, wire " + o.wire + ")", ep.device_name(), &o, ep.inline_size()};
    const bool table = o.format() == benchfw::output_format::table;
    const bool table_to_stdout = o.table_to_stdout();
    if (table_to_stdout) std::printf("%s", table_header(ctx, k).c_str());
    run r{k, {}, ep.inline_size()};
    {
      benchfw::progress prog("gdaki bench", o.progress, sizes.size(), "sizes");
      for (uint64_t bytes : sizes) {
        prog.set(std::string(t.name) + " " + benchfw::size_text(bytes));
        const uint64_t iters = o.iterations ? o.iterations : default_iterations(o, k, bytes);
        const uint64_t warm = o.warmup ? o.warmup : std::clamp<uint64_t>(iters / 10, 1, 1000);
        ep.prepare_size(bytes);
        if (!exchange(peer, {{"gdaki_bench", 1}, {"size", bytes}, {"iters", iters}, {"warmup", warm}}, &m,
                      step_timeout_s, &why)) {
          return fail(exit_failure, why);
        }
        r.rows.push_back(ep.run_size(bytes, iters, warm));
        if (!exchange(peer, {{"gdaki_bench", 1}, {"done", 1}}, &m, step_timeout_s, &why)) return fail(exit_failure, why);
        if (table_to_stdout) {
          std::printf("%s", table_row(k, r.rows.back()).c_str());
          std::fflush(stdout);
        }
        prog.step_done();
      }
    }
    send_json(peer, {{"gdaki_bench", 1}, {"end", 1}}, &why);
    if (table_to_stdout) std::printf("%s", table_footer().c_str());
    if (table) return exit_ok;
    return emit(o, ctx, {r});
  } catch (const std::invalid_argument& e) {
    return fail(exit_usage, e.what());
  }
}

// Writes the JSON or CSV rendering to stdout or -o FILE.
int emit(const options& o, const run_context& ctx, const std::vector<run>& runs) {
  return benchfw::emit(o, "gdaki bench", render(ctx, runs)) == 0 ? exit_ok : exit_failure;
}

int run_bench(cli_state& c) {
  options& o = c.opt;
  if (o.server && !o.server_host.empty()) return fail(exit_usage, "--server and -c HOST exclude each other");
  if (o.qps == 0 || o.threads == 0 || o.blocks == 0) return fail(exit_usage, "-q, --threads and --blocks must be >= 1");
  if (o.threads > 1024) return fail(exit_usage, "--threads is at most 1024 (a CUDA block's limit)");

  std::vector<test_kind> kinds;
  std::vector<std::string> names = o.test_names;
  if (names.empty()) names = o.quick ? std::vector<std::string>{"write_lat", "write_bw"} : std::vector<std::string>{"write_bw"};
  for (const std::string& n : names) {
    if (n == "all") {
      for (const test_info& t : tests()) kinds.push_back(t.kind);
    } else {
      kinds.push_back(*find_test(n));  // validated at parse time
    }
  }

  if (o.server || !o.server_host.empty()) {
    if (o.wire == "inproc") o.wire = "tcp";  // two processes cannot share the in-process wire
    return run_remote(c, kinds);
  }
  if (o.wire != "inproc") {
    return fail(exit_usage, "--wire " + o.wire + " carries data between two processes: use it with --server / -c HOST");
  }

  uint64_t steps = 0;
  for (test_kind k : kinds) steps += sizes_for(c, info(k)).size();
  std::vector<run> runs;
  const bool table = o.format() == benchfw::output_format::table;
  // With -o, the machine-readable output goes to the file and the table still to stdout.
  const bool table_to_stdout = o.table_to_stdout();
  std::string device;
  {
    benchfw::progress prog("gdaki bench", o.progress, steps, "sizes");
    for (test_kind k : kinds) {
      const test_info& t = info(k);
      const std::vector<uint64_t> sizes = sizes_for(c, t);
      const uint64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
      std::unique_ptr<loopback> lb;
      try {
        lb = std::make_unique<loopback>(o, k, max_bytes);
      } catch (const std::invalid_argument& e) {
        return fail(exit_usage, e.what());
      }
      device = lb->device_name();
      const run_context ctx{"loopback (in-process)", device, &o, lb->inline_size()};
      if (table_to_stdout) std::printf("%s", table_header(ctx, k).c_str());
      run r{k, {}, lb->inline_size()};
      for (uint64_t bytes : sizes) {
        prog.set(std::string(t.name) + " " + benchfw::size_text(bytes));
        const uint64_t iters = o.iterations ? o.iterations : default_iterations(o, k, bytes);
        const uint64_t warm = o.warmup ? o.warmup : std::clamp<uint64_t>(iters / 10, 1, 1000);
        r.rows.push_back(lb->run_size(bytes, iters, warm));
        if (table_to_stdout) {
          std::printf("%s", table_row(k, r.rows.back()).c_str());
          std::fflush(stdout);
        }
        prog.step_done();
      }
      if (table_to_stdout) std::printf("%s", table_footer().c_str());
      runs.push_back(std::move(r));
    }
  }
  if (table) return exit_ok;
  return emit(o, {"loopback (in-process)", device, &o, o.inline_size}, runs);
}

// CLI11 validator for one size or a size list.
CLI::Validator size_validator(bool list) {
  return CLI::Validator(
      [list](std::string& s) {
        std::vector<uint64_t> v;
        std::string why;
        if (list) {
          if (!parse_sizes(s, &v, &why)) return why;
        } else {
          uint64_t x = 0;
          if (!parse_size(s, &x, &why)) return why;
          if (x < min_size || x > max_single_size) return "size " + s + " is outside 1 B .. 2047 MiB";
        }
        return std::string();
      },
      list ? "SIZES" : "SIZE");
}

}  // namespace
}  // namespace gdaki::tool::bench

namespace gdaki::tool {

command_fn add_bench(CLI::App& app) {
  using namespace bench;
  auto c = std::make_shared<cli_state>();
  options& o = c->opt;
  CLI::App* sub = app.add_subcommand("bench", "perftest-style benchmarks of the data path (loopback or server/client)");
  std::vector<std::string> names = {"all"};
  for (const test_info& t : tests()) names.push_back(t.name);
  sub->add_option("tests", o.test_names, "Tests to run (default write_bw; with --quick write_lat and write_bw)")
      ->check(CLI::IsMember(names));
  sub->add_option("-s,--size", c->size, "Message size: 2, 4K, 64KiB, 1M, 8MiB (1 B .. 2047 MiB)")->check(size_validator(false));
  sub->add_option("--sizes", c->sizes, "Size list or range: 8,4K,1M or 2..8M (powers of two)")->check(size_validator(true));
  sub->add_flag("-a,--all", c->all_sizes, "Every power of two from 2 B to 8 MiB");
  sub->add_option("-n,--iters", o.iterations, "Iterations per initiator thread (bw) or round trips (lat); "
                                               "default 5000 / 1000, fewer for large sizes");
  sub->add_option("--warmup", o.warmup, "Untimed iterations first (default iterations/10)");
  sub->add_option("-q,--qps", o.qps, "QP pairs (bandwidth tests)")->capture_default_str();
  sub->add_option("--blocks", o.blocks, "Initiator blocks (host grid launcher)")->capture_default_str();
  sub->add_option("--threads", o.threads, "Initiator threads per block")->capture_default_str();
  sub->add_option("--scope", o.scope, "Cooperation scope of each post: thread, warp or block")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, scope_kind>{{"thread", scope_kind::thread}, {"warp", scope_kind::warp},
                                            {"block", scope_kind::block}}));
  sub->add_option("-I,--inline-size", o.inline_size, "Post messages up to this size inline (default 0 bw, 64 lat)")
      ->each([&o](const std::string&) { o.inline_set = true; });
  sub->add_option("-Q,--cq-mod", o.cq_mod, "Signal every N-th WQE (bandwidth tests)")->capture_default_str();
  sub->add_option("-l,--post-list", o.post_list,
                  "Ring one doorbell per N operations (bandwidth tests; the others are posted with op_flags::defer)")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  sub->add_option("-t,--tx-depth", o.tx_depth, "SQ depth in WQEBBs")->capture_default_str();
  sub->add_option("--provider", o.provider, "Provider: soft, mlx5")
      ->check(CLI::IsMember({"soft", "mlx5"}))
      ->capture_default_str();
  sub->add_option("-d,--device", o.device, "Device (default: the provider's first)");
  // default_str, not capture_default_str: CLI11 streams a uint8_t as a character, so the
  // help text would carry a NUL byte.
  sub->add_option("-x,--gid-index", o.gid_index, "RoCE: source GID index, as perftest -x (see show_gids)")
      ->default_str(std::to_string(o.gid_index));
  sub->add_option("--wire", o.wire, "Soft NIC wire: inproc (loopback), shm or tcp (across processes)")
      ->check(CLI::IsMember({"inproc", "shm", "tcp"}))
      ->capture_default_str();
  sub->add_option("-c,--client", o.server_host, "Client mode: connect to the server on HOST");
  sub->add_flag("--server", o.server, "Server mode: wait for a client on --port");
  sub->add_option("-p,--port", o.port, "Rendezvous TCP port")->capture_default_str();
  sub->add_option("--connect-timeout", o.connect_timeout_s, "Seconds to reach the server")->capture_default_str();
  sub->add_option("--accept-timeout", c->accept_timeout_s, "Seconds the server waits for a client")->capture_default_str();
  sub->add_flag("--quick", o.quick, "A short run (a few seconds): 8 B, 4 KiB, 64 KiB, 1 MiB; fewer iterations");
  // --json, --csv, -o, --progress, --no-progress: the options every benchmark shares.
  benchfw::add_common_options(*sub, o, {.runs = false});
  sub->footer(
      "Tests: write_bw write_lat read_bw read_lat atomic_rate put_signal_bw send_lat send_bw (or all).\n"
      "Loopback (default): both ends in this process on the soft NIC. Across processes or hosts:\n"
      "  gdaki bench write_bw --server [-p PORT]     and     gdaki bench write_bw -c HOST [-p PORT]\n"
      "MB/sec is 2^20 bytes per second, as perftest and ucx_perftest report it.");
  return [c] { return run_bench(*c); };
}

}  // namespace gdaki::tool
