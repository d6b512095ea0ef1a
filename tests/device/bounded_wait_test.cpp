// A wait on an operation that can never complete returns timeout or an error status
// within its bound, and the state dump names the stuck WQE.
//
// Never-completing cases used with the soft NIC:
//  - the local QP never reaches RTS (RESET, or INIT): the NIC executes nothing, WQEs wait
//    (PRM 6.1), so a bounded wait returns timeout and dump_qp_state names the WQE;
//  - the peer QP never leaves INIT / was destroyed: the request is dropped, the
//    requester retries, then TRANSPORT_RETRY_EXC -> io_error (before that: timeout);
//  - the QP forced into ERR: every WQE flushes -> io_error with WR_FLUSH_ERR.
//  - a cpu_assisted QP with no doorbell service: the soft NIC, like a ConnectX, acts only
//    on rung doorbells, so nothing runs until a service rings (last test).
#include <array>
#include <thread>

#include "device/device_fixture.hpp"

using namespace device_test;
using gdaki::status;
namespace d = gdaki::dev;

namespace {

// Slack on top of a wait's bound: the machine is shared and heavily loaded.
constexpr uint64_t slack_ns = 1'000'000'000ull;

struct env {
  world w;
  reg_buffer src, dst;
  qp_handle* qp = nullptr;   // what the kernels post on
  qp_handle* nic = nullptr;  // the QP's direct handle (dumps, counters, CQE syndromes)
  explicit env(const pair_options& o) {
    w.make_pairs(1, o);
    qp = &w.handles[0];
    nic = &w.nic(0);
    src = reg_buffer(w.pda, 65536, verbs::access::local_write);
    dst = reg_buffer(w.pdb, 65536, verbs::access::all);
  }
  // put_signal of `bytes`, then wait(timeout) on its ticket, on one grid-launched thread.
  std::array<uint64_t, 4> stuck(uint64_t bytes, uint64_t timeout_ns) {
    std::array<uint64_t, 4> out{~0ull, ~0ull, ~0ull, ~0ull};
    stuck_args a{qp, src.local(), dst.remote(64), dst.remote(0), bytes, timeout_ns, out.data()};
    d::host::launch(1, 1, [&] { stuck_kernel(a); });
    return out;
  }
};

void expect_dump_names(const qp_handle& qp, const char* opcode, uint64_t index) {
  const std::string dump = d::dump_qp_state(qp);
  char idx[32];
  std::snprintf(idx, sizeof idx, "wqe_index=0x%04x", static_cast<unsigned>(index & 0xffff));
  EXPECT_NE(dump.find("stuck WQE"), std::string::npos) << dump;
  EXPECT_NE(dump.find(std::string("WQE ") + opcode), std::string::npos) << dump;
  EXPECT_NE(dump.find(idx), std::string::npos) << dump;
}

TEST(device_bounded_wait, wait_times_out_within_the_bound_when_the_qp_never_reaches_rts) {
  pair_options o;
  o.connect_a = false;  // A stays in RESET: the NIC never executes its SQ
  env e(o);
  constexpr uint64_t bound = 50'000'000;  // 50 ms
  const auto out = e.stuck(256, bound);
  EXPECT_EQ(st(out[0]), status::ok);
  EXPECT_EQ(st(out[1]), status::timeout);
  EXPECT_GE(out[2], bound);
  EXPECT_LT(out[2], bound + slack_ns);
  EXPECT_EQ(out[3], wqe_tickets ? 2u : 1u) << "2 WQEBBs, or 1 descriptor";
  expect_dump_names(*e.nic, "RDMA_WRITE", 0);
  std::printf("%s", d::dump_qp_state(*e.nic).c_str());  // what a user sees after the timeout
  EXPECT_EQ(d::test(*e.qp, out[3]), status::again);
  EXPECT_EQ(d::last_error(*e.nic).wqe_index, d::no_error_index) << "a timeout is not an error";
  EXPECT_EQ(e.dst.words()[0], 0u);
}

TEST(device_bounded_wait, quiet_and_posting_into_a_full_ring_time_out_within_the_bound) {
  if (!wqe_tickets) GTEST_SKIP() << "proxy: posting fills the descriptor ring, not the SQ (tests/proxy ring tests)";
  pair_options o;
  o.connect_a = false;
  o.sq_wqebbs = 64;
  env e(o);
  uint64_t t = 0;
  for (int i = 0; i < 64; ++i) ASSERT_EQ(d::put(*e.qp, e.dst.remote(), e.src.local(), 8, &t), status::ok);
  uint64_t t0 = now_ns();
  EXPECT_EQ(d::put(*e.qp, e.dst.remote(), e.src.local(), 8, &t, d::op_flags::none, 20'000'000), status::timeout)
      << "no ring space";
  EXPECT_LT(now_ns() - t0, 20'000'000 + slack_ns);
  // quiet has no ring space either (the QP is unusable after a post timeout: documented).
  t0 = now_ns();
  EXPECT_EQ(d::quiet(*e.qp, 20'000'000), status::timeout);
  EXPECT_LT(now_ns() - t0, 20'000'000 + slack_ns);
  expect_dump_names(*e.nic, "RDMA_WRITE", 0);
}

TEST(device_bounded_wait, peer_stuck_in_init_gives_timeout_then_transport_retry_exceeded) {
  pair_options o;
  o.connect_b = false;
  o.attr = fast_attr();
  o.attr.timeout = 14;  // ~67 ms per try, 2 tries: the short wait below ends first
  o.attr.retry_cnt = 1;
  env e(o);
  e.w.pairs[0]->b.to_init(verbs::access::all);
  const auto out = e.stuck(128, 10'000'000);  // 10 ms
  EXPECT_EQ(st(out[0]), status::ok);
  EXPECT_EQ(st(out[1]), status::timeout);
  EXPECT_LT(out[2], 10'000'000 + slack_ns);
  expect_dump_names(*e.nic, "RDMA_WRITE", 0);
  // The retries run out: io_error, well within this bound.
  const uint64_t t0 = now_ns();
  EXPECT_EQ(d::wait(*e.qp, out[3], 5'000'000'000ull), status::io_error);
  EXPECT_LT(now_ns() - t0, 5'000'000'000ull);
  EXPECT_EQ(d::last_error(*e.nic).syndrome, prm::syndrome::transport_retry_exc);
  EXPECT_EQ(d::last_error(*e.nic).wqe_index, 0u) << "the first WQE (the data WRITE) failed";
  const std::string dump = d::dump_qp_state(*e.nic);
  EXPECT_NE(dump.find("TRANSPORT_RETRY_EXC_ERR"), std::string::npos) << dump;
  EXPECT_EQ(e.w.pairs[0]->a.state(), verbs::qp_state::err);
  EXPECT_EQ(e.dst.words()[0], 0u) << "the signal never landed";
}

TEST(device_bounded_wait, destroyed_peer_gives_io_error_within_the_bound) {
  pair_options o;
  o.attr = fast_attr();
  env e(o);
  e.w.pairs[0]->b = verbs::qp();  // destroy the peer
  const auto out = e.stuck(64, 5'000'000'000ull);
  EXPECT_EQ(st(out[0]), status::ok);
  EXPECT_EQ(st(out[1]), status::io_error);
  EXPECT_LT(out[2], 5'000'000'000ull);
  EXPECT_EQ(d::last_error(*e.nic).syndrome, prm::syndrome::transport_retry_exc);
  EXPECT_EQ(d::last_error(*e.nic).wqe_index, 0u);
}

TEST(device_bounded_wait, qp_forced_into_err_flushes_with_io_error_and_wr_flush) {
  pair_options o;
  env e(o);
  e.w.pairs[0]->a.to_err();
  const auto out = e.stuck(512, 5'000'000'000ull);
  EXPECT_EQ(st(out[0]), status::ok);
  EXPECT_EQ(st(out[1]), status::io_error);
  EXPECT_LT(out[2], 5'000'000'000ull);
  EXPECT_EQ(d::last_error(*e.nic).syndrome, prm::syndrome::wr_flush);
  EXPECT_EQ(d::last_error(*e.nic).wqe_index, 0u);
  EXPECT_EQ(d::test(*e.qp, out[3]), status::io_error);
  uint64_t t = 0;
  ASSERT_EQ(d::get(*e.qp, e.src.local(), e.dst.remote(), 8, &t), status::ok) << "posting still works in ERR";
  EXPECT_EQ(d::wait(*e.qp, t, 5'000'000'000ull), status::io_error);
  EXPECT_EQ(d::quiet(*e.qp, 5'000'000'000ull), status::io_error);
  // io_error settles tickets behind the failure before their flush CQEs arrive; with a
  // doorbell service (cpu_assisted) or a proxy thread those come a moment later.
  // The counters are read with acquire loads: with the proxy backend its thread is still
  // posting and polling on this handle.
  const auto completed = [&] { return gdaki::dev::arch::load_acquire(&e.nic->sq_completed); };
  const auto reserved = [&] { return gdaki::dev::arch::load_acquire(&e.nic->sq_reserved); };
  for (const uint64_t t1 = now_ns(); completed() != reserved() && now_ns() - t1 < 5'000'000'000ull;) {
    d::sq_progress(*e.nic);
    std::this_thread::yield();
  }
  EXPECT_EQ(completed(), reserved()) << "every WQE was flushed, one CQE each";
  if (wqe_tickets) {
    // quiet posts no NOP: the latched failure already answers it (io_error).
    EXPECT_EQ(e.nic->send_cq->ci, 3u) << "WRITE, signal, READ: flushed signalled or not";
  }
  EXPECT_EQ(e.dst.words()[0], 0u);
}

TEST(device_bounded_wait, qp_moved_to_err_while_operations_wait_flushes_them) {
  pair_options o;
  o.connect_a = false;
  env e(o);
  e.w.pairs[0]->a.to_init(verbs::access::all);
  uint64_t t = 0;
  ASSERT_EQ(d::put_signal(*e.qp, e.dst.remote(64), e.src.local(), 64, e.dst.remote(0), d::signal_op::add, 1, &t),
            status::ok);
  EXPECT_EQ(d::wait(*e.qp, t, 5'000'000), status::timeout) << "INIT: nothing runs";
  e.w.pairs[0]->a.to_err();
  EXPECT_EQ(d::wait(*e.qp, t, 5'000'000'000ull), status::io_error);
  EXPECT_EQ(d::last_error(*e.nic).syndrome, prm::syndrome::wr_flush);
  EXPECT_EQ(d::last_error(*e.nic).wqe_index, 0u);
}

// CPU-assisted doorbells really depend on the CPU service: the DBR moves, nobody rings,
// nothing runs; a doorbell_service then rings and the same ticket completes.
TEST(device_bounded_wait, cpu_assisted_wait_times_out_without_the_doorbell_service_and_completes_with_it) {
  if (backend == test_backend::proxy) GTEST_SKIP() << "proxy: handles have no doorbell";
  pair_options o;
  o.db_mode = d::doorbell_mode::cpu_assisted;
  o.doorbell_service = false;
  env e(o);
  ASSERT_EQ(e.qp->db_mode, d::doorbell_mode::cpu_assisted);
  const auto out = e.stuck(256, 50'000'000);  // 50 ms
  EXPECT_EQ(st(out[0]), status::ok);
  EXPECT_EQ(st(out[1]), status::timeout) << "the DBR moved but nobody rang";
  EXPECT_EQ(*e.qp->uar_db, 0u) << "the device side never touches the doorbell register";
  EXPECT_EQ(e.dst.words()[0], 0u);
  gdaki::proxy::doorbell_service svc;
  ASSERT_EQ(svc.add(*e.qp), status::ok);
  ASSERT_EQ(svc.start(), status::ok);
  EXPECT_EQ(d::wait(*e.qp, out[3], 5'000'000'000ull), status::ok);
  EXPECT_EQ(e.dst.words()[0], 1u) << "the signal landed once the service rang";
  svc.stop();
  EXPECT_GE(svc.stats().rung, 1u);
  // The application may drive the service itself instead of its thread.
  uint64_t t = 0;
  ASSERT_EQ(d::signal(*e.qp, e.dst.remote(0), d::signal_op::set, 7, &t), status::ok);
  EXPECT_EQ(d::wait(*e.qp, t, 20'000'000), status::timeout);
  EXPECT_EQ(svc.progress(), 1u);
  EXPECT_EQ(d::wait(*e.qp, t, 5'000'000'000ull), status::ok);
  EXPECT_EQ(e.dst.words()[0], 7u);
  EXPECT_EQ(svc.remove(*e.qp), status::ok);
}

}  // namespace
