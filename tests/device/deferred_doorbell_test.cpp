// Deferred doorbells: posts with op_flags::defer write and mark their WQEs ready but ring
// nothing, so the NIC (the soft NIC acts on the doorbell record) runs none of them until a
// doorbell: submit(), a later post without the flag, quiet(), or a post that finds the
// ring full and rings for the WQEs it waits on. Proxy builds: descriptors go out at once
// (defer has no doorbell to save there), so only the "everything lands" half applies.
#include <chrono>
#include <thread>

#include "device/device_fixture.hpp"

using namespace device_test;
using gdaki::status;
namespace d = gdaki::dev;

namespace {

constexpr uint64_t bound = 5'000'000'000ull;  // 5 s: never reached when things work
constexpr bool doorbells_deferred = backend != test_backend::proxy;

struct env {
  world w;
  reg_buffer src, dst;
  qp_handle* qp = nullptr;
  qp_handle* nic = nullptr;
  explicit env(pair_options o = {}, size_t bytes = 1 << 16) {
    w.make_pairs(1, o);
    qp = &w.handles[0];
    nic = &w.nic(0);
    src = reg_buffer(w.pda, bytes, verbs::access::local_write);
    dst = reg_buffer(w.pdb, bytes, verbs::access::all);
  }
  uint32_t dbr() const { return gdaki::prm::from_be(nic->dbrec->snd); }
};

// Bytes of dst that differ from 0 in [0, bytes): what the NIC has written so far.
uint64_t written(const env& e, uint64_t bytes) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < bytes; ++i) n += e.dst.data()[i] != 0 ? 1u : 0u;
  return n;
}

// Fills src with pattern(thread, op, .) per slot, thread-major, as deferred_put_kernel reads it.
void fill_slots(const env& e, uint32_t threads, uint32_t ops, uint32_t slot) {
  for (uint32_t t = 0; t < threads; ++t) {
    for (uint32_t op = 0; op < ops; ++op) fill(e.src.buf.addr() + (uint64_t{t} * ops + op) * slot, t, op, slot);
  }
}
uint64_t slot_mismatches(const env& e, uint32_t threads, uint32_t ops, uint32_t slot) {
  uint64_t bad = 0;
  for (uint32_t t = 0; t < threads; ++t) {
    for (uint32_t op = 0; op < ops; ++op) bad += mismatches(e.dst.buf.addr() + (uint64_t{t} * ops + op) * slot, t, op, slot);
  }
  return bad;
}

TEST(device_deferred, deferred_puts_ring_no_doorbell_until_submit_then_all_land) {
  env e;
  fill_slots(e, 1, 8, 256);
  uint64_t t = 0;
  for (uint32_t op = 0; op < 8; ++op) {
    const uint32_t flags = d::op_flags::defer | (op == 7 ? d::op_flags::none : d::op_flags::unsignaled);
    ASSERT_EQ(d::put(*e.qp, e.dst.remote(256ull * op), e.src.local(256ull * op), 256, &t, flags, bound), status::ok);
  }
  if (doorbells_deferred) {
    EXPECT_EQ(e.nic->sq_ready, 8u) << "the WQEs are marked ready";
    EXPECT_EQ(e.nic->sq_rung, 0u) << "and nothing was rung";
    EXPECT_EQ(e.dbr(), 0u) << "the doorbell record still says no WQE";
    // Give an engine that wrongly acted on unrung WQEs the time to do so.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(written(e, 8 * 256), 0u) << "the NIC ran deferred WQEs before any doorbell";
    EXPECT_EQ(d::test(*e.qp, t), status::again);
  }
  d::submit(*e.qp);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(slot_mismatches(e, 1, 8, 256), 0u);
  if (doorbells_deferred) {
    EXPECT_EQ(e.nic->sq_rung, 8u);
    EXPECT_EQ(e.dbr(), 8u) << "one doorbell record update covered all eight";
  }
  d::submit(*e.qp);  // nothing ready: rings nothing, changes nothing
  if (doorbells_deferred) {
    EXPECT_EQ(e.nic->sq_rung, 8u);
  }
}

// Posts n deferred, unsignalled puts of `slot` bytes each, slot by slot; *t: the last ticket.
void post_deferred(const env& e, uint32_t n, uint32_t slot, uint64_t* t) {
  for (uint32_t op = 0; op < n; ++op) {
    ASSERT_EQ(d::put(*e.qp, e.dst.remote(uint64_t{slot} * op), e.src.local(uint64_t{slot} * op), slot, t,
                     d::op_flags::defer | d::op_flags::unsignaled, bound),
              status::ok);
  }
}

TEST(device_deferred, a_post_without_defer_rings_for_the_deferred_ones_before_it) {
  env e;
  fill_slots(e, 1, 4, 128);
  uint64_t t = 0;
  post_deferred(e, 3, 128, &t);
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(3 * 128), e.src.local(3 * 128), 128, &t, d::op_flags::none, bound), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(slot_mismatches(e, 1, 4, 128), 0u);
}

TEST(device_deferred, quiet_rings_deferred_puts_and_waits_for_them) {
  env e;
  fill_slots(e, 1, 5, 64);
  uint64_t t = 0;
  post_deferred(e, 5, 64, &t);
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(slot_mismatches(e, 1, 5, 64), 0u);
  EXPECT_EQ(d::test(*e.qp, t), status::ok);
}

// A 16-WQEBB ring and 64 deferred puts: the 17th post waits for WQEs nobody rang, so it
// rings them itself. (Before it did, the post waited out its 5 s bound: timeout.)
TEST(device_deferred, deferred_posts_past_a_full_ring_ring_for_the_wqes_they_wait_on) {
  pair_options o;
  o.sq_wqebbs = 16;
  env e(o);
  constexpr uint32_t ops = 64, slot = 64;
  fill_slots(e, 1, ops, slot);
  std::vector<uint64_t> out(1, 99);
  const deferred_args a{e.qp, e.dst.remote(), e.src.local(), ops, slot, false, out.data()};
  d::host::launch(1, 1, [&] { deferred_put_kernel<d::scope_thread, sharing::exclusive>(a); });
  EXPECT_EQ(st(out[0]), status::ok) << "a post waited for room that only a doorbell could free";
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(slot_mismatches(e, 1, ops, slot), 0u);
}

// Sixteen threads defer on one shared QP and none submits: nothing runs until one
// submit from another thread, which publishes every thread's WQEs.
TEST(device_deferred, deferred_posts_of_many_threads_on_a_shared_qp_leave_with_one_submit) {
  pair_options o;
  o.sq_wqebbs = 256;  // room for all 128 puts: no post finds the ring full
  env e(o);
  constexpr uint32_t threads = 16, ops = 8, slot = 64;
  fill_slots(e, threads, ops, slot);
  std::vector<uint64_t> out(threads, 99);
  const deferred_args a{e.qp, e.dst.remote(), e.src.local(), ops, slot, false, out.data()};
  d::host::launch(2, threads / 2, [&] { deferred_put_kernel<d::scope_thread, sharing::grid>(a); });
  for (uint32_t t = 0; t < threads; ++t) EXPECT_EQ(st(out[t]), status::ok) << "thread " << t;
  if (doorbells_deferred) {
    EXPECT_EQ(e.nic->sq_ready, threads * ops);
    EXPECT_EQ(e.nic->sq_rung, 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(written(e, uint64_t{threads} * ops * slot), 0u) << "the NIC ran deferred WQEs before any doorbell";
  }
  d::submit(*e.qp);
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(slot_mismatches(e, threads, ops, slot), 0u);
}

// Warp and block scope: every lane defers its puts, the group submits once.
template <typename Scope, sharing S>
void group_defers_and_submits(uint32_t threads, uint32_t sq_wqebbs, const char* what) {
  constexpr uint32_t ops = 4, slot = 32;
  pair_options o;
  o.sq_wqebbs = sq_wqebbs;  // room for every put: only the group's submit rings
  env e(o);
  fill_slots(e, threads, ops, slot);
  std::vector<uint64_t> out(threads, 99);
  const deferred_args a{e.qp, e.dst.remote(), e.src.local(), ops, slot, true, out.data()};
  d::host::launch(1, threads, [&] { deferred_put_kernel<Scope, S>(a); });
  for (uint32_t t = 0; t < threads; ++t) EXPECT_EQ(st(out[t]), status::ok) << what << ", thread " << t;
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(slot_mismatches(e, threads, ops, slot), 0u) << what;
}

TEST(device_deferred, warp_and_block_calls_defer_and_submit_as_a_group) {
  group_defers_and_submits<d::scope_warp, sharing::grid>(32, 256, "warp scope");
  group_defers_and_submits<d::scope_block, sharing::block>(64, 512, "block scope");
}

}  // namespace
