// The documented behaviour of each DOCA GPUNetIO device call on gdaki, one behaviour per
// test, run on CPU threads against the soft NIC: tickets name the operation's last WQE,
// poll_one_cq_at answers 0 / EBUSY / a negative errno for an error CQE, wait returns only
// after completion, put_signal's signal never lands before its data, and each one-sided
// call's remote effect.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <thread>

#include "doca_fixture.hpp"

namespace doca_test {
namespace {

using env = doca_env;

TEST_F(env, ticket_is_the_index_of_the_operations_last_wqe) {
  setup();
  for (size_t i = 0; i < 64; ++i) src.bytes_at()[i] = static_cast<uint8_t>(i + 1);
  doca_gpu_dev_verbs_ticket_t t = 99;
  doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), 64, &t);
  EXPECT_EQ(t, 0u);  // first WQE of the ring
  doca_gpu_dev_verbs_p<uint64_t>(qp(), dst.remote(128), 0xabcdull, &t);
  EXPECT_EQ(t, 1u);
  doca_gpu_dev_verbs_put_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD>(qp(), dst.remote(256), src.local(0), 8,
                                                                  dst.remote(512), res.local(0), 1, &t);
  EXPECT_EQ(t, 3u);  // put at 2, signal at 3: the ticket is the signal's
  doca_gpu_dev_verbs_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD>(qp(), dst.remote(512), res.local(8), 5, &t);
  EXPECT_EQ(t, 4u);
  doca_gpu_dev_verbs_get(qp(), dst.remote(0), res.local(64), 64, &t);
  EXPECT_EQ(t, 5u);
  EXPECT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  EXPECT_EQ(std::memcmp(dst.bytes_at(0), src.bytes_at(0), 64), 0);
  EXPECT_EQ(*dst.word(128), 0xabcdull);
  EXPECT_EQ(*dst.word(512), 6u);
  EXPECT_EQ(*res.word(8), 1u);  // the signal's old value
  EXPECT_EQ(std::memcmp(res.bytes_at(64), src.bytes_at(0), 64), 0);
}

TEST_F(env, poll_one_cq_at_is_ebusy_until_the_wqe_completes_then_zero) {
  options o;
  o.connect_a = false;  // WQEs wait while the QP is in RESET (PRM 6.1)
  setup(o);
  std::memset(src.bytes_at(), 0x5a, 4096);
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), 4096, &t);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(doca_gpu_dev_verbs_poll_one_cq_at(qp(), t), EBUSY);
  EXPECT_EQ(dst.bytes_at()[0], 0);
  DOCA_OK(doca_test_connect(dev, a[0]->qp, doca_verbs_qp_get_qpn(b[0]->qp), nullptr, nullptr));
  // The soft NIC sees the old doorbell record once the QP is in RTS; a later doorbell
  // (here: a zero-byte put) wakes it on this thread.
  doca_gpu_dev_verbs_ticket_t t2 = 0;
  doca_gpu_dev_verbs_put(qp(), dst.remote(8192), src.local(0), 0, &t2);
  int r = EBUSY;
  for (int i = 0; i < 10'000'000 && r == EBUSY; ++i) r = doca_gpu_dev_verbs_poll_one_cq_at(qp(), t);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(dst.bytes_at()[4095], 0x5a);
  EXPECT_EQ(doca_gpu_dev_verbs_poll_cq_at(qp(), t2), 0);
}

// A CPU thread spinning on poll_one_cq_at must give its core away, or the CPU thread that
// would complete the operation (a CPU proxy's progress thread that yields when idle, the
// soft NIC's engine) waits a scheduler slice per operation: write_bw --handler proxy ran
// at 0.001 GB/s (docs/doca-compat.md, Known problems). Shown on one CPU shared with a
// companion that yields in a loop, as such a progress thread does: after 64 EBUSY polls
// each further one yields, and every yield is a switch to the companion, which the kernel
// counts as an involuntary context switch of the polling thread.
TEST_F(env, a_cpu_thread_spinning_on_poll_one_cq_at_yields_its_core_after_64_busy_polls) {
  options o;
  o.connect_a = false;  // the put waits in RESET: every poll is EBUSY
  setup(o);
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), 64, &t);
  cpu_set_t saved;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  std::atomic<bool> stop{false};
  std::thread companion([&] {
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    while (!stop.load(std::memory_order_acquire)) std::this_thread::yield();
  });
  rusage before{};
  getrusage(RUSAGE_THREAD, &before);
  constexpr int polls = 1000;
  int busy = 0;
  for (int i = 0; i < polls; ++i) busy += doca_gpu_dev_verbs_poll_one_cq_at(qp(), t) == EBUSY ? 1 : 0;
  rusage after{};
  getrusage(RUSAGE_THREAD, &after);
  stop.store(true, std::memory_order_release);
  companion.join();
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  EXPECT_EQ(busy, polls);
  const long switches = after.ru_nivcsw - before.ru_nivcsw;
  std::printf("%d EBUSY polls on one CPU beside a yielding thread: %ld switches away\n", polls, switches);
  EXPECT_GE(switches, (polls - 64) / 2) << "the polling thread kept its core through " << polls << " EBUSY polls";
}

TEST_F(env, an_error_cqe_makes_polls_negative_and_query_last_error_names_it) {
  setup();
  doca_gpu_dev_verbs_addr bad = dst.remote(0);
  bad.key = be32(dst.rkey ^ 0x5500u);  // a key nobody registered
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put(qp(), bad, src.local(0), 64, &t);
  EXPECT_LT(doca_gpu_dev_verbs_poll_cq_at(qp(), t), 0);
  EXPECT_LT(doca_gpu_dev_verbs_poll_one_cq_at(qp(), t), 0);
  EXPECT_EQ(dst.bytes_at()[0], 0);  // a failed access writes nothing
  doca_gpu_verbs_qp_error_info info{};
  DOCA_OK(doca_gpu_verbs_query_last_error(a[0]->qp_gverbs, &info));
  EXPECT_TRUE(info.has_error);
  EXPECT_EQ(info.syndrome, 0x13);  // REMOTE_ACCESS_ERR
  EXPECT_EQ(info.wqe_counter, 0);
  // Everything after it is flushed: a later put also settles in error.
  doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), 64, &t);
  EXPECT_LT(doca_gpu_dev_verbs_wait(qp(), t), 0);
}

TEST_F(env, query_last_error_reports_no_error_on_a_healthy_qp) {
  setup();
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), 64, &t);
  ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  doca_gpu_verbs_qp_error_info info{};
  info.has_error = true;
  DOCA_OK(doca_gpu_verbs_query_last_error(a[0]->qp_gverbs, &info));
  EXPECT_FALSE(info.has_error);
}

TEST_F(env, wait_returns_only_after_the_data_is_placed) {
  setup();
  for (uint32_t round = 0; round < 200; ++round) {
    const size_t n = 64 * 1024;
    std::memset(src.bytes_at(), static_cast<int>(round + 1), n);
    doca_gpu_dev_verbs_ticket_t t = 0;
    doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), n, &t);
    ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
    ASSERT_EQ(dst.bytes_at()[0], static_cast<uint8_t>(round + 1));
    ASSERT_EQ(dst.bytes_at()[n - 1], static_cast<uint8_t>(round + 1)) << "round " << round;
  }
  EXPECT_EQ(doca_gpu_dev_verbs_wait(qp()), 0);  // the ticketless wait: everything so far
}

TEST_F(env, put_signal_signal_never_lands_before_its_data) {
  setup();
  constexpr uint32_t iterations = 3000, slots = 16, bytes = 512;
  std::atomic<uint32_t> acked{0};
  std::atomic<bool> bad{false};
  std::thread reader([&] {
    for (uint32_t i = 0; i < iterations; ++i) {
      while (__atomic_load_n(dst.word(65536), __ATOMIC_ACQUIRE) < i + 1) std::this_thread::yield();
      const uint8_t want = static_cast<uint8_t>(i * 7 + 1);
      const uint8_t* slot = dst.bytes_at((i % slots) * bytes);
      if (slot[0] != want || slot[bytes - 1] != want) bad = true;
      acked.store(i + 1, std::memory_order_release);
    }
  });
  for (uint32_t i = 0; i < iterations; ++i) {
    while (acked.load(std::memory_order_acquire) + slots <= i) std::this_thread::yield();  // slot free again
    std::memset(src.bytes_at((i % slots) * bytes), static_cast<int>(i * 7 + 1), bytes);
    doca_gpu_dev_verbs_ticket_t t = 0;
    doca_gpu_dev_verbs_put_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD>(
        qp(), dst.remote((i % slots) * bytes), src.local((i % slots) * bytes), bytes, dst.remote(65536),
        res.local(0), 1, &t);
    ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  }
  reader.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(*dst.word(65536), iterations);
}

TEST_F(env, p_signal_places_the_value_then_adds_the_signal) {
  setup();
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_p_signal<uint32_t, DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD>(qp(), dst.remote(64), 0xfeedbeefu,
                                                                          dst.remote(128), res.local(0), 3, &t);
  EXPECT_EQ(t, 1u);
  ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  uint32_t v = 0;
  std::memcpy(&v, dst.bytes_at(64), 4);
  EXPECT_EQ(v, 0xfeedbeefu);
  EXPECT_EQ(*dst.word(128), 3u);
}

TEST_F(env, get_wait_returns_with_the_remote_bytes_in_place) {
  setup();
  for (size_t i = 0; i < 4096; ++i) dst.bytes_at()[i] = static_cast<uint8_t>(i * 31);
  ASSERT_EQ(doca_gpu_dev_verbs_get_wait(qp(), dst.remote(0), res.local(0), 4096), 0);
  EXPECT_EQ(std::memcmp(res.bytes_at(), dst.bytes_at(), 4096), 0);
}

TEST_F(env, gdaki_atomics_return_the_old_value_and_cas_swaps_only_on_a_match) {
  setup();
  *dst.word(0) = 40;
  doca_gpu_dev_verbs_ticket_t t = 0;
  gdaki_doca_dev_verbs_atomic_fetch_add(qp(), dst.remote(0), res.local(0), 2, &t);
  ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  EXPECT_EQ(*res.word(0), 40u);
  EXPECT_EQ(*dst.word(0), 42u);
  gdaki_doca_dev_verbs_atomic_compare_swap(qp(), dst.remote(0), res.local(8), 41, 7, &t);  // no match
  ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  EXPECT_EQ(*res.word(8), 42u);
  EXPECT_EQ(*dst.word(0), 42u);
  gdaki_doca_dev_verbs_atomic_compare_swap(qp(), dst.remote(0), res.local(16), 42, 7, &t);
  ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(), t), 0);
  EXPECT_EQ(*res.word(16), 42u);
  EXPECT_EQ(*dst.word(0), 7u);
}

TEST_F(env, building_blocks_post_writes_that_poll_cq_at_settles) {
  setup();
  for (size_t i = 0; i < 256; ++i) src.bytes_at()[i] = static_cast<uint8_t>(255 - i);
  doca_gpu_dev_verbs_qp* q = qp();
  const uint64_t base = doca_gpu_dev_verbs_reserve_wq_slots(q, 2);
  EXPECT_EQ(base, 0u);
  for (uint64_t i = 0; i < 2; ++i) {
    doca_gpu_dev_verbs_wqe* w = doca_gpu_dev_verbs_get_wqe_ptr(q, base + i);
    EXPECT_EQ(reinterpret_cast<uint8_t*>(w), reinterpret_cast<uint8_t*>(doca_gpu_dev_verbs_get_wqe_ptr(q, 0)) + 64 * i);
    doca_gpu_dev_verbs_wqe_prepare_write(q, w, base + i, DOCA_GPUNETIO_IB_MLX5_OPCODE_RDMA_WRITE,
                                         DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE, 0,
                                         reinterpret_cast<uint64_t>(dst.bytes_at(128 * i)), be32(dst.rkey),
                                         reinterpret_cast<uint64_t>(src.bytes_at(128 * i)), be32(src.lkey), 128);
  }
  EXPECT_EQ(doca_gpu_dev_verbs_poll_one_cq_at(q, base + 1), EBUSY);  // written, not yet rung
  doca_gpu_dev_verbs_mark_wqes_ready(q, base, base + 1);
  doca_gpu_dev_verbs_submit(q, base + 2);
  EXPECT_EQ(doca_gpu_dev_verbs_poll_cq_at(q, base + 1), 0);
  EXPECT_EQ(std::memcmp(dst.bytes_at(), src.bytes_at(), 256), 0);
  EXPECT_EQ(doca_gpu_dev_verbs_qp_get_sq_wqe_pi(q), 2u);
}

TEST_F(env, counter_moves_only_after_the_put_completed) {
  options o;
  o.pairs = 2;  // A_1 is the companion QP
  setup(o);
  std::memset(src.bytes_at(), 0x77, 1024);
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put_counter(qp(0), dst.remote(0), src.local(0), 1024, qp(1), dst.remote(4096), res.local(0), 1,
                                 &t);
  ASSERT_EQ(doca_gpu_dev_verbs_wait(qp(1), t), 0);
  EXPECT_EQ(*dst.word(4096), 1u);
  EXPECT_EQ(dst.bytes_at()[1023], 0x77);
}

}  // namespace
}  // namespace doca_test

namespace doca_test {
namespace {

// CPU proxy: the initiators write WQEs and the doorbell record only; nothing runs until a
// CPU thread calls doca_gpu_verbs_cpu_proxy_progress (the soft NIC, like a ConnectX, acts
// on rung doorbells only).
TEST_F(doca_env, cpu_proxy_operations_start_only_when_the_cpu_progresses_the_qp) {
  options o;
  o.handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY;
  setup(o);
  EXPECT_TRUE(a[0]->qp_gverbs->cpu_proxy);
  std::memset(src.bytes_at(), 0x3c, 256);
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put(qp(), dst.remote(0), src.local(0), 256, &t);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(doca_gpu_dev_verbs_poll_one_cq_at(qp(), t), EBUSY);
  EXPECT_EQ(dst.bytes_at()[0], 0);
  bool progressed = false;
  DOCA_OK(doca_gpu_verbs_cpu_proxy_progress(a[0]->qp_gverbs, &progressed));
  EXPECT_TRUE(progressed);
  EXPECT_EQ(doca_gpu_dev_verbs_poll_cq_at(qp(), t), 0);
  EXPECT_EQ(dst.bytes_at()[255], 0x3c);
  DOCA_OK(doca_gpu_verbs_cpu_proxy_progress(a[0]->qp_gverbs, &progressed));
  EXPECT_FALSE(progressed);  // nothing new to ring
}

TEST_F(doca_env, no_dbr_handler_is_refused_as_not_supported) {
  setup();
  doca_gpu_verbs_qp_init_attr_hl at{};
  at.gpu_dev = gpu;
  at.net_dev = dev;
  at.ibpd = pd;
  at.sq_nwqe = 64;
  at.nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_NO_DBR;
  doca_gpu_verbs_qp_hl* q = nullptr;
  EXPECT_EQ(doca_gpu_verbs_create_qp_hl(&at, &q), DOCA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(q, nullptr);
}

TEST(doca_host, error_names_and_descriptions) {
  EXPECT_STREQ(doca_error_get_name(DOCA_SUCCESS), "DOCA_SUCCESS");
  EXPECT_STREQ(doca_error_get_name(DOCA_ERROR_NOT_SUPPORTED), "DOCA_ERROR_NOT_SUPPORTED");
  EXPECT_STREQ(doca_error_get_name(DOCA_ERROR_DEVICE_FATAL_ERROR), "DOCA_ERROR_DEVICE_FATAL_ERROR");
  EXPECT_STREQ(doca_error_get_name(static_cast<doca_error_t>(999)), "DOCA_ERROR_UNKNOWN_CODE");
  EXPECT_STRNE(doca_error_get_descr(DOCA_ERROR_INVALID_VALUE), "");
}

TEST_F(doca_env, a_modify_missing_required_attributes_is_invalid_and_changes_nothing) {
  options o;
  o.connect_a = false;
  setup(o);
  doca_verbs_qp_attr_t* attr = nullptr;
  DOCA_OK(doca_verbs_qp_attr_create(&attr));
  DOCA_OK(doca_verbs_qp_attr_set_next_state(attr, DOCA_VERBS_QP_STATE_INIT));
  EXPECT_EQ(doca_verbs_qp_modify(a[0]->qp, attr, DOCA_VERBS_QP_ATTR_NEXT_STATE), DOCA_ERROR_INVALID_VALUE);
  int mask = 0;
  DOCA_OK(doca_verbs_qp_query(a[0]->qp, attr, nullptr, &mask));
  EXPECT_EQ(doca_verbs_qp_attr_get_current_state(attr), DOCA_VERBS_QP_STATE_RST);
  DOCA_OK(doca_verbs_qp_attr_destroy(attr));
  doca_verbs_umem_t* umem = nullptr;
  EXPECT_EQ(doca_verbs_umem_create(dev, src.ptr, 4096, 0, -1, 0, &umem), DOCA_ERROR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace doca_test
