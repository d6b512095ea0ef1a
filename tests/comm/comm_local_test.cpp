// The communicator with every rank in this process (communicator::create_local), 2, 3 and
// 4 ranks, one thread per rank running the collective scenarios of comm_scenarios.hpp.
#include <gtest/gtest.h>

#include <thread>

#include "comm/comm_scenarios.hpp"
#include "gdaki/error.hpp"

namespace {

using namespace comm_test;

comm::options small_options(bool self_direct = true) {
  comm::options o;
  o.self_direct = self_direct;
  o.contexts = 2;
  o.heap_bytes = 1 << 20;
  o.timeout_ms = 20000;
  return o;
}

// Runs fn on every rank's thread; returns every rank's complaint, one per line.
template <typename Fn>
std::string on_every_rank(std::vector<comm::communicator>& comms, Fn fn) {
  std::vector<std::string> out(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        out[r] = fn(comms[r]);
      } catch (const std::exception& e) {
        out[r] = "rank " + std::to_string(r) + " threw: " + e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::string all;
  for (auto& s : out)
    if (!s.empty()) all += s + "\n";
  return all;
}

// (ranks, self_direct): every scenario with operations to self done directly and through
// the loopback QP.
class comm_local : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  int ranks() const { return std::get<0>(GetParam()); }
  comm::options opts() const { return small_options(std::get<1>(GetParam())); }
};

TEST_P(comm_local, creation_names_every_rank) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  ASSERT_EQ(int(comms.size()), ranks());
  for (int r = 0; r < ranks(); ++r) {
    EXPECT_EQ(comms[r].rank(), r);
    EXPECT_EQ(comms[r].size(), ranks());
    EXPECT_EQ(comms[r].device().ncontexts, 2u);
    EXPECT_NE(comms[r].rank_name(r).find("rank " + std::to_string(r) + " (pid "), std::string::npos);
  }
}

TEST_P(comm_local, every_operation) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  EXPECT_EQ(on_every_rank(comms, every_operation), "");
}

TEST_P(comm_local, teams_stride_and_colour) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  EXPECT_EQ(on_every_rank(comms, teams), "");
}

TEST_P(comm_local, barrier_covers_puts_to_self) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  EXPECT_EQ(on_every_rank(comms, barrier_covers_puts_to_self), "");
}

TEST_P(comm_local, errors_abi_timeouts_and_raw_qp) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  EXPECT_EQ(on_every_rank(comms, errors_and_escape_hatch), "");
}

TEST_P(comm_local, warp_and_block_scopes_on_host_grid) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  EXPECT_EQ(on_every_rank(comms, scopes_on_host_grid), "");
}

TEST_P(comm_local, symmetric_heap) {
  auto comms = comm::communicator::create_local(ranks(), opts());
  EXPECT_EQ(on_every_rank(comms, heap), "");
}

std::string comm_local_name(const ::testing::TestParamInfo<std::tuple<int, bool>>& p) {
  return std::to_string(std::get<0>(p.param)) + (std::get<1>(p.param) ? "_self_direct" : "_self_through_loopback_qp");
}
INSTANTIATE_TEST_SUITE_P(ranks, comm_local, ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         comm_local_name);

// With self_direct, every operation to this rank has completed when its call returns
// (data, signal, counter) and posted nothing on the loopback QP; without it each one is
// WQEs on that QP (its reservation counter moves) and completes by flush. One rank, so the
// loopback QP is the only QP.
TEST(comm_local_self, operations_to_self_skip_the_loopback_qp_only_with_self_direct) {
  for (const bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "self_direct" : "through the loopback QP");
    auto comms = comm::communicator::create_local(1, small_options(direct));
    comm::communicator& c = comms[0];
    const comm::dev_comm& d = c.device();
    ASSERT_EQ(d.self_direct, direct ? 1u : 0u);
    const comm::window_t win = c.alloc_window(4096);
    auto* base = static_cast<uint64_t*>(c.window_base(win));
    for (uint64_t i = 0; i < 8; ++i) base[i] = 0x1000 + i;
    const gdaki::dev::qp_handle* loop = comm::raw_qp(d, 0, 0);
    const uint64_t reserved0 = loop->sq_reserved;
    // put 8 B with signal add and counter, put_value with signal set, get, signal alone.
    ASSERT_EQ(comm::put(d, 0, d.world, 0, win, 64, win, 0, 8, comm::signal_add(1, 5), comm::counter_inc(2)),
              gdaki::status::ok);
    ASSERT_EQ(comm::put_value(d, 0, d.world, 0, win, 72, uint64_t{0xabcd}, comm::signal_set(2, 9)), gdaki::status::ok);
    ASSERT_EQ(comm::get(d, 0, d.world, 0, win, 80, win, 8, 16, comm::counter_inc(2)), gdaki::status::ok);
    ASSERT_EQ(comm::signal(d, 0, d.world, 0, comm::signal_inc(3)), gdaki::status::ok);
    ASSERT_EQ(comm::barrier(d, 0, d.world), gdaki::status::ok);
    if (direct) {
      EXPECT_EQ(loop->sq_reserved, reserved0) << "an operation to self posted a WQE";
      // Done at return, before any flush: the data, the signals and the counter.
      EXPECT_EQ(base[8], 0x1000u);
      EXPECT_EQ(base[9], 0xabcdu);
      EXPECT_EQ(base[10], 0x1001u);
      EXPECT_EQ(base[11], 0x1002u);
      EXPECT_EQ(comm::read_signal(d, 1), 5u);
      EXPECT_EQ(comm::read_signal(d, 2), 9u);
      EXPECT_EQ(comm::read_signal(d, 3), 1u);
      EXPECT_EQ(comm::read_counter(d, 2), 2u);
      // A put into an overlapping range of its own source moves what the source held.
      auto* bytes = reinterpret_cast<uint8_t*>(base + 16);
      for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(i + 1);
      ASSERT_EQ(comm::put(d, 0, d.world, 0, win, 16 * 8 + 5, win, 16 * 8, 20), gdaki::status::ok);
      for (int i = 0; i < 20; ++i) ASSERT_EQ(bytes[5 + i], i + 1) << "byte " << i << " of an overlapping put to self";
    } else {
      EXPECT_GT(loop->sq_reserved, reserved0) << "the loopback QP carried nothing";
    }
    ASSERT_EQ(comm::flush(d, 0), gdaki::status::ok);
    EXPECT_EQ(base[8], 0x1000u);
    EXPECT_EQ(base[9], 0xabcdu);
    EXPECT_EQ(base[10], 0x1001u);
    EXPECT_EQ(base[11], 0x1002u);
    EXPECT_EQ(comm::wait_signal(d, 1, 5), gdaki::status::ok);
    EXPECT_EQ(comm::read_signal(d, 2), 9u);
    EXPECT_EQ(comm::wait_signal(d, 3, 1), gdaki::status::ok);
    EXPECT_EQ(comm::wait_counter(d, 2, 2), gdaki::status::ok);
    EXPECT_EQ(comm::read_counter(d, 2), 2u);
    c.free_window(win);
  }
}

TEST(comm_local_stress, barrier_10000_times_4_ranks) {
  auto comms = comm::communicator::create_local(4, small_options());
  EXPECT_EQ(on_every_rank(comms, [](comm::communicator& c) { return barrier_many(c, 10000); }), "");
}

TEST(comm_local_stress, put_signal_ordering_100000_times) {
  auto comms = comm::communicator::create_local(2, small_options());
  EXPECT_EQ(on_every_rank(comms, [](comm::communicator& c) { return put_signal_ordering(c, 100000); }), "");
}

TEST(comm_local_options, bad_options_are_refused_by_name) {
  comm::options o;
  o.contexts = 0;
  try {
    comm::communicator::create_local(2, o);
    FAIL() << "contexts = 0 accepted";
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), gdaki::status::invalid);
    EXPECT_NE(std::string(e.what()).find("options.contexts = 0"), std::string::npos) << e.what();
  }
  o.contexts = 1;
  o.sq_wqebbs = 1u << 30;
  try {
    comm::communicator::create_local(2, o);
    FAIL() << "a huge send queue accepted";
  } catch (const gdaki::error& e) {
    EXPECT_NE(std::string(e.what()).find("options.sq_wqebbs"), std::string::npos) << e.what();
  }
}

TEST(comm_local_windows, asymmetric_and_misaligned_windows_are_refused_by_name) {
  auto comms = comm::communicator::create_local(2, small_options());
  const std::string e = on_every_rank(comms, [](comm::communicator& c) -> std::string {
    try {
      c.alloc_window(c.rank() == 0 ? 4096 : 8192);
      return "asymmetric window accepted";
    } catch (const gdaki::error& ex) {
      if (std::string(ex.what()).find("windows are symmetric") == std::string::npos) return ex.what();
    }
    alignas(4096) static uint8_t buf[2][8192];
    try {
      c.register_window(buf[c.rank()] + 8, 4096);
      return "misaligned window accepted";
    } catch (const gdaki::error& ex) {
      const std::string w = ex.what();
      if (w.find("window") == std::string::npos || w.find("4096") == std::string::npos) return w;
    }
    return "";
  });
  EXPECT_EQ(e, "");
}

}  // namespace
