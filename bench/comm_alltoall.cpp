// All-to-all through the communicator against Open MPI's MPI_Alltoall, in the same run,
// on the same buffers, in the style of nccl-tests: for each size (bytes per peer, 8 B to
// --max-bytes) it prints time, algbw = bytes sent per rank / time and busbw = algbw *
// (n-1)/n, as median / min / max over --runs runs interleaved gdaki, MPI, gdaki, MPI ...
// (each run's figure is the median of its iterations). Every iteration's received data is
// checked (outside the timed part); a mismatch stops the benchmark with exit status 1.
// Run under mpirun:  mpirun --allow-run-as-root --oversubscribe -np 2 ./comm_alltoall
//
// gdaki's iteration: one thread per rank puts its chunk to every peer with signal inc,
// waits until every peer's chunk has signalled, then flushes (sources reusable, as when
// MPI_Alltoall returns). Iterations are separated by MPI_Barrier for both, untimed. The
// chunk to itself is a put like the others; on the soft NIC the communicator does it
// without the loopback QP (comm::options::self_direct), unless --self-through-loopback-qp.
// --breakdown adds, per size, rank 0's median time in each of the three phases (posting
// the puts, waiting for the peers' signals, the flush) over every timed gdaki iteration.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_framework.hpp"
#include "gdaki/comm/device.hpp"
#include "gdaki/comm/mpi.hpp"

namespace comm = gdaki::comm;
namespace fw = gdaki::benchfw;
using clk = fw::clock;
using fw::seconds_since;
using fw::summarize;

namespace {

uint8_t pattern(int from, int to, uint64_t i) { return static_cast<uint8_t>(from * 29 + to * 53 + i * 7 + 3); }

struct setup {
  comm::communicator* c;
  uint8_t* send;
  uint8_t* recv;
  comm::window_t sw, rw;
  int me, n;
  uint64_t round = 0;  // gdaki iterations so far: signal 0 counts n per iteration
  std::vector<double> phase[3];  // --breakdown: put, wait, flush of each gdaki iteration
};

// Stamps the first 8 bytes of each outgoing chunk with (iteration, from, to).
void stamp(setup& s, uint64_t bytes, uint64_t it) {
  for (int p = 0; p < s.n; ++p) {
    const uint64_t v = (it << 16) | (uint64_t(s.me) << 8) | uint64_t(p);
    std::memcpy(s.send + uint64_t(p) * bytes, &v, 8);
  }
}

// Every received chunk: this iteration's stamp, then the sender's pattern.
bool check(const setup& s, uint64_t bytes, uint64_t it) {
  for (int p = 0; p < s.n; ++p) {
    const uint8_t* ch = s.recv + uint64_t(p) * bytes;
    uint64_t v = 0;
    std::memcpy(&v, ch, 8);
    if (v != ((it << 16) | (uint64_t(p) << 8) | uint64_t(s.me))) return false;
    for (uint64_t i = 8; i < bytes; ++i)
      if (ch[i] != pattern(p, s.me, i)) return false;
  }
  return true;
}

double gdaki_iteration(setup& s, uint64_t bytes, uint64_t it) {
  const comm::dev_comm& d = s.c->device();
  stamp(s, bytes, it);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = clk::now();
  for (int k = 0; k < s.n; ++k) {
    const int p = (s.me + k) % s.n;  // start with different peers on every rank
    if (comm::put(d, 0, d.world, p, s.rw, uint64_t(s.me) * bytes, s.sw, uint64_t(p) * bytes, bytes,
                  comm::signal_inc(0)) != gdaki::status::ok)
      return -1;
  }
  const auto t1 = clk::now();
  ++s.round;
  if (comm::wait_signal(d, 0, s.round * uint64_t(s.n), 64, 30'000'000'000ull) != gdaki::status::ok) return -1;
  const auto t2 = clk::now();
  if (comm::flush(d, 0) != gdaki::status::ok) return -1;
  const auto t3 = clk::now();
  const auto sec = [](clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  s.phase[0].push_back(sec(t0, t1));
  s.phase[1].push_back(sec(t1, t2));
  s.phase[2].push_back(sec(t2, t3));
  return sec(t0, t3);
}

double mpi_iteration(setup& s, uint64_t bytes, uint64_t it) {
  stamp(s, bytes, it);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = clk::now();
  if (MPI_Alltoall(s.send, int(bytes), MPI_BYTE, s.recv, int(bytes), MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) return -1;
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    CLI::App app{"All-to-all: gdaki communicator vs MPI_Alltoall (run under mpirun)"};
    fw::common_options o;
    o.runs = 5;
    uint64_t min_bytes = 8, max_bytes = 64ull << 20;
    bool breakdown = false, self_via_qp = false;
    fw::add_common_options(app, o);
    app.add_option("--min-bytes", min_bytes, "Smallest size, bytes per peer")->capture_default_str();
    app.add_option("--max-bytes", max_bytes, "Largest size, bytes per peer")->capture_default_str();
    app.add_flag("--breakdown", breakdown, "Also print gdaki's time per phase: puts, signal wait, flush");
    app.add_flag("--self-through-loopback-qp", self_via_qp,
                 "Each rank's chunk to itself as WQEs on its loopback QP (comm::options::self_direct = false)");
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {  // --help, or a bad option: CLI11's own message
      const int code = app.exit(e);
      MPI_Finalize();
      return code;
    }
    if (min_bytes < 8) min_bytes = 8;

    comm::options copt;
    copt.self_direct = !self_via_qp;
    comm::communicator c = comm::from_mpi(MPI_COMM_WORLD, copt);
    setup s{&c, nullptr, nullptr, 0, 0, c.rank(), c.size(), 0, {}};
    s.sw = c.alloc_window(max_bytes * uint64_t(s.n));
    s.rw = c.alloc_window(max_bytes * uint64_t(s.n));
    s.send = static_cast<uint8_t*>(c.window_base(s.sw));
    s.recv = static_cast<uint8_t*>(c.window_base(s.rw));
    // Rank 0 reports (rows, finish); the other ranks only measure with it.
    fw::writer w(o, "comm_alltoall",
                 "All-to-all: gdaki communicator vs MPI_Alltoall; time = median iteration of a run, runs interleaved",
                 {fw::integer("ranks", uint64_t(s.n)), fw::integer("self_direct", c.device().self_direct)}, {{"time", "usec"}, {"bw", "GB/s (1e9 bytes per second)"}});
    uint64_t it = 0;
    for (uint64_t bytes = min_bytes; bytes <= max_bytes && rc == 0; bytes *= 2) {
      for (int p = 0; p < s.n; ++p)
        for (uint64_t i = 0; i < bytes; ++i) s.send[uint64_t(p) * bytes + i] = pattern(s.me, p, i);
      const int iters = bytes <= (64u << 10) ? 50 : bytes <= (1u << 20) ? 20 : 5;
      std::vector<double> run_g, run_m;
      for (auto& ph : s.phase) ph.clear();
      for (uint32_t r = 0; r < o.runs && rc == 0; ++r) {
        for (int impl = 0; impl < 2 && rc == 0; ++impl) {
          std::vector<double> t;
          for (int k = 0; k <= iters; ++k) {  // iteration 0 warms up, untimed
            ++it;
            const double sec = impl == 0 ? gdaki_iteration(s, bytes, it) : mpi_iteration(s, bytes, it);
            int good = sec >= 0 && check(s, bytes, it), all_good = 0;
            MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            if (!all_good) {
              if (s.me == 0)
                std::fprintf(stderr, "comm_alltoall: %s, %llu bytes/peer, iteration %llu: wrong data or failure %s\n",
                             impl == 0 ? "gdaki" : "MPI", (unsigned long long)bytes, (unsigned long long)it,
                             c.describe_error().c_str());
              rc = 1;
              break;
            }
            if (k > 0) t.push_back(sec);
            if (k == 0 && impl == 0)
              for (auto& ph : s.phase) ph.pop_back();  // the warm-up is not timed
          }
          if (rc == 0) (impl == 0 ? run_g : run_m).push_back(summarize(t).median);
        }
      }
      if (rc != 0 || s.me != 0) continue;
      for (int impl = 0; impl < 2; ++impl) {
        const fw::stats st = summarize(impl == 0 ? run_g : run_m);
        const double total = double(bytes) * s.n;
        const double f = double(s.n - 1) / s.n;
        // algbw = bytes sent per rank / time: the fastest time gives the highest bandwidth.
        const fw::stats alg{total / st.median / 1e9, total / st.max / 1e9, total / st.min / 1e9};
        fw::row row = {fw::integer("bytes_per_peer", bytes), fw::text("impl", impl == 0 ? "gdaki" : "mpi"),
                       fw::figure("time", "us", {st.median * 1e6, st.min * 1e6, st.max * 1e6}, 2),
                       fw::figure("algbw", "GB/s", alg, 3),
                       fw::figure("busbw", "GB/s", {alg.median * f, alg.min * f, alg.max * f}, 3)};
        if (breakdown) {
          const bool mine = impl == 0;  // the phases are gdaki's; MPI's row leaves them at zero
          row.push_back(fw::number("put_us", mine ? summarize(s.phase[0]).median * 1e6 : 0, 2));
          row.push_back(fw::number("wait_us", mine ? summarize(s.phase[1]).median * 1e6 : 0, 2));
          row.push_back(fw::number("flush_us", mine ? summarize(s.phase[2]).median * 1e6 : 0, 2));
        }
        w.add_row(std::move(row));
      }
      std::fflush(stdout);
    }
    if (s.me == 0 && rc == 0) rc = w.finish();
    if (rc == 0) c.finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_alltoall: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
