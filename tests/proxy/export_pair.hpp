// The exported-QP tests' world: one soft0 QP pair (A exported, the initiator's side; B
// the target's memory) and the end-to-end operation sequence every backend must carry.
// Shared by export_test.cpp and export_gpu_initiator_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gdaki/device/ops.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki_test {

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;
using gdaki::backend_request;

// One soft0 pair: A (exported, the initiator's side) -> B (the target's memory).
struct pair_world {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pd{dev};
  verbs::cq a_scq, a_rcq, b_scq, b_rcq;
  verbs::qp a, b;
  dev::cq_handle a_send{}, a_recv{};
  std::vector<uint8_t> src = std::vector<uint8_t>(4096), dst = std::vector<uint8_t>(4096);
  alignas(8) uint64_t words[4] = {};   // remote: [0] signal, [1] fetch-add target, [2] cas target
  alignas(8) uint64_t results[4] = {};  // local: atomic results, [3] = scratch
  verbs::mr src_mr, dst_mr, words_mr, results_mr;

  pair_world() {
    verbs::cq_init ci;
    ci.depth = 64;
    a_scq = verbs::cq(dev, ci);
    a_rcq = verbs::cq(dev, ci);
    b_scq = verbs::cq(dev, ci);
    b_rcq = verbs::cq(dev, ci);
    verbs::qp_init qi;
    qi.send_cq = &a_scq;
    qi.recv_cq = &a_rcq;
    qi.sq_wqebbs = 64;
    qi.max_inline = 64;
    a = verbs::qp(pd, qi);
    qi.send_cq = &b_scq;
    qi.recv_cq = &b_rcq;
    b = verbs::qp(pd, qi);
    verbs::connect_rc(a, b.qpn(), verbs::access::all);
    verbs::connect_rc(b, a.qpn(), verbs::access::all);
    a_send = a_scq.export_handle();
    a_recv = a_rcq.export_handle();
    src_mr = verbs::mr(pd, src.data(), src.size(), verbs::access::local_write);
    dst_mr = verbs::mr(pd, dst.data(), dst.size(), verbs::access::all);
    words_mr = verbs::mr(pd, words, sizeof(words), verbs::access::all);
    results_mr = verbs::mr(pd, results, sizeof(results), verbs::access::local_write);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  gdaki::export_options options(backend_request req, bool own_thread) {
    gdaki::export_options o;
    o.backend = req;
    o.own_thread = own_thread;
    o.log2_ring_slots = 6;
    o.scratch_addr = reinterpret_cast<uint64_t>(&results[3]);
    o.scratch_lkey = results_mr.lkey();
    return o;
  }
  dev::remote_ptr remote(const void* p, const verbs::mr& m) { return {reinterpret_cast<uint64_t>(p), m.rkey()}; }
  dev::local_ptr local(const void* p, const verbs::mr& m) { return {reinterpret_cast<uint64_t>(p), m.lkey()}; }
};

// Waits for ticket t, driving the export's service when the test owns it.
inline gdaki::status settle(gdaki::exported_qp& x, uint64_t t) {
  for (uint64_t spins = 0; spins < 200000000; ++spins) {
    x.progress();
    const gdaki::status s = dev::test(x.handle(), t);
    if (s != gdaki::status::again) return s;
  }
  return gdaki::status::timeout;
}

// put, p, signal add, fetch-add, then get and compare-swap through x's handle (which the
// test's CPU thread can reach), each result checked against what the target holds.
inline void check_every_operation(pair_world& w, gdaki::exported_qp& x) {
  dev::qp_handle& h = x.handle();
  uint64_t t = 0;
  ASSERT_EQ(dev::put(h, w.remote(w.dst.data(), w.dst_mr), w.local(w.src.data(), w.src_mr), 3000, &t), gdaki::status::ok);
  const uint64_t value = 0x1122334455667788ull;
  ASSERT_EQ(dev::p(h, w.remote(w.dst.data() + 3000, w.dst_mr), &value, 8, &t), gdaki::status::ok);
  ASSERT_EQ(dev::signal(h, w.remote(&w.words[0], w.words_mr), dev::signal_op::add, 5, &t), gdaki::status::ok);
  ASSERT_EQ(dev::atomic_fetch_add(h, w.remote(&w.words[1], w.words_mr), 9, w.local(&w.results[0], w.results_mr), &t),
            gdaki::status::ok);
  ASSERT_EQ(settle(x, t), gdaki::status::ok);
  EXPECT_EQ(std::memcmp(w.dst.data(), w.src.data(), 3000), 0);
  uint64_t landed = 0;
  std::memcpy(&landed, w.dst.data() + 3000, 8);
  EXPECT_EQ(landed, value);
  EXPECT_EQ(w.words[0], 5u);
  EXPECT_EQ(w.words[1], 9u);
  EXPECT_EQ(w.results[0], 0u);

  // Read back what the target holds, and a compare-and-swap that must succeed.
  std::vector<uint8_t> back(3008);
  verbs::mr back_mr(w.pd, back.data(), back.size(), verbs::access::local_write);
  w.words[2] = 41;
  ASSERT_EQ(dev::get(h, w.local(back.data(), back_mr), w.remote(w.dst.data(), w.dst_mr), 3008, &t), gdaki::status::ok);
  ASSERT_EQ(dev::atomic_compare_swap(h, w.remote(&w.words[2], w.words_mr), 41, 42, w.local(&w.results[1], w.results_mr), &t),
            gdaki::status::ok);
  ASSERT_EQ(settle(x, t), gdaki::status::ok);
  EXPECT_EQ(std::memcmp(back.data(), w.dst.data(), 3008), 0);
  EXPECT_EQ(w.results[1], 41u);
  EXPECT_EQ(w.words[2], 42u);
}

}  // namespace gdaki_test
