// Building mlx5 send WQEs in the SQ ring. A WQE is written in 16-byte units starting at a
// reserved WQEBB; units wrap at the ring end (a WQE may straddle it: the NIC fetches
// WQEBB by WQEBB modulo the ring). The control segment is written last, once DS is known.
// Nothing here publishes anything: see sq.hpp for reserve / mark ready / submit.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/prm/wqe.hpp"

namespace gdaki::dev {

// One local buffer: address, length in bytes, lkey.
struct sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

// WQE sizes in WQEBBs, for reserving before building.
// Defined here, not in impl/: one-line constexpr formulas that are the size contract
// itself, usable in a caller's constant expressions (array bounds, static_assert).
GDAKI_HD constexpr uint32_t wqebbs_nop() { return 1; }
GDAKI_HD constexpr uint32_t wqebbs_rdma(uint32_t num_sge) { return prm::wqebbs_for_ds(2 + num_sge); }
GDAKI_HD constexpr uint32_t wqebbs_write_inline(uint32_t len) {
  return prm::wqebbs_for_ds(2 + prm::inline_ds(len));
}
GDAKI_HD constexpr uint32_t wqebbs_send(uint32_t num_sge) { return prm::wqebbs_for_ds(1 + num_sge); }
GDAKI_HD constexpr uint32_t wqebbs_send_inline(uint32_t len) {
  return prm::wqebbs_for_ds(1 + prm::inline_ds(len));
}
GDAKI_HD constexpr uint32_t wqebbs_atomic() { return 1; }
GDAKI_HD constexpr uint32_t wqebbs_masked_cs(uint32_t size) { return size == 8 ? 2 : 1; }
GDAKI_HD constexpr uint32_t wqebbs_masked_fa() { return 1; }

// Writes one WQE, unit by unit, at WQEBB `start` (a free-running counter) of qp's SQ.
class wqe_writer {
 public:
  // Starts a WQE at WQEBB `start` of qp's SQ; unit 0 is kept for the control segment.
  GDAKI_HD inline wqe_writer(const qp_handle& qp, uint64_t start);

  // Address of 16-byte unit i of this WQE (unit 0 is the control segment).
  GDAKI_HD inline uint8_t* unit(uint32_t i) const;

  // Appends the remote address segment: remote_addr and rkey.
  GDAKI_HD inline void raddr(uint64_t remote_addr, uint32_t rkey);

  // Appends a data (pointer) segment for g.
  GDAKI_HD inline void data(const sge& g);

  // Inline payload: BE32(0x80000000 | len) then the raw bytes, padded with zeros to 16.
  GDAKI_HD inline void inline_data(const void* src, uint32_t len);

  // Appends the atomic segment: swap_add (the swap value or the addend), compare.
  GDAKI_HD inline void atomic(uint64_t swap_add, uint64_t compare);

  // Appends a 4-byte masked compare-and-swap segment.
  GDAKI_HD inline void masked_cs32(uint32_t swap, uint32_t compare, uint32_t swap_mask, uint32_t compare_mask);

  // 32 bytes: two units, each written separately because they may sit on both sides of
  // the ring end.
  GDAKI_HD inline void masked_cs64(uint64_t swap, uint64_t compare, uint64_t swap_mask, uint64_t compare_mask);

  // Appends a 4-byte masked fetch-and-add segment.
  GDAKI_HD inline void masked_fa32(uint32_t add, uint32_t field_boundary);

  // Appends an 8-byte masked fetch-and-add segment.
  GDAKI_HD inline void masked_fa64(uint64_t add, uint64_t field_boundary);

  // Writes the control segment now that DS is known. imm_raw is stored unswapped.
  // Returns the number of WQEBBs the WQE occupies.
  GDAKI_HD inline uint32_t finish(prm::send_opcode op, uint8_t fm_ce_se, uint32_t imm_raw = 0, uint8_t opmod = 0);

  // Whether a WQE of nbb WQEBBs at `start` covers a WQEBB k * every - 1 (every: a power of
  // two, 0 = never). Decided by position alone, so no shared counter is touched and any
  // window of `every` consecutive WQEBBs holds the end of one signalled WQE.
  GDAKI_HD static constexpr bool auto_signals(uint64_t start, uint32_t nbb, uint32_t every);

  // The WQE's size so far, in 16-byte units (control segment included).
  GDAKI_HD uint32_t ds() const { return ds_; }

 private:
  uint8_t* buf_;
  uint32_t unit_mask_;
  uint32_t first_unit_;
  uint64_t start_;
  uint32_t qpn_;
  uint32_t auto_signal_;
  uint32_t ds_ = 1;  // unit 0 is reserved for the control segment
};

// ---------------------------------------------------------------------------------------
// One function per WQE kind. Each writes the WQE at WQEBB `start` (already reserved, with
// room for the size given by the matching wqebbs_* function) and returns its WQEBB count.
// flags is the fm_ce_se byte (prm::ctrl_flags). Nothing is published.
// ---------------------------------------------------------------------------------------

GDAKI_HD inline uint32_t prepare_nop(const qp_handle& qp, uint64_t start, uint8_t flags);

// RDMA WRITE (or WRITE_IMM when has_imm) gathering num_sge local buffers. A zero-byte write
// is ctrl + raddr only (num_sge = 0).
GDAKI_HD inline uint32_t prepare_write(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                       const sge* sgl, uint32_t num_sge, uint8_t flags);

GDAKI_HD inline uint32_t prepare_write_imm(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           const sge* sgl, uint32_t num_sge, uint32_t imm_raw, uint8_t flags);

GDAKI_HD inline uint32_t prepare_write_inline(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                              const void* data, uint32_t len, uint8_t flags);

GDAKI_HD inline uint32_t prepare_read(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                      const sge* sgl, uint32_t num_sge, uint8_t flags);

// 8-byte fetch-and-add; the original remote value lands in `result` (8 bytes).
GDAKI_HD inline uint32_t prepare_atomic_fa(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint64_t add, const sge& result, uint8_t flags);

// 8-byte compare-and-swap: swaps in `swap` when the remote word equals `compare`.
GDAKI_HD inline uint32_t prepare_atomic_cs(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint64_t compare, uint64_t swap, const sge& result, uint8_t flags);

// Masked compare-and-swap of a 4- or 8-byte word.
GDAKI_HD inline uint32_t prepare_masked_cs(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint32_t size, uint64_t compare, uint64_t compare_mask,
                                           uint64_t swap, uint64_t swap_mask, const sge& result, uint8_t flags);

// Masked fetch-and-add of a 4- or 8-byte word; field_boundary marks field top bits.
GDAKI_HD inline uint32_t prepare_masked_fa(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint32_t size, uint64_t add, uint64_t field_boundary, const sge& result,
                                           uint8_t flags);

GDAKI_HD inline uint32_t prepare_send(const qp_handle& qp, uint64_t start, const sge* sgl, uint32_t num_sge,
                                      uint8_t flags);

GDAKI_HD inline uint32_t prepare_send_imm(const qp_handle& qp, uint64_t start, const sge* sgl, uint32_t num_sge,
                                          uint32_t imm_raw, uint8_t flags);

GDAKI_HD inline uint32_t prepare_send_inline(const qp_handle& qp, uint64_t start, const void* data, uint32_t len,
                                             uint8_t flags);

}  // namespace gdaki::dev

#include "gdaki/device/impl/wqe.hpp"  // the definitions of the functions declared above
