// mlx5 raw-packet Ethernet data-path formats: the send WQE (control segment, Ethernet
// segment with the inlined headers the SQ's minimum inline mode asks for, one data
// segment for the rest of the frame) and the receive CQE's Ethernet fields (byte count,
// WQE counter, RSS hash result and type). Header-only, GDAKI_HD: usable from CUDA device
// code and host code. The layouts follow rdma-core's infiniband/mlx5dv.h
// (mlx5_wqe_eth_seg, mlx5_cqe64) and, for the RSS fields that mlx5dv.h leaves reserved,
// Linux's mlx5_cqe64 (rss_hash_result at byte 12, rss_hash_type at byte 16); they are
// checked by tests/unit/prm_layout_test.cpp and tests/unit/eth_wqe_test.cpp.
//
// Used by nothing that reaches a ConnectX yet: the device Ethernet API (device/eth.hpp)
// still drives the soft NIC's queues only (docs/mlx5.md, "Raw-packet Ethernet queues").
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/wqe.hpp"

namespace gdaki::prm {

// Ethernet segment (mlx5_wqe_eth_seg), right after the control segment of a raw-packet
// SEND. inline_hdr_sz bytes of the frame's start are copied from inline_hdr_start on;
// past the segment's 32 bytes they run on through the following 16-byte units.
struct eth_seg {
  be32 rsvd0;
  uint8_t cs_flags;  // eth_cs::l3 | eth_cs::l4 to ask for checksum offload; gdaki sends 0
  uint8_t rsvd1;
  be16 mss;          // LSO only
  be32 rsvd2;
  be16 inline_hdr_sz;
  uint8_t inline_hdr_start[2];
  uint8_t inline_hdr[16];
};
static_assert(sizeof(eth_seg) == 32 && offsetof(eth_seg, cs_flags) == 4 && offsetof(eth_seg, mss) == 6 &&
                  offsetof(eth_seg, inline_hdr_sz) == 12 && offsetof(eth_seg, inline_hdr_start) == 14,
              "mlx5_wqe_eth_seg: inline_hdr_sz at 12, inlined bytes from 14");

namespace eth_cs {
inline constexpr uint8_t l3 = 1u << 6;  // MLX5_ETH_WQE_L3_CSUM
inline constexpr uint8_t l4 = 1u << 7;  // MLX5_ETH_WQE_L4_CSUM
}  // namespace eth_cs

// Bytes of the Ethernet segment before the inlined headers.
inline constexpr uint32_t eth_seg_fixed_bytes = 14;
// rdma-core's L2 inline size (MLX5_ETH_L2_INLINE_HEADER_SIZE): destination and source
// MAC, an 802.1Q tag's room and the ethertype.
inline constexpr uint32_t eth_l2_inline_bytes = 18;
// Largest inline header the builder accepts: L2 with a tag (18) + IPv6 (40) + TCP with
// options (60) = 118, kept within the WQE's 3 WQEBBs.
inline constexpr uint32_t eth_max_inline_bytes = 128;

// The SQ's minimum inline mode (sqc.min_wqe_inline_mode, MLX5_INLINE_MODE_*).
enum class eth_inline_mode : uint8_t { none = 0, l2 = 1, ip = 2, tcp_udp = 3 };

// 16-byte units of an Ethernet segment carrying `inline_bytes` inlined bytes.
GDAKI_HD constexpr uint32_t eth_seg_ds(uint32_t inline_bytes) {
  return (eth_seg_fixed_bytes + inline_bytes + ds_bytes - 1) / ds_bytes;
}
// 16-byte units of a raw-packet SEND of a `len`-byte frame with `inline_bytes` inlined:
// control, Ethernet segment, and one data segment when any byte is left.
GDAKI_HD constexpr uint32_t eth_send_ds(uint32_t inline_bytes, uint32_t len) {
  return 1 + eth_seg_ds(inline_bytes) + (len > inline_bytes ? 1 : 0);
}
GDAKI_HD constexpr uint32_t eth_send_wqebbs(uint32_t inline_bytes, uint32_t len) {
  return wqebbs_for_ds(eth_send_ds(inline_bytes, len));
}

// How many of the frame's first bytes the inline mode requires in the WQE: none 0; l2 18
// (rdma-core's rule, covering one 802.1Q tag); ip adds the IPv4 (IHL * 4) or IPv6 (40)
// header after the L2 header (14, or 18 when tagged); tcp_udp adds the TCP (data offset *
// 4) or UDP (8) header. A frame shorter than that, or not IP where IP is needed, inlines
// what the mode reaches or the whole frame, whichever is less. Capped at
// eth_max_inline_bytes.
GDAKI_HD inline uint32_t eth_min_inline_bytes(eth_inline_mode mode, const uint8_t* frame, uint32_t len);

// Writes a raw-packet SEND of the `len`-byte frame at `frame` (an address the NIC can
// read, and this thread too: the inlined bytes are copied from it) into the send ring
// `ring` of 2^log_wqebbs WQEBBs at WQEBB `start` (free-running; units wrap at the ring
// end, as the NIC fetches them). Control: opcode SEND, WQE index start mod 2^16, sqn,
// DS, fm_ce_se. Ethernet: cs_flags 0, inline_hdr_sz = inline_bytes and those bytes.
// Data: the rest of the frame (addr frame + inline_bytes, lkey), when there is any.
// Returns the WQEBB count, or 0 when inline_bytes > min(len, eth_max_inline_bytes).
GDAKI_HD inline uint32_t write_eth_send(uint8_t* ring, uint32_t log_wqebbs, uint64_t start, uint32_t sqn,
                                       const uint8_t* frame, uint32_t len, uint32_t lkey, uint32_t inline_bytes,
                                       uint8_t fm_ce_se);

// A receive CQE as Linux's mlx5_cqe64 names the Ethernet fields (overlays cqe64).
struct eth_rx_cqe {
  uint8_t rsvd0[12];
  be32 rss_hash_result;
  uint8_t rss_hash_type;  // [3:2] IP: 1 IPv4, 2 IPv6; [7:6] L4: 1 TCP, 2 UDP, 3 IPsec SPI
  uint8_t rsvd17[27];
  be32 byte_cnt;
  uint8_t rsvd48[12];
  be16 wqe_counter;
  uint8_t signature;
  uint8_t op_own;
};
static_assert(sizeof(eth_rx_cqe) == sizeof(cqe64) && offsetof(eth_rx_cqe, rss_hash_result) == 12 &&
                  offsetof(eth_rx_cqe, rss_hash_type) == 16 &&
                  offsetof(eth_rx_cqe, byte_cnt) == offsetof(cqe64, byte_cnt) &&
                  offsetof(eth_rx_cqe, wqe_counter) == offsetof(cqe64, wqe_counter) &&
                  offsetof(eth_rx_cqe, op_own) == offsetof(cqe64, op_own),
              "eth_rx_cqe overlays cqe64 (Linux mlx5_cqe64: rss_hash_result at 12, type at 16)");

namespace rss_htype {
inline constexpr uint8_t ip_mask = 0x3 << 2, ipv4 = 0x1 << 2, ipv6 = 0x2 << 2;
inline constexpr uint8_t l4_mask = 0x3 << 6, tcp = 0x1 << 6, udp = 0x2 << 6, ipsec_spi = 0x3 << 6;
}  // namespace rss_htype

struct eth_rx_completion {
  cqe_opcode opcode;        // resp_send for a received frame; resp_err for an error CQE
  uint32_t byte_count;      // the frame's length
  uint16_t wqe_counter;     // the RQ WQE (ring index, mod 2^16) the frame landed in
  uint32_t rss_hash;        // the Toeplitz result, when the TIR hashed
  uint8_t rss_hash_type;    // rss_htype bits: which fields it hashed
};
GDAKI_HD inline eth_rx_completion decode_eth_rx_cqe(const void* cqe);

// ---- definitions -------------------------------------------------------------------------

GDAKI_HD inline uint32_t eth_min_inline_bytes(eth_inline_mode mode, const uint8_t* frame, uint32_t len) {
  uint32_t need = 0;
  if (mode == eth_inline_mode::none) return 0;
  if (mode == eth_inline_mode::l2) {
    need = eth_l2_inline_bytes;
  } else {
    uint32_t l2 = 14;
    uint16_t type = len >= 14 ? static_cast<uint16_t>((frame[12] << 8) | frame[13]) : 0;
    if (type == 0x8100 && len >= 18) {
      l2 = 18;
      type = static_cast<uint16_t>((frame[16] << 8) | frame[17]);
    }
    uint32_t l3 = 0;
    uint8_t proto = 0;
    if (type == 0x0800 && len >= l2 + 20) {
      l3 = 4u * (frame[l2] & 0x0fu);
      proto = frame[l2 + 9];
    } else if (type == 0x86dd && len >= l2 + 40) {
      l3 = 40;
      proto = frame[l2 + 6];
    }
    need = (l3 == 0 ? eth_l2_inline_bytes : l2 + l3);
    if (mode == eth_inline_mode::tcp_udp && l3 != 0) {
      if (proto == 6 && len >= l2 + l3 + 13) need += 4u * (frame[l2 + l3 + 12] >> 4);
      if (proto == 17) need += 8;
    }
  }
  if (need > len) need = len;
  return need > eth_max_inline_bytes ? eth_max_inline_bytes : need;
}

GDAKI_HD inline uint32_t write_eth_send(uint8_t* ring, uint32_t log_wqebbs, uint64_t start, uint32_t sqn,
                                       const uint8_t* frame, uint32_t len, uint32_t lkey, uint32_t inline_bytes,
                                       uint8_t fm_ce_se) {
  if (inline_bytes > len || inline_bytes > eth_max_inline_bytes) return 0;
  const uint32_t ds = eth_send_ds(inline_bytes, len);
  const uint64_t ring_units = (uint64_t{1} << log_wqebbs) * (wqebb_bytes / ds_bytes);
  const uint64_t first = start * (wqebb_bytes / ds_bytes);
  // Byte b of the WQE, wrapping by 16-byte units at the ring end.
  auto at = [&](uint32_t b) -> uint8_t* {
    return ring + ((first + b / ds_bytes) % ring_units) * ds_bytes + b % ds_bytes;
  };
  auto put = [&](uint32_t b, const void* src, uint32_t n) {
    const auto* s = static_cast<const uint8_t*>(src);
    for (uint32_t i = 0; i < n; ++i) *at(b + i) = s[i];
  };
  // Every unit written whole: zeros first, so reserved bytes and padding are 0.
  for (uint32_t b = 0; b < ds * ds_bytes; ++b) *at(b) = 0;
  const be32 w0 = to_be32(ctrl_word0(0, static_cast<uint16_t>(start), send_opcode::send));
  const be32 w1 = to_be32(ctrl_word1(sqn, ds));
  put(0, &w0, 4);
  put(4, &w1, 4);
  *at(11) = fm_ce_se;
  const uint32_t eth = ds_bytes;
  const be16 isz = to_be16(static_cast<uint16_t>(inline_bytes));
  put(eth + offsetof(eth_seg, inline_hdr_sz), &isz, 2);
  put(eth + eth_seg_fixed_bytes, frame, inline_bytes);
  if (len > inline_bytes) {
    const uint32_t d = eth + eth_seg_ds(inline_bytes) * ds_bytes;
    const be32 bc = to_be32(len - inline_bytes);
    const be32 lk = to_be32(lkey);
    const be64 addr = to_be64(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(frame)) + inline_bytes);
    put(d + offsetof(data_seg, byte_count), &bc, 4);
    put(d + offsetof(data_seg, lkey), &lk, 4);
    put(d + offsetof(data_seg, addr), &addr, 8);
  }
  return wqebbs_for_ds(ds);
}

GDAKI_HD inline eth_rx_completion decode_eth_rx_cqe(const void* cqe) {
  const auto* c = static_cast<const eth_rx_cqe*>(cqe);
  eth_rx_completion r;
  r.opcode = cqe_opcode_of(c->op_own);
  r.byte_count = from_be(c->byte_cnt);
  r.wqe_counter = from_be(c->wqe_counter);
  r.rss_hash = from_be(c->rss_hash_result);
  r.rss_hash_type = c->rss_hash_type;
  return r;
}

}  // namespace gdaki::prm
