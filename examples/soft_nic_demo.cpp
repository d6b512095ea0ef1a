// gdaki in one file: open the soft NIC, connect two RC QPs, post one WQE of each kind
// through the data path (the same code a GPU thread runs), print the WQEs and CQEs as the
// NIC sees them, then time RDMA WRITE at a few sizes. Exit status 0 on success.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gdaki/device/datapath.hpp"
#include "gdaki/error.hpp"
#include "gdaki/prm/decode.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/qp.hpp"

namespace dev = gdaki::dev;
namespace prm = gdaki::prm;
namespace verbs = gdaki::verbs;

namespace {

struct side {
  verbs::cq scq, rcq;
  verbs::qp qp;
  dev::cq_handle hs{}, hr{};
  dev::qp_handle h{};
};

// Posts one WQE built by `build` at a fresh WQEBB, prints it, waits for its CQE and prints
// that. Returns false when the completion is an error.
template <typename Build>
bool run_one(const char* what, side& s, uint32_t nbb, Build build) {
  uint64_t start = 0;
  if (dev::sq_acquire(s.h, nbb, &start) != gdaki::status::ok) return false;
  build(start);
  const uint64_t ticket = dev::sq_commit(s.h, start, nbb);
  std::printf("== %s\n%s", what, prm::decode_wqe(s.h.sq_buf, dev::sq_wqebbs(s.h), static_cast<uint32_t>(start)).c_str());
  const prm::cqe64* cqe = s.hs.cqes + (s.hs.ci & (dev::cqe_count(s.hs) - 1));
  const gdaki::status st = dev::sq_wait(s.h, ticket, 1'000'000'000);
  std::printf("%s\n", prm::decode_cqe(cqe).c_str());
  return st == gdaki::status::ok;
}

}  // namespace

int main() try {
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd(d);
  side a, b;
  for (side* s : {&a, &b}) {
    verbs::cq_init ci;
    ci.depth = 256;
    s->scq = verbs::cq(d, ci);
    s->rcq = verbs::cq(d, ci);
    verbs::qp_init qi;
    qi.send_cq = &s->scq;
    qi.recv_cq = &s->rcq;
    s->qp = verbs::qp(pd, qi);
  }
  verbs::connect_rc(a.qp, b.qp.qpn(), verbs::access::all);
  verbs::connect_rc(b.qp, a.qp.qpn(), verbs::access::all);
  for (side* s : {&a, &b}) {
    s->hs = s->scq.export_handle();
    s->hr = s->rcq.export_handle();
    s->h = s->qp.export_handle(&s->hs, &s->hr);
  }
  std::vector<uint8_t> src(1 << 20, 0x5a), dst(1 << 20);
  alignas(8) static uint64_t word = 40, result = 0;
  verbs::mr ms(pd, src.data(), src.size(), verbs::access::all), md(pd, dst.data(), dst.size(), verbs::access::all);
  verbs::mr mw(pd, &word, 8, verbs::access::all), mres(pd, &result, 8, verbs::access::all);
  const auto at = [](const void* p) { return reinterpret_cast<uint64_t>(p); };
  const uint8_t sig = prm::ctrl_flags::cq_update;
  const dev::sge g{at(src.data()), 4096, ms.lkey()};
  const dev::sge r{at(dst.data() + 8192), 4096, md.lkey()};
  const dev::sge res{at(&result), 8, mres.lkey()};
  if (dev::rq_post(b.h, &r, 1) != gdaki::status::ok) return 1;

  bool ok = true;
  ok &= run_one("RDMA_WRITE 4 KiB", a, dev::wqebbs_rdma(1),
                [&](uint64_t s) { dev::prepare_write(a.h, s, at(dst.data()), md.rkey(), &g, 1, sig); });
  ok &= run_one("RDMA_WRITE inline", a, dev::wqebbs_write_inline(5),
                [&](uint64_t s) { dev::prepare_write_inline(a.h, s, at(dst.data()), md.rkey(), "hello", 5, sig); });
  ok &= run_one("SEND 4 KiB", a, dev::wqebbs_send(1), [&](uint64_t s) { dev::prepare_send(a.h, s, &g, 1, sig); });
  ok &= run_one("RDMA_READ 4 KiB", a, dev::wqebbs_rdma(1), [&](uint64_t s) {
    const dev::sge l{at(dst.data() + 16384), 4096, md.lkey()};
    dev::prepare_read(a.h, s, at(src.data()), ms.rkey(), &l, 1, sig);
  });
  ok &= run_one("ATOMIC_FA +2", a, 1,
                [&](uint64_t s) { dev::prepare_atomic_fa(a.h, s, at(&word), mw.rkey(), 2, res, sig); });
  ok &= run_one("ATOMIC_CS 42->7", a, 1,
                [&](uint64_t s) { dev::prepare_atomic_cs(a.h, s, at(&word), mw.rkey(), 42, 7, res, sig); });
  dev::completion rc;
  while (dev::rq_poll(b.h, &rc) == gdaki::status::again) {
  }
  std::printf("== responder CQE of the SEND\n%s\n", prm::decode_cqe(b.hr.cqes).c_str());
  ok &= rc.ok() && rc.byte_cnt == 4096 && word == 7 && std::memcmp(dst.data() + 8192, src.data(), 4096) == 0;

  std::printf("\nRDMA_WRITE through the soft NIC (CPU initiator, inline execution):\n");
  std::printf("%10s %12s %12s\n", "bytes", "latency us", "GB/s");
  for (uint32_t size : {8u, 256u, 4096u, 65536u, 1u << 20}) {
    const int iters = size >= 65536 ? 200 : 20000;
    const dev::sge gs{at(src.data()), size, ms.lkey()};
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000 && i < iters; ++i) {  // latency: one signaled WRITE at a time
      uint64_t s = 0;
      dev::sq_acquire(a.h, 1, &s);
      dev::prepare_write(a.h, s, at(dst.data()), md.rkey(), &gs, 1, sig);
      ok &= dev::sq_wait(a.h, dev::sq_commit(a.h, s, 1)) == gdaki::status::ok;
    }
    const double lat = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                       (iters < 1000 ? iters : 1000);
    t0 = std::chrono::steady_clock::now();
    uint64_t ticket = 0;
    for (int i = 0; i < iters; ++i) {  // bandwidth: a stream, every 16th signaled
      uint64_t s = 0;
      dev::sq_acquire(a.h, 1, &s);
      dev::prepare_write(a.h, s, at(dst.data()), md.rkey(), &gs, 1, i % 16 == 15 ? sig : 0);
      ticket = dev::sq_commit(a.h, s, 1);
    }
    ok &= dev::sq_quiet(a.h) == gdaki::status::ok && dev::sq_test(a.h, ticket) == gdaki::status::ok;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%10u %12.3f %12.3f\n", size, lat, static_cast<double>(size) * iters / secs / 1e9);
  }
  std::printf("\n%s\n", ok ? "all completions OK" : "FAILED");
  return ok ? 0 : 1;
} catch (const gdaki::error& e) {
  std::fprintf(stderr, "gdaki_demo: %s\n", e.what());
  return 1;
}
