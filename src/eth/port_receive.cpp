// The port's receive side: frames from the kernel's TPACKET_V3 ring, classified, placed
// into their receive queue as a NIC places a packet: bytes into the slot, then the
// completion entry, its `seq` word last with release.
#include <linux/if_packet.h>

#include <algorithm>
#include <cstring>

#include "eth/port_internal.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/eth/frame_fields.hpp"

namespace gdaki::eth {
namespace {

namespace arch = dev::arch;

// Places `frame` into q, re-inserting a tag the capture layer stripped (a NIC without VLAN
// stripping delivers the tag in the frame, and rules have matched on it). Counts drops.
void place(rx_queue& rq, const uint8_t* frame, uint32_t len, const uint16_t* tag_tpid_tci, const verdict& v,
           std::atomic<uint64_t>& placed) {
  dev::eth_rxq_handle& q = rq.h;
  if (len < 12) tag_tpid_tci = nullptr;  // no room for a tag after the MACs: place as captured
  const uint32_t total = len + (tag_tpid_tci != nullptr ? 4 : 0);
  if (total > q.slot_bytes) {
    arch::store_relaxed(&q.dropped_oversize, arch::load_relaxed(&q.dropped_oversize) + 1);
    return;
  }
  const uint64_t pos = arch::load_relaxed(&q.produced);
  // Acquire pairs with eth_rxq_release: the consumer is done reading a slot before we
  // overwrite it.
  if (pos - arch::load_acquire(&q.released) >= q.slots) {
    arch::store_relaxed(&q.dropped_full, arch::load_relaxed(&q.dropped_full) + 1);
    return;
  }
  const uint64_t slot = pos & (q.slots - 1);
  uint8_t* dst = q.buffers + slot * q.slot_bytes;
  if (tag_tpid_tci != nullptr) {
    std::memcpy(dst, frame, 12);
    const uint8_t tag[4] = {static_cast<uint8_t>(tag_tpid_tci[0] >> 8), static_cast<uint8_t>(tag_tpid_tci[0]),
                            static_cast<uint8_t>(tag_tpid_tci[1] >> 8), static_cast<uint8_t>(tag_tpid_tci[1])};
    std::memcpy(dst + 12, tag, 4);
    std::memcpy(dst + 16, frame + 12, len - 12);
  } else {
    std::memcpy(dst, frame, len);
  }
  dev::eth_rx_completion& c = q.completions[slot];
  c.bytes = total;
  c.hash = v.hash;
  c.rule = v.rule;
  // Release: the frame bytes and the words above before the entry reads as valid
  // (eth_rx_ready acquires seq).
  arch::store_release(&c.seq, static_cast<uint32_t>(pos + 1));
  arch::store_relaxed(&q.produced, pos + 1);
  placed.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

size_t packet_port::impl::receive_blocks(size_t budget) {
  size_t taken = 0;
  while (taken < budget) {
    auto* block = reinterpret_cast<tpacket_block_desc*>(ring + size_t{next_block} * cfg.capture_block_bytes);
    if (block_cursor == nullptr) {
      // Acquire pairs with the kernel's release of the block (smp_wmb before the status).
      if ((arch::load_acquire(&block->hdr.bh1.block_status) & TP_STATUS_USER) == 0) return taken;
      block_snapshot = steering->current();  // one rule list per block
      block_cursor = reinterpret_cast<uint8_t*>(block) + block->hdr.bh1.offset_to_first_pkt;
      block_left = block->hdr.bh1.num_pkts;
    }
    // Within the budget, so a CPU receiver driving the port gets its queue back between
    // chunks (a 1 MiB block holds about 10,000 small frames, more than a queue's slots).
    const size_t n = std::min<size_t>(block_left, budget - taken);
    for (size_t i = 0; i < n; ++i) {
      auto* h = reinterpret_cast<tpacket3_hdr*>(block_cursor);
      const uint8_t* frame = block_cursor + h->tp_mac;
      const uint32_t len = h->tp_snaplen;
      std::optional<uint16_t> tci;
      uint16_t tag[2] = {ethertype_vlan, 0};
      if ((h->tp_status & TP_STATUS_VLAN_VALID) != 0) {
        tci = h->hv1.tp_vlan_tci;
        tag[1] = h->hv1.tp_vlan_tci;
        if ((h->tp_status & TP_STATUS_VLAN_TPID_VALID) != 0) tag[0] = h->hv1.tp_vlan_tpid;
      }
      const frame_fields f = parse_frame(std::span<const uint8_t>(frame, len), tci);
      const verdict v = steering_table::classify(*block_snapshot, f);
      if (v.drop) {
        rule_drops.fetch_add(1, std::memory_order_relaxed);
      } else {
        place(*rx[v.queue], frame, len, tci ? tag : nullptr, v, placed);
      }
      block_cursor += h->tp_next_offset;
    }
    block_left -= n;
    frames_seen.fetch_add(n, std::memory_order_relaxed);
    taken += n;
    if (block_left == 0) {
      block_cursor = nullptr;
      block_snapshot.reset();
      // Release: our reads of the block are done before the kernel refills it.
      arch::store_release(&block->hdr.bh1.block_status, static_cast<uint32_t>(TP_STATUS_KERNEL));
      next_block = (next_block + 1) % cfg.capture_blocks;
    }
  }
  return taken;
}

size_t packet_port::impl::try_receive(size_t budget) {
  if (rx_busy.test_and_set(std::memory_order_acquire)) return 0;
  const size_t n = receive_blocks(budget);
  rx_busy.clear(std::memory_order_release);
  return n;
}

}  // namespace gdaki::eth
