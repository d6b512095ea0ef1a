// DMA-queue copy bandwidth (dev::dma_memcpy on a verbs::dma_queue, soft NIC) next to
// memcpy of the same bytes, measured in the same invocation with the rounds interleaved
// (memcpy, DMA executed on the ringing thread, DMA executed by the engine thread, then the
// next round), so load on the machine hits all three alike. Each figure: median, min and
// max over --runs rounds of --mib-per-run MiB, copied in --sizes chunks that walk through
// 64 MiB source and destination regions (larger than the caches, as a GPU's or NIC's DMA
// would see memory). The destination is checked after every DMA run.
// Usage: dma_bw [--runs N] [--mib-per-run M] [--sizes B,...] [--depth D] [--json|--csv]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_framework.hpp"
#include "gdaki/device/dma.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/dma_queue.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"

namespace {

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;
namespace fw = gdaki::benchfw;
using clk = fw::clock;

constexpr size_t region_bytes = size_t{64} << 20;

struct aligned_free {
  void operator()(uint8_t* p) const { std::free(p); }
};
using region = std::unique_ptr<uint8_t, aligned_free>;

region make_region(uint8_t fill) {
  region r(static_cast<uint8_t*>(std::aligned_alloc(4096, region_bytes)));
  std::memset(r.get(), fill, region_bytes);  // touch every page before timing
  return r;
}

// GB/s (10^9 bytes per second) of `total` bytes memcpy'd in `size` chunks.
double memcpy_run(uint8_t* dst, const uint8_t* src, size_t size, size_t total) {
  const auto t0 = clk::now();
  for (size_t done = 0, off = 0; done < total; done += size, off = (off + size) % (region_bytes - size + 1)) {
    std::memcpy(dst + off, src + off, size);
  }
  return static_cast<double>(total) / fw::seconds_since(t0) / 1e9;
}

// GB/s of `total` bytes copied through the DMA queue in `size` chunks, every copy
// signalled (the poster waits for ring space from CQEs as a kernel would), then one wait
// for the last ticket. Returns a negative value when a copy failed or misplaced bytes.
double dma_run(dev::qp_handle& q, uint8_t* dst, uint32_t dst_key, const uint8_t* src, uint32_t src_key, size_t size,
               size_t total) {
  const auto s = reinterpret_cast<uint64_t>(src), d = reinterpret_cast<uint64_t>(dst);
  uint64_t ticket = 0;
  size_t last_off = 0;
  const auto t0 = clk::now();
  for (size_t done = 0, off = 0; done < total; done += size, off = (off + size) % (region_bytes - size + 1)) {
    if (dev::dma_memcpy(q, d + off, dst_key, s + off, src_key, size, &ticket) != gdaki::status::ok) return -1;
    last_off = off;
  }
  if (dev::dma_wait(q, ticket) != gdaki::status::ok) return -1;
  const double gbps = static_cast<double>(total) / fw::seconds_since(t0) / 1e9;
  if (std::memcmp(dst + last_off, src + last_off, size) != 0) return -2;
  return gbps;
}

struct figure {
  std::vector<double> memcpy_gbps, dma_ringer_gbps, dma_engine_gbps;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DMA-queue copy bandwidth against memcpy (soft NIC)"};
  fw::common_options o;
  o.runs = 7;
  fw::add_common_options(app, o);
  std::vector<size_t> sizes = {4096, 64 * 1024, 1u << 20, 16u << 20};
  size_t mib_per_run = 256;
  uint32_t depth = 64;
  app.add_option("--sizes", sizes, "Copy sizes in bytes")->delimiter(',')->capture_default_str();
  app.add_option("--mib-per-run", mib_per_run, "MiB copied per run and size")->check(CLI::Range(1, 65536));
  app.add_option("--depth", depth, "DMA queue depth (copies in flight)")->check(CLI::Range(2u, 32768u));
  CLI11_PARSE(app, argc, argv);
  for (size_t b : sizes) {
    if (b == 0 || b > region_bytes) {
      std::fprintf(stderr, "dma_bw: --sizes: %zu bytes is outside 1 .. %zu\n", b, region_bytes);
      return 2;
    }
  }
  const size_t total = mib_per_run << 20;

  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd(d);
  region src = make_region(0x5a), dst = make_region(0);
  verbs::mr src_mr(pd, src.get(), region_bytes, verbs::access::local_write);
  verbs::mr dst_mr(pd, dst.get(), region_bytes, verbs::access::local_write | verbs::access::remote_write);
  for (size_t i = 0; i < region_bytes; i += 4096) src.get()[i] = static_cast<uint8_t>(i >> 12);
  // Two queues: one whose copies run on the thread that rings (the soft NIC's model of a
  // CPU initiator), one whose copies the engine thread runs (what a GPU initiator gets).
  verbs::dma_queue_init ringer_init, engine_init;
  ringer_init.depth = engine_init.depth = depth;
  engine_init.export_options.host_hook = false;
  verbs::dma_queue ringer(d, pd, ringer_init), engine(d, pd, engine_init);

  fw::writer w(o, "dma_bw", "DMA-queue copy bandwidth against memcpy (soft NIC), rounds interleaved",
               {fw::integer("mib_per_run", mib_per_run), fw::integer("depth", depth)},
               {{"bw", "GB/s (1e9 bytes per second)"}});
  w.expect_steps(o.runs);
  std::vector<figure> figs(sizes.size());
  for (uint32_t r = 0; r < o.runs; ++r) {
    w.step("round " + std::to_string(r + 1));
    for (size_t si = 0; si < sizes.size(); ++si) {
      const size_t b = sizes[si];
      figs[si].memcpy_gbps.push_back(memcpy_run(dst.get(), src.get(), b, total));
      for (auto* q : {&ringer, &engine}) {
        std::memset(dst.get(), 0, region_bytes);
        const double g = dma_run(q->handle(), dst.get(), dst_mr.rkey(), src.get(), src_mr.lkey(), b, total);
        if (g < 0) {
          std::fprintf(stderr, "dma_bw: %s copies of %zu bytes %s (syndrome 0x%02x)\n",
                       q == &ringer ? "ringer" : "engine", b, g == -1 ? "failed" : "misplaced bytes",
                       static_cast<unsigned>(dev::dma_last_error(q->handle()).syndrome));
          return 1;
        }
        (q == &ringer ? figs[si].dma_ringer_gbps : figs[si].dma_engine_gbps).push_back(g);
      }
    }
  }
  for (size_t si = 0; si < sizes.size(); ++si) {
    const fw::stats m = fw::summarize(figs[si].memcpy_gbps);
    const fw::stats rr = fw::summarize(figs[si].dma_ringer_gbps);
    const fw::stats e = fw::summarize(figs[si].dma_engine_gbps);
    w.add_row({fw::integer("bytes", sizes[si]), fw::figure("memcpy", "GB/s", m, 2), fw::figure("dma_ringer", "GB/s", rr, 2),
               fw::number("ringer_ratio", rr.median / m.median, 2), fw::figure("dma_engine", "GB/s", e, 2),
               fw::number("engine_ratio", e.median / m.median, 2)});
  }
  return w.finish();
}
