// Kernel bodies of the Ethernet device-API tests: run on CPU threads by the host grid
// launcher in eth_device_test.cpp, and compiled as CUDA kernels for sm_90 by
// eth_kernels_check.cu, so the code the tests run is the code a GPU would run.
#pragma once

#include <cstdint>

#include "gdaki/device/eth.hpp"
#include "gdaki/device/semaphore.hpp"

namespace eth_test {

namespace dev = gdaki::dev;

// What a receive kernel hands to the next stage for each batch.
struct batch_note {
  uint64_t first;     // first position of the batch in the receive queue
  uint32_t count;     // frames in the batch
  uint32_t reserved;
  uint64_t value_sum; // sum of the frames' first 8 bytes, computed by the lanes
};

struct rx_pipeline_args {
  dev::eth_rxq_handle* rxq;
  dev::semaphore_handle sem;
  uint64_t frames;  // stop after this many
};

// Receives batches of up to 32 frames at `Scope` (every lane/thread of the launch calls),
// sums each frame's first word across the lanes, and hands {first, count, sum} to the
// consumer through semaphore slot (batch % count): waits for the slot to be free, fills
// the payload, sets ready. The consumer reads the frames, releases them and frees the slot.
template <typename Scope>
GDAKI_HD inline void rx_pipeline_kernel(const rx_pipeline_args& a) {
  constexpr bool block = std::is_same_v<Scope, dev::scope_block>;
  const uint32_t lane = block ? dev::arch::thread_rank_in_block() : dev::arch::lane_id();
  const bool leader = lane == 0;
  uint64_t taken = 0;
  for (uint64_t batch = 0; taken < a.frames; ++batch) {
    uint64_t first = 0;
    uint32_t n = 0;
    (void)dev::eth_rxq_receive<Scope>(*a.rxq, 32, 100'000, &first, &n);
    if (n == 0) {
      --batch;  // nothing yet: same batch number next time
      continue;
    }
    uint64_t mine = 0;
    if (lane < n) {
      uint32_t bytes = 0;
      const uint8_t* f = dev::eth_rxq_frame(*a.rxq, first + lane, &bytes);
      for (int b = 0; b < 8; ++b) mine |= uint64_t{f[b]} << (8 * b);
    }
    // Sum of the lanes' values: an exclusive sum of 32-bit halves keeps to the primitives
    // the device API already has (warp/block exclusive sums).
    uint32_t lo_total = 0, hi_total = 0;
    if constexpr (block) {
      (void)dev::arch::block_exclusive_sum(static_cast<uint32_t>(mine & 0xffff), &lo_total);
      (void)dev::arch::block_exclusive_sum(static_cast<uint32_t>(mine >> 16), &hi_total);
    } else {
      (void)dev::arch::warp_exclusive_sum(static_cast<uint32_t>(mine & 0xffff), &lo_total);
      (void)dev::arch::warp_exclusive_sum(static_cast<uint32_t>(mine >> 16), &hi_total);
    }
    if (leader) {
      const uint32_t slot = static_cast<uint32_t>(batch % a.sem.count);
      (void)dev::semaphore_wait_status(a.sem, slot, dev::semaphore_status::free);
      auto* note = static_cast<batch_note*>(dev::semaphore_payload(a.sem, slot));
      note->first = first;
      note->count = n;
      note->value_sum = uint64_t{lo_total} + (uint64_t{hi_total} << 16);
      (void)dev::semaphore_set_status(a.sem, slot, dev::semaphore_status::ready);
    }
    taken += n;
  }
}

struct tx_args {
  dev::eth_txq_handle* txq;
  const uint64_t* frame_addrs;  // frame i's buffer
  uint32_t frames;
  uint32_t frame_bytes;
};

// Every lane/thread of the launch sends frames i = rank, rank + threads, ... at `Scope`
// (grid sharing: several warps/blocks send at once), lanes past the end skipping, then the
// leader commits each round. Thread scope: each thread sends and commits alone.
template <typename Scope>
GDAKI_HD inline void tx_kernel(const tx_args& a, uint32_t rank, uint32_t threads, gdaki::status* result) {
  *result = gdaki::status::ok;
  for (uint32_t base = 0; base < a.frames; base += threads) {
    const uint32_t i = base + rank;
    const bool mine = i < a.frames;
    uint64_t pos = 0;
    const gdaki::status st = dev::eth_txq_send<Scope, dev::sharing::grid>(
        *a.txq, mine ? a.frame_addrs[i] : 0, a.frame_bytes, mine ? dev::eth_send_flags::none : dev::eth_send_flags::skip,
        &pos);
    if (st != gdaki::status::ok) *result = st;
    (void)dev::eth_txq_commit(*a.txq);
  }
}

}  // namespace eth_test
