// Two-sided verbs from the device API (gdaki/device/twosided.hpp) against the soft NIC:
// send, send with immediate and inline send land in the receive the peer posted, and
// recv_wait returns that receive's completion (opcode, byte count, immediate, which
// receive); receives posted and completed by the threads of a grid; payloads of up to 32
// bytes inside the CQE on a scatter-to-CQE QP; and the failures as a ConnectX reports
// them: no receive -> RNR retries then RNR_RETRY_EXC at the sender, the receiver healthy;
// a message longer than the receive -> LOCAL_LENGTH at the receiver and REMOTE_INVAL_REQ
// at the sender; a bad receive lkey -> LOCAL_PROT there and REMOTE_OP here; a bad send
// lkey -> LOCAL_PROT, nothing sent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "device/twosided_kernels.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/device/twosided.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "gdaki/verbs/srq.hpp"
#include "support/patterned_region.hpp"

namespace {

namespace verbs = gdaki::verbs;
namespace prm = gdaki::prm;
namespace dev = gdaki::dev;
using gdaki::status;

constexpr uint64_t bound = 5'000'000'000ull;  // 5 s: never reached when things work

// Every access: the tests send from and receive into the same kind of region.
struct buffer : test_support::patterned_region {
  buffer(const verbs::pd& pd, size_t n, uint8_t seed) : patterned_region(pd, n, verbs::access::all, seed) {}
};

struct side {
  verbs::cq scq, rcq;
  verbs::qp qp;
  std::unique_ptr<dev::cq_handle> hs, hr;
  std::unique_ptr<dev::qp_handle> h;
};

struct options {
  bool scatter_to_cqe = false;  // the receiver's
  uint32_t rq_wqes = 16;
  uint8_t rnr_retry = 3;
};

// A -> B, both in one PD of soft0, both sides exported for CPU threads.
struct env {
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd{d};
  side a, b;
  buffer src{pd, 1 << 16, 0x21}, dst{pd, 1 << 16, 0x9e};
  std::vector<uint8_t> dst_before;

  explicit env(const options& o = {}) {
    make(a, o, false);
    make(b, o, o.scatter_to_cqe);
    verbs::qp_attr at;
    at.min_rnr_timer = 1;  // 10 us per RNR retry
    at.rnr_retry = o.rnr_retry;
    at.timeout = 8;
    at.retry_cnt = 2;
    verbs::connect_rc(a.qp, b.qp.qpn(), verbs::access::all, at);
    verbs::connect_rc(b.qp, a.qp.qpn(), verbs::access::all, at);
    for (side* s : {&a, &b}) {
      s->hs = std::make_unique<dev::cq_handle>(s->scq.export_handle());
      s->hr = std::make_unique<dev::cq_handle>(s->rcq.export_handle());
      s->h = std::make_unique<dev::qp_handle>(s->qp.export_handle(s->hs.get(), s->hr.get()));
    }
    dst_before.assign(dst.data(), dst.data() + dst.bytes);
  }
  void make(side& s, const options& o, bool scatter) {
    verbs::cq_init ci;
    ci.depth = o.rq_wqes > 64 ? o.rq_wqes : 64;  // a CQE per receive can be waiting
    s.scq = verbs::cq(d, ci);
    s.rcq = verbs::cq(d, ci);
    verbs::qp_init qi;
    qi.send_cq = &s.scq;
    qi.recv_cq = &s.rcq;
    qi.sq_wqebbs = 64;
    qi.rq_wqes = o.rq_wqes;
    qi.max_inline = 64;
    qi.scatter_to_cqe = scatter;
    s.qp = verbs::qp(pd, qi);
  }
  // The receive CQE at free-running position pos of B.
  const prm::cqe64& b_cqe(uint64_t pos) const { return b.hr->cqes[pos & (dev::cqe_count(*b.hr) - 1)]; }
  // dst holds src[src_off, +n) at dst_off and its original bytes everywhere else.
  ::testing::AssertionResult received_exactly(uint64_t dst_off, uint64_t src_off, uint64_t n) const {
    for (size_t i = 0; i < dst.bytes; ++i) {
      const bool in = i >= dst_off && i < dst_off + n;
      const uint8_t want = in ? src.data()[src_off + i - dst_off] : dst_before[i];
      if (dst.data()[i] != want) {
        return ::testing::AssertionFailure() << "byte " << i << (in ? " (received)" : " (outside)") << " is "
                                             << int(dst.data()[i]) << ", want " << int(want);
      }
    }
    return ::testing::AssertionSuccess();
  }
};

TEST(device_twosided, send_lands_in_the_posted_receive_and_recv_wait_reports_it) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(64), 256), status::ok);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(3), 100, &t), status::ok);
  EXPECT_EQ(t, 1u) << "a SEND with one pointer segment is one WQEBB";
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_send);
  EXPECT_EQ(c.syndrome, prm::syndrome::none);
  EXPECT_EQ(c.byte_cnt, 100u);
  EXPECT_FALSE(c.has_imm);
  EXPECT_EQ(c.index, 0u);
  EXPECT_EQ(c.src_qpn, e.a.qp.qpn());
  EXPECT_FALSE(c.payload_in_cqe) << "scatter-to-CQE is off by default";
  EXPECT_TRUE(e.received_exactly(64, 3, 100));
  EXPECT_EQ(e.b.h->rq_completed, 1u) << "the receive slot is free again";
  EXPECT_EQ(dev::recv_poll(*e.b.h, &c), status::again) << "one message, one completion";
}

TEST(device_twosided, send_with_immediate_hands_the_immediate_bytes_over_unchanged) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 4096), status::ok);
  uint64_t t = 0;
  const uint32_t imm = 0xa1b2c3d4u;
  ASSERT_EQ(dev::send_imm(*e.a.h, e.src.at(), 4000, imm, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_send_imm);
  EXPECT_TRUE(c.has_imm);
  EXPECT_EQ(c.imm_raw, imm) << "the immediate is raw wire bytes both ways";
  EXPECT_EQ(e.b_cqe(0).imm_inval_pkey, imm) << "CQE bytes 36..39 carry it unswapped";
  EXPECT_EQ(c.byte_cnt, 4000u);
  EXPECT_TRUE(e.received_exactly(0, 0, 4000));
}

TEST(device_twosided, inline_send_copies_the_payload_into_the_wqe) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::ok);
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(100), 64), status::ok);
  uint8_t v[40];
  for (int i = 0; i < 40; ++i) v[i] = static_cast<uint8_t>(0x40 + i);
  uint64_t t = 0;
  ASSERT_EQ(dev::send_inline(*e.a.h, v, 40, false, 0, &t), status::ok);
  EXPECT_EQ(t, 1u) << "ctrl + 44 inline bytes = 4 units, one WQEBB";
  std::memset(v, 0xee, sizeof v);  // the WQE already holds the bytes
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  uint8_t w[12] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12};
  ASSERT_EQ(dev::send_inline(*e.a.h, w, 12, true, 0x01020304u, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_send);
  EXPECT_EQ(c.byte_cnt, 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(e.dst.data()[i], 0x40 + i) << i;
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_send_imm);
  EXPECT_EQ(c.imm_raw, 0x01020304u);
  EXPECT_EQ(c.index, 1u);
  EXPECT_EQ(std::memcmp(e.dst.data() + 100, w, 12), 0);
}

TEST(device_twosided, an_empty_send_consumes_one_receive_with_byte_count_zero) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 0), status::ok) << "a zero-capacity receive";
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 0, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_send);
  EXPECT_EQ(c.byte_cnt, 0u);
  EXPECT_TRUE(e.received_exactly(0, 0, 0));
}

TEST(device_twosided, messages_take_the_receives_in_posting_order) {
  env e;
  const uint32_t sizes[] = {1, 17, 64, 200, 1000, 4096, 5, 333};
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(i * 4096), 4096), status::ok);
  uint64_t t = 0;
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(dev::send_imm(*e.a.h, e.src.at(i * 7), sizes[i], i, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  for (uint32_t i = 0; i < 8; ++i) {
    dev::recv_completion c{};
    ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok) << i;
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.imm_raw, i);
    EXPECT_EQ(c.byte_cnt, sizes[i]);
    EXPECT_EQ(std::memcmp(e.dst.data() + i * 4096, e.src.data() + i * 7, sizes[i]), 0) << i;
  }
}

TEST(device_twosided, recv_post_into_a_full_receive_queue_returns_again) {
  options o;
  o.rq_wqes = 4;
  env e(o);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(i * 64), 64), status::ok);
  EXPECT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::again);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 8, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::ok) << "a completed receive frees its slot";
}

// 2 blocks x 48 threads each post one receive into their own slot, concurrently; then the
// sender sends 96 tagged messages; then every thread takes one completion. Every receive
// completes once, each slot holds exactly one message, and the tags are a permutation.
TEST(device_twosided, threads_of_a_grid_post_receives_and_each_takes_one_completion) {
  options o;
  o.rq_wqes = 128;
  env e(o);
  constexpr uint32_t blocks = 2, threads = 48, n = blocks * threads, slot = 64;
  std::vector<uint64_t> log(4 * n, ~0ull);
  device_test::recv_grid_args args{e.b.h.get(), e.dst.at().addr, e.dst.mr.lkey(), slot, log.data()};
  dev::host::launch(blocks, threads, [&] { device_test::post_receives_kernel(args); });
  for (uint32_t t = 0; t < n; ++t) ASSERT_EQ(static_cast<status>(log[4 * t]), status::ok) << t;
  for (uint32_t m = 0; m < n; ++m) {
    auto* msg = reinterpret_cast<uint32_t*>(e.src.data() + m * slot);
    msg[0] = 0x7a000000u | m;  // the tag
    uint64_t t = 0;
    ASSERT_EQ(dev::send(*e.a.h, e.src.at(m * slot), 4 + m % 60, &t), status::ok);
    ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok) << m;
  }
  dev::host::launch(blocks, threads, [&] { device_test::wait_receives_kernel(args, bound); });
  std::set<uint64_t> indices;
  std::set<uint32_t> tags;
  for (uint32_t t = 0; t < n; ++t) {
    EXPECT_EQ(static_cast<status>(log[4 * t + 1]), status::ok) << t;
    EXPECT_EQ(log[4 * t + 3], 4 + log[4 * t + 2] % 60) << "message i went to the i-th receive posted";
    indices.insert(log[4 * t + 2]);
    uint32_t tag = 0;
    std::memcpy(&tag, e.dst.data() + t * slot, 4);
    EXPECT_EQ(tag >> 24, 0x7au) << "slot " << t << " holds a message";
    tags.insert(tag & 0xffffff);
  }
  EXPECT_EQ(indices.size(), n) << "every receive completed once";
  EXPECT_EQ(*indices.rbegin(), n - 1);
  EXPECT_EQ(tags.size(), n) << "every message landed in exactly one slot";
  dev::recv_completion c{};
  EXPECT_EQ(dev::recv_poll(*e.b.h, &c), status::again);
}

// 256 threads post 16 receives each into a 4,096-deep RQ, so reservations collide: a
// poster whose compare-and-swap on the reservation counter loses must look again from the
// winner's end. (Before the fix it retried its stale index forever: the first collision
// hung the grid, seen under qemu-aarch64 in CI and on a GPU it would be every launch.)
// Every post succeeds, and the RQ holds each slot's receive exactly once, in ring order.
TEST(device_twosided, threads_racing_for_receive_slots_each_get_their_own) {
  options o;
  o.rq_wqes = 4096;
  env e(o);
  constexpr uint32_t blocks = 4, threads = 64, per_thread = 16, n = blocks * threads * per_thread, slot = 16;
  static_assert(n * slot <= 1 << 16, "the slots fit in dst");
  std::vector<uint64_t> log(4 * blocks * threads, ~0ull);
  device_test::recv_grid_args args{e.b.h.get(), e.dst.at().addr, e.dst.mr.lkey(), slot, log.data()};
  dev::host::launch(blocks, threads, [&] { device_test::post_many_receives_kernel(args, per_thread); });
  for (uint32_t t = 0; t < blocks * threads; ++t) ASSERT_EQ(static_cast<status>(log[4 * t]), status::ok) << t;
  EXPECT_EQ(e.b.h->rq_ready, n);
  EXPECT_EQ(prm::from_be(e.b.h->dbrec->rcv), n & 0xffff) << "the doorbell record counts every receive";
  std::set<uint64_t> addrs;
  for (uint32_t i = 0; i < n; ++i) {
    const auto* seg = reinterpret_cast<const prm::data_seg*>(e.b.h->rq_buf + (uint64_t{i} << e.b.h->log_rq_stride));
    EXPECT_EQ(prm::from_be(seg->byte_count), slot) << i;
    addrs.insert(prm::from_be(seg->addr));
  }
  EXPECT_EQ(addrs.size(), n) << "no slot posted twice, none lost";
  EXPECT_EQ(*addrs.begin(), e.dst.at().addr);
  EXPECT_EQ(*addrs.rbegin(), e.dst.at().addr + uint64_t{n - 1} * slot);
}

// A warp's lanes send at warp scope (one reservation, one doorbell), one lane skipping.
TEST(device_twosided, warp_scope_sends_post_every_lane_but_the_skipping_one) {
  options o;
  o.rq_wqes = 64;
  env e(o);
  for (uint32_t i = 0; i < 32; ++i) ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(i * 128), 128), status::ok);
  std::vector<uint64_t> log(64, ~0ull);
  dev::host::launch(1, 32, [&] { device_test::warp_send_kernel(e.a.h.get(), e.src.at().addr, e.src.mr.lkey(), 100, 5, log.data()); });
  std::set<uint32_t> lanes;
  for (uint32_t i = 0; i < 31; ++i) {
    dev::recv_completion c{};
    ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok) << i;
    EXPECT_EQ(c.byte_cnt, 100u);
    lanes.insert(c.imm_raw);
    EXPECT_EQ(std::memcmp(e.dst.data() + c.index * 128, e.src.data() + c.imm_raw * 100, 100), 0) << "lane " << c.imm_raw;
  }
  for (uint32_t l = 0; l < 32; ++l) {
    EXPECT_EQ(static_cast<status>(log[2 * l]), status::ok) << l;
    EXPECT_EQ(static_cast<status>(log[2 * l + 1]), status::ok) << l;
  }
  EXPECT_EQ(lanes.size(), 31u);
  EXPECT_EQ(lanes.count(5), 0u) << "the skipping lane sent nothing";
  dev::recv_completion c{};
  EXPECT_EQ(dev::recv_poll(*e.b.h, &c), status::again);
}

// ---- scatter-to-CQE ----------------------------------------------------------------

TEST(device_twosided, with_scatter_to_cqe_up_to_32_bytes_arrive_in_the_cqe_and_recv_copies_them_out) {
  options o;
  o.scatter_to_cqe = true;
  env e(o);
  const uint32_t sizes[] = {1, 20, 24, 25, 32, 33};
  for (uint32_t i = 0; i < 6; ++i) ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(i * 64), 64), status::ok);
  uint64_t t = 0;
  for (uint32_t i = 0; i < 6; ++i) ASSERT_EQ(dev::send(*e.a.h, e.src.at(i * 40), sizes[i], &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  for (uint32_t i = 0; i < 6; ++i) {
    SCOPED_TRACE(sizes[i]);
    const bool in_cqe = sizes[i] <= 32;
    // Before the poll: the CQE is the NIC's alone. Format 1 (op_own 0x04) and the payload
    // from byte 0 exactly when the message is 32 bytes or less; the buffer untouched then.
    const prm::cqe64& raw = e.b_cqe(i);
    EXPECT_EQ(raw.op_own & prm::cqe_format_mask, in_cqe ? prm::cqe_inline_scatter_32 : 0);
    EXPECT_EQ(prm::from_be(raw.byte_cnt), sizes[i]);
    if (in_cqe) {
      EXPECT_EQ(std::memcmp(&raw, e.src.data() + i * 40, sizes[i]), 0) << "payload at CQE byte 0";
      EXPECT_EQ(std::memcmp(e.dst.data() + i * 64, e.dst_before.data() + i * 64, 64), 0)
          << "the NIC does not write the buffer";
    }
    dev::recv_completion c{};
    ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
    EXPECT_EQ(c.payload_in_cqe, in_cqe);
    EXPECT_EQ(c.byte_cnt, sizes[i]);
    if (in_cqe) {
      EXPECT_EQ(std::memcmp(c.payload, e.src.data() + i * 40, sizes[i]), 0) << "handed back";
    }
    if (sizes[i] <= 24) {
      EXPECT_EQ(c.src_qpn, e.a.qp.qpn()) << "flags_rqpn is intact below 25 bytes";
    }
    EXPECT_EQ(std::memcmp(e.dst.data() + i * 64, e.src.data() + i * 40, sizes[i]), 0) << "and in the buffer";
    EXPECT_EQ(e.dst.data()[i * 64 + sizes[i]], e.dst_before[i * 64 + sizes[i]]) << "nothing after it";
  }
}

TEST(device_twosided, with_scatter_to_cqe_a_payload_spanning_two_receive_segments_is_copied_into_both) {
  options o;
  o.scatter_to_cqe = true;
  env e(o);
  const dev::sge two[2] = {{e.dst.at(0).addr, 10, e.dst.mr.lkey()}, {e.dst.at(1000).addr, 30, e.dst.mr.lkey()}};
  ASSERT_EQ(dev::rq_post(*e.b.h, two, 2), status::ok);
  uint64_t t = 0;
  ASSERT_EQ(dev::send_imm(*e.a.h, e.src.at(), 28, 0x55667788u, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_TRUE(c.payload_in_cqe);
  EXPECT_EQ(c.imm_raw, 0x55667788u);
  EXPECT_EQ(std::memcmp(e.dst.data(), e.src.data(), 10), 0);
  EXPECT_EQ(std::memcmp(e.dst.data() + 1000, e.src.data() + 10, 18), 0);
  EXPECT_EQ(e.dst.data()[1018], e.dst_before[1018]);
}

TEST(device_twosided, without_scatter_to_cqe_a_small_payload_lands_in_the_buffer_only) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::ok);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 20, &t), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  EXPECT_EQ(e.b_cqe(0).op_own & prm::cqe_format_mask, 0);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_FALSE(c.payload_in_cqe);
  EXPECT_TRUE(e.received_exactly(0, 0, 20));
}

// ---- errors -----------------------------------------------------------------------

TEST(device_twosided, no_receive_posted_is_rnr_retry_exceeded_at_the_sender_and_the_receiver_stays_healthy) {
  env e;  // rnr_retry 3, min_rnr_timer 10 us
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 64, &t), status::ok);
  EXPECT_EQ(dev::wait(*e.a.h, t, bound), status::io_error);
  EXPECT_EQ(dev::last_error(*e.a.h).syndrome, prm::syndrome::rnr_retry_exc);
  EXPECT_EQ(dev::last_error(*e.a.h).wqe_index, 0u);
  const auto& err = reinterpret_cast<const prm::err_cqe&>(e.a.hs->cqes[0]);
  EXPECT_EQ(prm::from_be(err.s_wqe_opcode_qpn), (uint32_t{0x0a} << 24) | e.a.qp.qpn()) << "the failing WQE is the SEND";
  EXPECT_EQ(e.b.qp.state(), verbs::qp_state::rts) << "RNR leaves the receiver healthy";
  EXPECT_EQ(e.a.qp.state(), verbs::qp_state::err);
  dev::recv_completion c{};
  EXPECT_EQ(dev::recv_poll(*e.b.h, &c), status::again) << "nothing was received";
  EXPECT_TRUE(e.received_exactly(0, 0, 0));
}

TEST(device_twosided, a_receive_posted_during_rnr_backoff_completes_the_send) {
  options o;
  o.rnr_retry = 7;  // retry forever
  env e(o);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 64, &t), status::ok);
  EXPECT_EQ(dev::wait(*e.a.h, t, 20'000'000), status::timeout) << "still retrying after 20 ms";
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::ok);
  ASSERT_EQ(dev::wait(*e.a.h, t, bound), status::ok);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::ok);
  EXPECT_TRUE(e.received_exactly(0, 0, 64));
}

TEST(device_twosided, a_message_longer_than_the_receive_is_local_length_there_and_remote_invalid_request_here) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::ok);
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(64), 64), status::ok);  // flushed once B is in ERR
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 65, &t), status::ok);
  EXPECT_EQ(dev::wait(*e.a.h, t, bound), status::io_error);
  EXPECT_EQ(dev::last_error(*e.a.h).syndrome, prm::syndrome::remote_inval_req);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::io_error);
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_err);
  EXPECT_EQ(c.syndrome, prm::syndrome::local_length);
  EXPECT_EQ(c.index, 0u);
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::io_error);
  EXPECT_EQ(c.syndrome, prm::syndrome::wr_flush) << "the receive behind it is flushed";
  EXPECT_EQ(c.index, 1u);
  EXPECT_TRUE(e.received_exactly(0, 0, 0)) << "nothing landed";
  EXPECT_EQ(e.b.qp.state(), verbs::qp_state::err);
}

TEST(device_twosided, a_message_longer_than_the_receive_is_refused_on_a_scatter_to_cqe_qp_too) {
  options o;
  o.scatter_to_cqe = true;
  env e(o);
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 16), status::ok);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 20, &t), status::ok);
  EXPECT_EQ(dev::wait(*e.a.h, t, bound), status::io_error);
  EXPECT_EQ(dev::last_error(*e.a.h).syndrome, prm::syndrome::remote_inval_req);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::io_error);
  EXPECT_EQ(c.syndrome, prm::syndrome::local_length);
  EXPECT_FALSE(c.payload_in_cqe);
  EXPECT_TRUE(e.received_exactly(0, 0, 0));
}

TEST(device_twosided, a_receive_with_a_bad_lkey_is_local_protection_there_and_remote_operation_error_here) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(0, 0x100), 64), status::ok);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(), 64, &t), status::ok);
  EXPECT_EQ(dev::wait(*e.a.h, t, bound), status::io_error);
  EXPECT_EQ(dev::last_error(*e.a.h).syndrome, prm::syndrome::remote_op);
  dev::recv_completion c{};
  ASSERT_EQ(dev::recv_wait(*e.b.h, &c, bound), status::io_error);
  EXPECT_EQ(c.syndrome, prm::syndrome::local_prot);
  EXPECT_TRUE(e.received_exactly(0, 0, 0));
}

TEST(device_twosided, a_send_with_a_bad_lkey_is_local_protection_and_sends_nothing) {
  env e;
  ASSERT_EQ(dev::recv_post(*e.b.h, e.dst.at(), 64), status::ok);
  uint64_t t = 0;
  ASSERT_EQ(dev::send(*e.a.h, e.src.at(0, 0x100), 64, &t), status::ok);
  EXPECT_EQ(dev::wait(*e.a.h, t, bound), status::io_error);
  EXPECT_EQ(dev::last_error(*e.a.h).syndrome, prm::syndrome::local_prot);
  dev::recv_completion c{};
  EXPECT_EQ(dev::recv_poll(*e.b.h, &c), status::again) << "the receive was not consumed";
  EXPECT_EQ(e.b.qp.state(), verbs::qp_state::rts);
  EXPECT_TRUE(e.received_exactly(0, 0, 0));
}

TEST(device_twosided, sizes_the_qp_cannot_take_are_invalid_and_post_nothing) {
  env e;
  uint64_t t = 0;
  EXPECT_EQ(dev::send(*e.a.h, e.src.at(), dev::max_message_bytes + 1, &t), status::invalid);
  uint8_t v[128] = {};
  EXPECT_EQ(dev::send_inline(*e.a.h, v, e.a.h->max_inline + 1, false, 0, &t), status::invalid);
  EXPECT_EQ(e.a.h->sq_reserved, 0u);
  dev::qp_handle proxy = *e.a.h;
  proxy.backend = dev::qp_backend::proxy;  // the proxy's descriptors have no SEND
  EXPECT_EQ(dev::send(proxy, e.src.at(), 8, &t), status::not_supported);
  EXPECT_EQ(e.a.h->sq_reserved, 0u);
}

// Senders a[i] -> receivers b[i], both b on one SRQ, all exported for CPU threads.
struct srq_env {
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd{d};
  verbs::srq srq;
  side a[2], b[2];
  buffer src{pd, 1 << 16, 0x33}, dst{pd, 1 << 16, 0x5c};

  explicit srq_env(uint32_t max_wr) {
    verbs::srq_init si;
    si.max_wr = max_wr;
    si.max_sge = 1;
    srq = verbs::srq(pd, si);
    verbs::qp_attr at;
    at.min_rnr_timer = 1;
    at.rnr_retry = 7;
    at.timeout = 8;
    at.retry_cnt = 2;
    for (int i = 0; i < 2; ++i) {
      make(a[i], false);
      make(b[i], true);
      verbs::connect_rc(a[i].qp, b[i].qp.qpn(), verbs::access::all, at);
      verbs::connect_rc(b[i].qp, a[i].qp.qpn(), verbs::access::all, at);
      for (side* s : {&a[i], &b[i]}) {
        s->hs = std::make_unique<dev::cq_handle>(s->scq.export_handle());
        s->hr = std::make_unique<dev::cq_handle>(s->rcq.export_handle());
        verbs::qp_export_options eo;
        eo.srq = srq.host_handle();  // ignored for the senders, which have RQs
        s->h = std::make_unique<dev::qp_handle>(s->qp.export_handle(s->hs.get(), s->hr.get(), eo));
      }
    }
  }
  void make(side& s, bool on_srq) {
    verbs::cq_init ci;
    ci.depth = 256;
    s.scq = verbs::cq(d, ci);
    s.rcq = verbs::cq(d, ci);
    verbs::qp_init qi;
    qi.send_cq = &s.scq;
    qi.recv_cq = &s.rcq;
    qi.sq_wqebbs = 64;
    qi.rq_wqes = 16;
    qi.srq = on_srq ? &srq : nullptr;
    s.qp = verbs::qp(pd, qi);
  }
};

TEST(device_twosided, threads_of_a_grid_post_to_an_srq_and_two_qps_take_its_receives) {
  srq_env e(127);
  constexpr uint32_t blocks = 2, threads = 32, n = blocks * threads, slot = 64;
  std::vector<uint64_t> log(5 * n, ~0ull);
  device_test::srq_grid_args args{e.srq.host_handle(), {e.b[0].h.get(), e.b[1].h.get()}, e.dst.at().addr,
                                  e.dst.mr.lkey(), slot, log.data()};
  dev::host::launch(blocks, threads, [&] { device_test::post_srq_receives_kernel(args); });
  std::vector<int> slot_of(e.srq.caps().wqes, -1);
  for (uint32_t t = 0; t < n; ++t) {
    ASSERT_EQ(static_cast<status>(log[5 * t]), status::ok) << t;
    ASSERT_LT(log[5 * t + 1], e.srq.caps().wqes);
    ASSERT_EQ(slot_of[log[5 * t + 1]], -1) << "two posts took WQE " << log[5 * t + 1];
    slot_of[log[5 * t + 1]] = static_cast<int>(t);
  }
  // n / 2 messages from each sender: message m of sender i is 4 + m % 60 bytes, tagged.
  for (uint32_t m = 0; m < n / 2; ++m) {
    for (uint32_t i = 0; i < 2; ++i) {
      const uint32_t k = 2 * m + i;
      auto* msg = reinterpret_cast<uint32_t*>(e.src.data() + k * slot);
      msg[0] = 0x7a000000u | (i << 16) | m;
      uint64_t t = 0;
      ASSERT_EQ(dev::send(*e.a[i].h, e.src.at(k * slot), 4 + m % 60, &t), status::ok);
      ASSERT_EQ(dev::wait(*e.a[i].h, t, bound), status::ok) << m;
    }
  }
  dev::host::launch(blocks, threads, [&] { device_test::wait_srq_receives_kernel(args, bound); });
  std::set<uint64_t> indices;
  std::set<uint32_t> tags;
  for (uint32_t t = 0; t < n; ++t) {
    ASSERT_EQ(static_cast<status>(log[5 * t + 2]), status::ok) << t;
    const uint64_t idx = log[5 * t + 3];
    ASSERT_LT(idx, slot_of.size());
    ASSERT_GE(slot_of[idx], 0) << "completion names WQE " << idx << ", never posted";
    EXPECT_TRUE(indices.insert(idx).second) << "WQE " << idx << " completed twice";
    uint32_t tag = 0;
    std::memcpy(&tag, e.dst.data() + static_cast<uint32_t>(slot_of[idx]) * slot, 4);
    ASSERT_EQ(tag >> 24, 0x7au) << "the receive's slot holds a message";
    EXPECT_EQ((tag >> 16) & 0xff, t & 1) << "a message of sender " << ((tag >> 16) & 0xff) << " on QP " << (t & 1);
    EXPECT_EQ(log[5 * t + 4], 4 + (tag & 0xffff) % 60) << "the byte count is that message's";
    tags.insert(tag & 0xffffff);
  }
  EXPECT_EQ(indices.size(), n) << "every receive completed once";
  EXPECT_EQ(tags.size(), n) << "every message landed in exactly one receive";
  // Every WQE went back on the free list: the SRQ takes max_wr receives again.
  const dev::srq_handle& h = *e.srq.host_handle();
  EXPECT_EQ(h.freed, n);
  for (uint32_t k = 0; k < e.srq.caps().max_wr; ++k) ASSERT_EQ(dev::recv_post(*e.srq.host_handle(), e.dst.at(), 8), status::ok) << k;
  EXPECT_EQ(dev::recv_post(*e.srq.host_handle(), e.dst.at(), 8), status::again);
  dev::recv_completion c{};
  EXPECT_EQ(dev::recv_poll(*e.b[0].h, &c), status::again);
  EXPECT_EQ(dev::recv_poll(*e.b[1].h, &c), status::again);
}

TEST(device_twosided, a_qp_on_an_srq_takes_no_receive_of_its_own) {
  srq_env e(8);
  EXPECT_EQ(dev::recv_post(*e.b[0].h, e.dst.at(), 64), status::invalid);
  EXPECT_EQ(e.b[0].h->rq_reserved, 0u);
}

}  // namespace
