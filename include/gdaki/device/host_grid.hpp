// The host grid launcher: runs a "kernel" (any callable) as a grid of blocks of CPU
// threads, each thread seeing its thread/block indices and a working emulation of the
// warp and block primitives of arch.hpp. This is how warp- and block-scope posting code is
// tested for real without a GPU. Host-only.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gdaki/device/host_context.hpp"

namespace gdaki::dev::host {

// Runs fn() on grid.count() * block.count() CPU threads, all alive at once (like
// co-resident CUDA blocks, so grid-wide waits work), and returns when all have finished.
// Inside fn, arch::lane_id(), warp_ballot(), warp_shfl(), block_sync() and friends behave
// as on the GPU. An exception thrown by any thread is rethrown here after all joined.
template <typename Fn>
void launch(dim3_t grid, dim3_t block, Fn&& fn) {
  const uint32_t threads_per_block = block.count();
  const uint32_t blocks = grid.count();
  if (threads_per_block == 0 || blocks == 0) throw std::invalid_argument("host grid launch: empty grid or block");
  if (threads_per_block > 1024) throw std::invalid_argument("host grid launch: more than 1024 threads per block");
  const uint32_t warps_per_block = (threads_per_block + 31) / 32;

  std::vector<std::unique_ptr<block_state>> block_states;
  std::vector<std::unique_ptr<warp_state>> warp_states;
  std::vector<thread_context> contexts(static_cast<size_t>(blocks) * threads_per_block);
  for (uint32_t b = 0; b < blocks; ++b) {
    block_states.push_back(std::make_unique<block_state>(threads_per_block));
    for (uint32_t w = 0; w < warps_per_block; ++w) {
      const uint32_t lanes = (w + 1) * 32 <= threads_per_block ? 32 : threads_per_block - w * 32;
      warp_states.push_back(std::make_unique<warp_state>(lanes));
    }
  }
  for (uint32_t b = 0; b < blocks; ++b) {
    for (uint32_t t = 0; t < threads_per_block; ++t) {
      thread_context& c = contexts[static_cast<size_t>(b) * threads_per_block + t];
      c.grid_dim = grid;
      c.block_dim = block;
      c.block_idx = {b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
      c.thread_idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
      c.lane = t % 32;
      c.warp = warp_states[static_cast<size_t>(b) * warps_per_block + t / 32].get();
      c.block = block_states[b].get();
    }
  }

  std::mutex error_mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  threads.reserve(contexts.size());
  for (auto& ctx : contexts) {
    threads.emplace_back([&fn, &ctx, &error_mutex, &first_error] {
      current_context = &ctx;
      try {
        fn();
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
      current_context = nullptr;
    });
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

// Convenience for 1-D launches.
template <typename Fn>
void launch(uint32_t blocks, uint32_t threads_per_block, Fn&& fn) {
  launch(dim3_t{blocks, 1, 1}, dim3_t{threads_per_block, 1, 1}, std::forward<Fn>(fn));
}

}  // namespace gdaki::dev::host
