// put_signal ordering: a reader that sees the signal always sees the data. A writer
// thread posts 100,000 put_signals (8 .. 1024 bytes each, alternating signal add and set)
// into a ring of slots at the peer; a reader thread spins on the signal word and checks
// every newly signalled iteration's slot (newest first) word by word, then acks, which
// frees the slots for the writer. Both run as one block of two threads through the host
// grid launcher (device_kernels.hpp: ordering_kernel).
#include "device/device_fixture.hpp"

using namespace device_test;
using gdaki::status;
namespace d = gdaki::dev;

namespace {

void run_ordering(uint32_t iterations, uint32_t slots, bool engine_only) {
  world w;
  pair_options o;
  o.sq_wqebbs = 64;
  w.make_pairs(1, o);
  if (engine_only) {
    if (!wqe_tickets) GTEST_SKIP() << "proxy: the poster's QP is posted by the proxy thread, not the kernel";  // no inline execution on the writer: the soft NIC's engine thread runs the WQEs
    w.handles[0].host_doorbell_hook = nullptr;
    w.handles[0].host_poll_hook = nullptr;
    w.handles[0].host_hook_ctx = nullptr;
  }
  constexpr uint32_t slot_bytes = 1024;
  reg_buffer src(w.pda, slots * slot_bytes, verbs::access::local_write);
  reg_buffer dst(w.pdb, slots * slot_bytes, verbs::access::all);
  reg_buffer sig(w.pdb, 64, verbs::access::all);
  alignas(64) uint64_t ack = 0;
  uint64_t report[5] = {~0ull, ~0ull, ~0ull, ~0ull, 0};
  ordering_args a{&w.handles[0], src.local(), dst.remote(), sig.remote(), &ack, iterations, slots, slot_bytes,
                  report, 20'000'000'000ull};
  const uint64_t t0 = now_ns();
  d::host::launch(1, 2, [&] { ordering_kernel(a); });
  const uint64_t ms = (now_ns() - t0) / 1000000;
  ::testing::Test::RecordProperty("elapsed_ms", static_cast<int>(ms));
  std::printf("%u put_signals (%u slots) in %llu ms (reader polled the signal %llu times)\n", iterations, slots,
              static_cast<unsigned long long>(ms), static_cast<unsigned long long>(report[4]));
  EXPECT_EQ(report[0], 0u) << "put_signal posting errors";
  EXPECT_EQ(report[2], 0u) << "iterations whose data was not there when the signal was (first: "
                           << static_cast<int64_t>(report[1]) - 1 << ")";
  EXPECT_EQ(st(report[3]), status::ok) << "closing quiet";
  EXPECT_EQ(sig.words()[0], iterations);
  EXPECT_EQ(ack, iterations);
  if (wqe_tickets) {
    // The closing quiet posts its NOP only if the last signal's CQE had not come yet.
    const uint64_t put_signals = uint64_t{iterations} * (d::wqebbs_rdma(1) + 1);
    const uint64_t nops = w.nic(0).sq_reserved - put_signals;
    EXPECT_LE(nops, 1u) << "the closing quiet posts at most one NOP";
    EXPECT_EQ(w.nic(0).send_cq->ci, uint64_t{iterations} + nops) << "one CQE per signal, plus the NOP if posted";
  } else {
    EXPECT_EQ(w.nic(0).send_cq->ci, uint64_t{iterations}) << "one CQE per signal (the proxy's quiet is no WQE)";
  }
}

// Lock-step: the writer waits for the reader's ack of iteration i before posting i + 1, so
// the reader is always polling when the signal lands.
TEST(device_put_signal_ordering, reader_that_sees_the_signal_sees_the_data_100k_lockstep_iterations) {
  run_ordering(100'000, 1, false);
}

// Pipelined: up to 16 iterations in flight in distinct slots.
TEST(device_put_signal_ordering, reader_that_sees_the_signal_sees_the_data_100k_pipelined_iterations) {
  run_ordering(100'000, 16, false);
}

// The soft NIC's engine thread executes (no inline execution on the posting thread).
TEST(device_put_signal_ordering, same_with_the_soft_nic_engine_thread_executing) { run_ordering(20'000, 16, true); }

}  // namespace
