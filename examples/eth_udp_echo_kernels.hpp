// The kernels of the UDP echo pipeline (eth_udp_echo.cpp): a receive kernel hands batches
// of frames to a send kernel through a semaphore; the send kernel turns each UDP/IPv4
// frame into its echo and sends it. One warp each. They run on CPU threads through the
// host grid launcher, and compile as CUDA kernels (tests/eth/eth_kernels_check.cu).
#pragma once

#include <cstdint>

#include "gdaki/device/eth.hpp"
#include "gdaki/device/semaphore.hpp"

struct echo_args {
  gdaki::dev::eth_rxq_handle* rxq;  // frames steered to the echo port
  gdaki::dev::eth_txq_handle* txq;
  gdaki::dev::semaphore_handle sem; // one slot per batch in flight; payload: echo_batch
  uint8_t* tx_buffers;              // 32 frames of tx_frame_bytes: one batch
  uint32_t tx_frame_bytes;
  uint64_t frames;                  // both kernels stop after this many
};

struct echo_batch {
  uint64_t first;  // first receive-queue position of the batch
  uint32_t count;
  uint32_t reserved;
};

// Receive loop: up to 32 frames per warp call, handed on as one batch per semaphore slot.
GDAKI_HD inline void echo_receive_kernel(const echo_args& a) {
  namespace dev = gdaki::dev;
  uint64_t got = 0;
  for (uint32_t batch = 0; got < a.frames;) {
    uint64_t first = 0;
    uint32_t n = 0;
    (void)dev::eth_rxq_receive<dev::scope_warp>(*a.rxq, 32, 1'000'000, &first, &n);
    if (n == 0) continue;
    if (dev::arch::lane_id() == 0) {
      const uint32_t slot = batch % a.sem.count;
      (void)dev::semaphore_wait_status(a.sem, slot, dev::semaphore_status::free);
      auto* b = static_cast<echo_batch*>(dev::semaphore_payload(a.sem, slot));
      b->first = first;
      b->count = n;
      (void)dev::semaphore_set_status(a.sem, slot, dev::semaphore_status::ready);  // release: the payload first
    }
    ++batch;
    got += n;
  }
}

// Swaps the 2-, 4- or 6-byte fields at x and y.
GDAKI_HD inline void swap_bytes(uint8_t* f, uint32_t x, uint32_t y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t t = f[x + i];
    f[x + i] = f[y + i];
    f[y + i] = t;
  }
}

// Send loop: lane i echoes frame first + i of each batch (MACs, IPv4 addresses and UDP
// ports swapped; UDP checksum 0, "none", as the swap keeps the IP header checksum valid),
// the warp sends them with one reservation, commits, waits for the last one, then returns
// the receive slots and the semaphore slot.
GDAKI_HD inline void echo_send_kernel(const echo_args& a) {
  namespace dev = gdaki::dev;
  const uint32_t lane = dev::arch::lane_id();
  uint64_t done = 0;
  for (uint32_t batch = 0; done < a.frames; ++batch) {
    const uint32_t slot = batch % a.sem.count;
    (void)dev::semaphore_wait_status(a.sem, slot, dev::semaphore_status::ready);  // acquire: the payload
    const echo_batch b = *static_cast<const echo_batch*>(dev::semaphore_payload(a.sem, slot));
    bool mine = false;
    uint32_t bytes = 0;
    uint8_t* out = a.tx_buffers + lane * a.tx_frame_bytes;
    if (lane < b.count) {
      const uint8_t* in = dev::eth_rxq_frame(*a.rxq, b.first + lane, &bytes);
      // Only plain UDP/IPv4 without options fits the swap below.
      mine = bytes >= 42 && bytes <= a.tx_frame_bytes && in[12] == 0x08 && in[13] == 0x00 && in[14] == 0x45 &&
             in[23] == 17;
      if (mine) {
        for (uint32_t i = 0; i < bytes; ++i) out[i] = in[i];
        swap_bytes(out, 0, 6, 6);    // MAC addresses
        swap_bytes(out, 26, 30, 4);  // IPv4 addresses
        swap_bytes(out, 34, 36, 2);  // UDP ports
        out[40] = out[41] = 0;       // UDP checksum: none
      }
    }
    uint64_t pos = 0;
    (void)dev::eth_txq_send<dev::scope_warp>(*a.txq, reinterpret_cast<uint64_t>(out), bytes,
                                             mine ? dev::eth_send_flags::notify : dev::eth_send_flags::skip, &pos);
    (void)dev::eth_txq_commit(*a.txq);
    // Each echo asked for a completion: once every lane's has come, the batch's tx
    // buffers and its receive slots are free again.
    if (mine) (void)dev::eth_txq_wait(*a.txq, pos);
    dev::arch::warp_sync();
    if (lane == 0) {
      (void)dev::eth_rxq_release(*a.rxq, b.first, b.count);
      (void)dev::semaphore_set_status(a.sem, slot, dev::semaphore_status::free);
    }
    done += b.count;
  }
}
