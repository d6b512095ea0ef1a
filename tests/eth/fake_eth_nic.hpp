// The NIC's side of a receive queue and a transmit queue for the device-API unit tests,
// without a network: places frames as a NIC does (bytes, then the completion's seq with
// release, only into released slots) and reads committed descriptors.
#pragma once

#include <cstring>
#include <vector>

#include "gdaki/device/eth.hpp"

namespace eth_test {

namespace dev = gdaki::dev;

// Memory and handle of one receive queue.
struct test_rxq {
  std::vector<uint8_t> buffers;
  std::vector<dev::eth_rx_completion> completions;
  dev::eth_rxq_handle h;
  test_rxq(uint32_t slots, uint32_t slot_bytes) : buffers(size_t{slots} * slot_bytes), completions(slots) {
    h.buffers = buffers.data();
    h.completions = completions.data();
    h.slots = slots;
    h.slot_bytes = slot_bytes;
  }
  // Places a frame whose first 8 bytes are `value` (the rest zero). Returns false when
  // the queue has no free slot (a NIC would drop it).
  bool place(uint64_t value, uint32_t bytes = 64) {
    const uint64_t pos = dev::arch::load_relaxed(&h.produced);
    if (pos - dev::arch::load_acquire(&h.released) >= h.slots) return false;
    uint8_t* slot = h.buffers + (pos & (h.slots - 1)) * h.slot_bytes;
    std::memset(slot, 0, bytes);
    std::memcpy(slot, &value, sizeof(value));
    dev::eth_rx_completion& c = h.completions[pos & (h.slots - 1)];
    c.bytes = bytes;
    c.rule = 7;
    dev::arch::store_release(&c.seq, static_cast<uint32_t>(pos + 1));
    dev::arch::store_relaxed(&h.produced, pos + 1);
    return true;
  }
};

struct test_txq {
  std::vector<dev::eth_tx_descriptor> ring;
  dev::eth_txq_handle h;
  explicit test_txq(uint32_t slots) : ring(slots) {
    h.ring = ring.data();
    h.slots = slots;
    h.notify_period = slots / 2;
  }
  // The NIC sends everything committed: advances completed to the last notified one.
  uint64_t complete_committed(uint64_t* done) {
    const uint64_t committed = dev::arch::load_acquire(&h.committed);
    uint64_t last = 0;
    for (; *done < committed; ++*done) {
      if ((ring[*done & (h.slots - 1)].flags & dev::eth_send_flags::notify) != 0) last = *done + 1;
    }
    if (last != 0) dev::arch::store_release(&h.completed, last);
    return committed;
  }
};

}  // namespace eth_test
