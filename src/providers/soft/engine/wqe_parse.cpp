// Parsing send WQEs (PRM 2): control segment, then the segments the opcode defines.
#include "wqe_parse.hpp"

#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/op_traits.hpp"

namespace gdaki::soft {

using prm::send_opcode;
using prm::syndrome;

void parse_ctrl(const wqe_reader& r, parsed_wqe* w) {
  const auto c = r.read<prm::ctrl_seg>(0);
  const uint32_t w0 = prm::from_be(c.opmod_idx_opcode);
  const uint32_t w1 = prm::from_be(c.qpn_ds);
  w->opcode = static_cast<uint8_t>(w0 & 0xff);
  w->wqe_index = static_cast<uint16_t>(w0 >> 8);
  w->opmod = static_cast<uint8_t>(w0 >> 24);
  w->qpn = w1 >> 8;
  w->ds = w1 & 0x3f;
  w->nbb = w->ds == 0 ? 1 : prm::wqebbs_for_ds(w->ds);
  w->fm_ce_se = c.fm_ce_se;
  w->imm_raw = c.imm;
}

namespace {

// Data segments (pointer or inline) from unit `from` to the end of the WQE.
syndrome parse_data(const wqe_reader& r, uint32_t from, bool allow_inline, parsed_wqe* w) {
  uint32_t u = from;
  while (u < w->ds) {
    const auto d = r.read<prm::data_seg>(u);
    const uint32_t bc = prm::from_be(d.byte_count);
    gather_entry& e = w->sg[w->num_sg++];
    e = gather_entry{0, 0, 0, 0, false};
    if (bc & prm::inline_flag) {
      if (!allow_inline) return syndrome::local_qp_op;
      const uint32_t len = bc & ~prm::inline_flag;
      const uint32_t units = prm::inline_ds(len);
      if (u + units > w->ds) return syndrome::local_qp_op;  // payload runs past DS
      e.is_inline = true;
      e.length = len;
      e.inline_off = u * 16 + 4;
      w->inline_bytes += len;
      u += units;
    } else {
      e.length = bc;
      e.lkey = prm::from_be(d.lkey);
      e.addr = prm::from_be(d.addr);
      ++u;
    }
    w->length += e.length;
  }
  return syndrome::none;
}

syndrome parse_raddr(const wqe_reader& r, parsed_wqe* w) {
  if (w->ds < 2) return syndrome::local_qp_op;
  const auto a = r.read<prm::raddr_seg>(1);
  w->raddr = prm::from_be(a.raddr);
  w->rkey = prm::from_be(a.rkey);
  return syndrome::none;
}

// The result segment of an atomic: exactly one pointer segment of the operand size.
syndrome parse_atomic_result(const wqe_reader& r, uint32_t unit, parsed_wqe* w) {
  if (w->ds != unit + 1) return syndrome::local_qp_op;
  const syndrome s = parse_data(r, unit, false, w);
  if (s != syndrome::none) return s;
  if (w->sg[0].length != w->atomic_size) return syndrome::local_length;
  w->length = w->atomic_size;
  return syndrome::none;
}

}  // namespace

syndrome parse_segments(const wqe_reader& r, uint32_t max_inline, parsed_wqe* w) {
  if (w->ds == 0) return syndrome::local_qp_op;
  w->num_sg = 0;
  w->length = 0;
  w->inline_bytes = 0;
  w->atomic_size = 0;
  syndrome s = syndrome::none;
  // The segment layout comes from the opcode's traits (prm/op_traits.hpp); a new opcode of
  // an existing kind needs no case here.
  const prm::op_traits t = prm::traits_of(w->opcode);
  switch (t.kind) {
    case prm::op_kind::nop:
      return syndrome::none;
    case prm::op_kind::write:
    case prm::op_kind::read:
      s = parse_raddr(r, w);
      if (s == syndrome::none) s = parse_data(r, 2, t.inline_allowed, w);
      break;
    case prm::op_kind::send:
      s = parse_data(r, 1, t.inline_allowed, w);
      break;
    case prm::op_kind::atomic: {
      s = parse_raddr(r, w);
      if (s != syndrome::none || w->ds < 3) return syndrome::local_qp_op;
      const auto a = r.read<prm::atomic_seg>(2);
      w->swap_add = prm::from_be(a.swap_add);
      w->compare = prm::from_be(a.compare);
      w->atomic_size = 8;
      s = parse_atomic_result(r, 3, w);
      break;
    }
    case prm::op_kind::masked_atomic: {
      if (w->opmod != prm::opmod_ext_atomic_4b && w->opmod != prm::opmod_ext_atomic_8b) return syndrome::local_qp_op;
      s = parse_raddr(r, w);
      if (s != syndrome::none || w->ds < 3) return syndrome::local_qp_op;
      w->atomic_size = w->opmod == prm::opmod_ext_atomic_8b ? 8 : 4;
      const bool cs = w->opcode == static_cast<uint8_t>(send_opcode::atomic_masked_cs);
      uint32_t next = 3;
      if (cs && w->atomic_size == 8) {
        const auto a = r.read<prm::atomic_seg>(2);  // swap, compare
        const auto b = r.read<prm::atomic_seg>(3);  // swap_mask, compare_mask
        w->swap_add = prm::from_be(a.swap_add);
        w->compare = prm::from_be(a.compare);
        w->swap_mask = prm::from_be(b.swap_add);
        w->compare_mask = prm::from_be(b.compare);
        next = 4;
      } else if (cs) {
        const auto a = r.read<prm::masked_cs32_seg>(2);
        w->swap_add = prm::from_be(a.swap);
        w->compare = prm::from_be(a.compare);
        w->swap_mask = prm::from_be(a.swap_mask);
        w->compare_mask = prm::from_be(a.compare_mask);
      } else if (w->atomic_size == 8) {
        const auto a = r.read<prm::masked_fa64_seg>(2);
        w->swap_add = prm::from_be(a.add);
        w->compare = prm::from_be(a.field_boundary);  // compare holds the field boundary
      } else {
        const auto a = r.read<prm::masked_fa32_seg>(2);
        w->swap_add = prm::from_be(a.add);
        w->compare = prm::from_be(a.field_boundary);
      }
      if (w->ds <= next) return syndrome::local_qp_op;
      s = parse_atomic_result(r, next, w);
      break;
    }
    case prm::op_kind::unsupported:
      return syndrome::local_qp_op;  // SEND_INVAL, WAIT, UMR, ...: not modelled
  }
  if (s == syndrome::none && w->inline_bytes > max_inline) return syndrome::local_qp_op;
  return s;
}

}  // namespace gdaki::soft
