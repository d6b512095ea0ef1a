// The host grid launcher (gdaki/device/host_grid.hpp) and the host half of the warp/block
// primitives of arch.hpp: indices, lane ids, partial warps, ballot, shuffle, exclusive
// sum, block barrier and exception propagation.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "gdaki/device/arch.hpp"
#include "gdaki/device/host_grid.hpp"

namespace {

namespace arch = gdaki::dev::arch;
namespace host = gdaki::dev::host;

TEST(host_grid, every_thread_gets_unique_3d_indices_and_ranks) {
  const host::dim3_t grid{2, 3, 2}, block{4, 3, 2};
  std::mutex m;
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>> seen;
  std::set<std::pair<uint32_t, uint32_t>> ranks;
  std::atomic<uint32_t> bad{0};
  host::launch(grid, block, [&] {
    const auto* c = host::current_context;
    if (c == nullptr) {
      ++bad;
      return;
    }
    const uint32_t t = c->thread_idx.x + 4 * (c->thread_idx.y + 3 * c->thread_idx.z);
    const uint32_t b = c->block_idx.x + 2 * (c->block_idx.y + 3 * c->block_idx.z);
    if (arch::thread_rank_in_block() != t || arch::block_rank_in_grid() != b) ++bad;
    if (arch::threads_in_block() != 24 || arch::blocks_in_grid() != 12) ++bad;
    if (arch::lane_id() != t % 32) ++bad;
    if (c->thread_idx.x >= 4 || c->thread_idx.y >= 3 || c->thread_idx.z >= 2) ++bad;
    if (c->block_idx.x >= 2 || c->block_idx.y >= 3 || c->block_idx.z >= 2) ++bad;
    std::lock_guard<std::mutex> g(m);
    seen.insert({c->block_idx.x, c->block_idx.y, c->block_idx.z, c->thread_idx.x, c->thread_idx.y, c->thread_idx.z});
    ranks.insert({b, t});
  });
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(seen.size(), 12u * 24u);
  EXPECT_EQ(ranks.size(), 12u * 24u);
  EXPECT_EQ(host::current_context, nullptr) << "the launching thread has no context";
}

// 48 threads per block: warp 0 has 32 lanes, warp 1 has 16.
TEST(host_grid, partial_warp_has_fewer_lanes_and_matching_masks) {
  std::atomic<uint32_t> bad{0};
  host::launch(2, 48, [&] {
    const uint32_t t = arch::thread_rank_in_block();
    const uint32_t lanes = t < 32 ? 32u : 16u;
    if (arch::lane_id() != t % 32) ++bad;
    if (arch::warp_lanes() != lanes) ++bad;
    if (arch::warp_mask() != (lanes == 32 ? 0xffffffffu : 0x0000ffffu)) ++bad;
  });
  EXPECT_EQ(bad.load(), 0u);
}

TEST(host_grid, warp_ballot_sets_bit_per_lane_with_true_predicate) {
  std::atomic<uint32_t> bad{0};
  host::launch(2, 48, [&] {
    const uint32_t lane = arch::lane_id();
    const bool full = arch::thread_rank_in_block() < 32;
    // Round 1: lanes divisible by 3.
    const uint32_t m1 = arch::warp_ballot(lane % 3 == 0);
    const uint32_t want1 = full ? 0x49249249u : 0x00009249u;
    if (m1 != want1) ++bad;
    // Round 2 reuses the slots: odd lanes only.
    const uint32_t m2 = arch::warp_ballot(lane & 1);
    if (m2 != (full ? 0xaaaaaaaau : 0x0000aaaau)) ++bad;
    // Round 3: nobody.
    if (arch::warp_ballot(false) != 0) ++bad;
  });
  EXPECT_EQ(bad.load(), 0u);
}

TEST(host_grid, warp_shfl_returns_the_source_lanes_value) {
  std::atomic<uint32_t> bad{0};
  host::launch(2, 48, [&] {
    const uint32_t lane = arch::lane_id();
    const uint32_t n = arch::warp_lanes();
    const uint64_t mine = (uint64_t{arch::block_rank_in_grid()} << 40) | (uint64_t{arch::thread_rank_in_block()} << 8);
    const uint32_t src = n - 1 - lane;
    const uint64_t got = arch::warp_shfl(mine, src);
    const uint32_t src_rank = arch::thread_rank_in_block() - lane + src;
    if (got != ((uint64_t{arch::block_rank_in_grid()} << 40) | (uint64_t{src_rank} << 8))) ++bad;
    // Broadcast from lane 0, twice in a row (slot reuse).
    if (arch::warp_shfl(lane + 100, 0) != 100) ++bad;
    if (arch::warp_shfl(lane + 200, 0) != 200) ++bad;
  });
  EXPECT_EQ(bad.load(), 0u);
}

TEST(host_grid, warp_exclusive_sum_gives_prefix_and_total) {
  std::atomic<uint32_t> bad{0};
  host::launch(1, 48, [&] {
    const uint32_t lane = arch::lane_id();
    const uint32_t n = arch::warp_lanes();
    uint32_t total = 0;
    const uint32_t before = arch::warp_exclusive_sum(lane + 1, &total);
    if (before != lane * (lane + 1) / 2) ++bad;
    if (total != n * (n + 1) / 2) ++bad;  // 528 for 32 lanes, 136 for 16
    // Lane-dependent zeros: only even lanes contribute 2.
    const uint32_t b2 = arch::warp_exclusive_sum(lane % 2 == 0 ? 2u : 0u, &total);
    if (b2 != 2 * ((lane + 1) / 2)) ++bad;
    if (total != n) ++bad;
  });
  EXPECT_EQ(bad.load(), 0u);
}

TEST(host_grid, block_sync_waits_for_every_thread_of_the_block) {
  constexpr uint32_t blocks = 2, threads = 48, rounds = 5;
  std::atomic<uint32_t> arrived[blocks] = {};
  std::atomic<uint32_t> bad{0};
  host::launch(blocks, threads, [&] {
    const uint32_t b = arch::block_rank_in_grid();
    for (uint32_t r = 0; r < rounds; ++r) {
      arrived[b].fetch_add(1);
      arch::block_sync();
      if (arrived[b].load() < (r + 1) * threads) ++bad;  // every thread of this round arrived
      arch::block_sync();
    }
  });
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(arrived[0].load(), threads * rounds);
  EXPECT_EQ(arrived[1].load(), threads * rounds);
}

TEST(host_grid, exception_in_one_thread_is_rethrown_after_all_finish) {
  std::atomic<uint32_t> finished{0};
  try {
    host::launch(2, 40, [&] {
      if (arch::block_rank_in_grid() == 1 && arch::thread_rank_in_block() == 5) throw std::runtime_error("boom");
      ++finished;
    });
    ADD_FAILURE() << "launch must rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "boom");
  }
  EXPECT_EQ(finished.load(), 79u);
}

TEST(host_grid, bad_launch_shapes_are_rejected) {
  EXPECT_THROW(host::launch(0, 32, [] {}), std::invalid_argument);
  EXPECT_THROW(host::launch(1, 0, [] {}), std::invalid_argument);
  EXPECT_THROW(host::launch(1, 1025, [] {}), std::invalid_argument);
}

TEST(host_grid, outside_a_launch_a_thread_is_a_lone_lane) {
  EXPECT_EQ(arch::lane_id(), 0u);
  EXPECT_EQ(arch::warp_lanes(), 1u);
  EXPECT_EQ(arch::warp_mask(), 1u);
  EXPECT_EQ(arch::warp_ballot(true), 1u);
  EXPECT_EQ(arch::warp_ballot(false), 0u);
  EXPECT_EQ(arch::warp_shfl(42, 0), 42u);
  uint32_t total = 0;
  EXPECT_EQ(arch::warp_exclusive_sum(7, &total), 0u);
  EXPECT_EQ(total, 7u);
  EXPECT_EQ(arch::threads_in_block(), 1u);
  arch::block_sync();  // must not block
}

}  // namespace
