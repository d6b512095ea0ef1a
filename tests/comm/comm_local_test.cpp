// The communicator with every rank in this process (communicator::create_local), 2, 3 and
// 4 ranks, one thread per rank running the collective scenarios of comm_scenarios.hpp.
#include <gtest/gtest.h>

#include <thread>

#include "comm/comm_scenarios.hpp"
#include "gdaki/error.hpp"

namespace {

using namespace comm_test;

comm::options small_options() {
  comm::options o;
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

class comm_local : public ::testing::TestWithParam<int> {};

TEST_P(comm_local, creation_names_every_rank) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  ASSERT_EQ(int(comms.size()), GetParam());
  for (int r = 0; r < GetParam(); ++r) {
    EXPECT_EQ(comms[r].rank(), r);
    EXPECT_EQ(comms[r].size(), GetParam());
    EXPECT_EQ(comms[r].device().ncontexts, 2u);
    EXPECT_NE(comms[r].rank_name(r).find("rank " + std::to_string(r) + " (pid "), std::string::npos);
  }
}

TEST_P(comm_local, every_operation) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  EXPECT_EQ(on_every_rank(comms, every_operation), "");
}

TEST_P(comm_local, teams_stride_and_colour) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  EXPECT_EQ(on_every_rank(comms, teams), "");
}

TEST_P(comm_local, barrier_covers_puts_to_self) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  EXPECT_EQ(on_every_rank(comms, barrier_covers_puts_to_self), "");
}

TEST_P(comm_local, errors_abi_timeouts_and_raw_qp) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  EXPECT_EQ(on_every_rank(comms, errors_and_escape_hatch), "");
}

TEST_P(comm_local, warp_and_block_scopes_on_host_grid) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  EXPECT_EQ(on_every_rank(comms, scopes_on_host_grid), "");
}

TEST_P(comm_local, symmetric_heap) {
  auto comms = comm::communicator::create_local(GetParam(), small_options());
  EXPECT_EQ(on_every_rank(comms, heap), "");
}

INSTANTIATE_TEST_SUITE_P(ranks, comm_local, ::testing::Values(2, 3, 4));

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
