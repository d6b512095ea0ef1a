// internal: reading a send WQE out of the SQ ring. The NIC fetches WQEBB by WQEBB modulo
// the ring (a WQE may straddle the ring end), so every access goes through unit(i), the
// i-th 16-byte unit of the WQE, masked at the subscript.
#pragma once

#include <cstdint>
#include <cstring>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/wqe.hpp"

namespace gdaki::soft {

class wqe_reader {
 public:
  wqe_reader(const uint8_t* ring, uint32_t log_wqebbs, uint64_t first_wqebb)
      : ring_(ring), unit_mask_((4u << log_wqebbs) - 1u), first_unit_(static_cast<uint32_t>(first_wqebb << 2)) {}

  const uint8_t* unit(uint32_t i) const { return ring_ + (static_cast<uint64_t>((first_unit_ + i) & unit_mask_) << 4); }

  // Copies n bytes starting at byte `off` of the WQE, following the ring.
  void copy_out(uint32_t off, void* dst, uint32_t n) const {
    auto* out = static_cast<uint8_t*>(dst);
    while (n != 0) {
      const uint32_t in_unit = off & 15u;
      const uint32_t chunk = n < 16 - in_unit ? n : 16 - in_unit;
      std::memcpy(out, unit(off >> 4) + in_unit, chunk);
      out += chunk;
      off += chunk;
      n -= chunk;
    }
  }

  template <typename T>
  T read(uint32_t unit_index) const {
    T v;
    std::memcpy(&v, unit(unit_index), sizeof(T));
    return v;
  }

 private:
  const uint8_t* ring_;
  uint32_t unit_mask_;
  uint32_t first_unit_;
};

// One entry of a gather (or READ scatter) list: a pointer segment, or inline bytes that
// live in the WQE at byte offset inline_off. No member initializers on purpose: a
// parsed_wqe holds 30 of them and is built for every WQE; parse_data writes each entry
// it counts in num_sg whole, and nothing reads past num_sg.
struct gather_entry {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
  uint32_t inline_off;
  bool is_inline;
};

inline constexpr uint32_t max_gather = prm::max_ds;

struct parsed_wqe {
  uint8_t opcode = 0;
  uint8_t opmod = 0;
  uint8_t fm_ce_se = 0;
  uint16_t wqe_index = 0;
  uint32_t qpn = 0;
  uint32_t ds = 0;
  uint32_t nbb = 1;
  uint32_t imm_raw = 0;
  uint64_t raddr = 0;
  uint32_t rkey = 0;
  // atomics (host order); masked ones use all four, CS/FA the first two
  uint64_t swap_add = 0, compare = 0, swap_mask = 0, compare_mask = 0;
  uint32_t atomic_size = 0;  // 0 = not an atomic
  gather_entry sg[max_gather];
  uint32_t num_sg = 0;
  uint64_t length = 0;        // message length (sum of sg); atomics: operand size
  uint32_t inline_bytes = 0;  // inline part of length
  bool signaled() const { return (fm_ce_se & prm::ctrl_flags::ce_mask) >= prm::ctrl_flags::cq_update; }
  bool solicited() const { return (fm_ce_se & prm::ctrl_flags::solicited) != 0; }
};

// Reads the control segment only: opcode, DS, WQEBB count (DS 0 counts as one WQEBB so a
// broken WQE can still be stepped over).
void parse_ctrl(const wqe_reader& r, parsed_wqe* w);

// Parses the segments of the opcode. Returns syndrome::none, or local_qp_op (malformed:
// unknown opcode, DS too small for the segments, inline in a READ, inline longer than
// max_inline, bad masked-atomic opmod) or local_length (atomic result size).
prm::syndrome parse_segments(const wqe_reader& r, uint32_t max_inline, parsed_wqe* w);

// Whether an RDMA WRITE of `ds` units whose first data segment has byte_count `bc` (BE
// decoded) is exactly one data segment in one WQEBB, as parse_data would accept it: a
// pointer segment ending the WQE (DS 3), or one inline segment that ends the WQE exactly
// and is within max_inline. The short paths' shape test (parse_one_segment_write,
// fast_write.cpp, run_mapped_short), one rule for all three.
inline bool one_segment_write_shape(uint32_t ds, uint32_t bc, uint32_t max_inline) {
  if ((bc & prm::inline_flag) == 0) return ds == 3;
  const uint32_t len = bc & ~prm::inline_flag;
  return 2 + prm::inline_ds(len) == ds && len <= max_inline;
}

// The commonest WQE, parsed without the general walk: an RDMA WRITE of exactly one data
// segment (a pointer, or inline bytes within max_inline) in one WQEBB. Fills w (after
// parse_ctrl) exactly as parse_segments would and returns true; returns false, with w's
// segment fields unspecified, for any other shape, and parse_segments then decides
// (errors included). Why: parse_segments costs ~110 instructions for this WQE, this ~30.
inline bool parse_one_segment_write(const wqe_reader& r, uint32_t max_inline, parsed_wqe* w) {
  if (w->opcode != static_cast<uint8_t>(prm::send_opcode::rdma_write) || w->ds < 3 || w->ds > 4) return false;
  const auto d = r.read<prm::data_seg>(2);
  const uint32_t bc = prm::from_be(d.byte_count);
  if (!one_segment_write_shape(w->ds, bc, max_inline)) return false;
  gather_entry& e = w->sg[0];
  if (bc & prm::inline_flag) {
    const uint32_t len = bc & ~prm::inline_flag;
    e = gather_entry{0, len, 0, 2 * 16 + 4, true};
    w->inline_bytes = len;
  } else {
    e = gather_entry{prm::from_be(d.addr), bc, prm::from_be(d.lkey), 0, false};
    w->inline_bytes = 0;
  }
  const auto a = r.read<prm::raddr_seg>(1);
  w->raddr = prm::from_be(a.raddr);
  w->rkey = prm::from_be(a.rkey);
  w->num_sg = 1;
  w->length = e.length;
  w->atomic_size = 0;
  return true;
}

}  // namespace gdaki::soft
