// Definitions for gdaki/device/wqe.hpp: wqe_writer's segment writers and one builder per
// WQE kind.
// Internal: not to be included directly; include gdaki/device/wqe.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>
#include <cstring>

namespace gdaki::dev {

// ---- wqe_writer --------------------------------------------------------------------------

GDAKI_HD inline wqe_writer::wqe_writer(const qp_handle& qp, uint64_t start)
    : buf_(qp.sq_buf),
      unit_mask_((4u << qp.log_sq_wqebbs) - 1u),
      first_unit_(static_cast<uint32_t>(start << 2)),
      start_(start),
      qpn_(qp.qpn),
      auto_signal_(qp.auto_signal_wqebbs) {}

GDAKI_HD inline uint8_t* wqe_writer::unit(uint32_t i) const {
  return buf_ + (static_cast<uint64_t>((first_unit_ + i) & unit_mask_) << 4);
}

GDAKI_HD inline void wqe_writer::raddr(uint64_t remote_addr, uint32_t rkey) {
  auto* s = reinterpret_cast<prm::raddr_seg*>(unit(ds_++));
  s->raddr = prm::to_be64(remote_addr);
  s->rkey = prm::to_be32(rkey);
  s->reserved = 0;
}

GDAKI_HD inline void wqe_writer::data(const sge& g) {
  auto* s = reinterpret_cast<prm::data_seg*>(unit(ds_++));
  s->byte_count = prm::to_be32(g.length & ~prm::inline_flag);
  s->lkey = prm::to_be32(g.lkey);
  s->addr = prm::to_be64(g.addr);
}

GDAKI_HD inline void wqe_writer::inline_data(const void* src, uint32_t len) {
  const auto* in = static_cast<const uint8_t*>(src);
  const uint32_t units = prm::inline_ds(len);
  uint8_t* u = unit(ds_);
  reinterpret_cast<prm::inline_seg*>(u)->byte_count = prm::to_be32(prm::inline_flag | len);
  // The payload follows the 4-byte header and is zero-padded to the end of its last
  // 16-byte unit. A unit is contiguous (the ring wraps only between units), so each takes
  // one copy: a byte loop over the ring here cost ~120 instructions per 8-byte inline
  // WRITE on the posting path (callgrind; docs/performance.md).
  uint32_t n = len < 12 ? len : 12;
  std::memcpy(u + 4, in, n);
  std::memset(u + 4 + n, 0, 12 - n);
  for (uint32_t k = 1, done = n; k < units; ++k, done += n) {
    u = unit(ds_ + k);
    n = len - done < 16 ? len - done : 16;
    std::memcpy(u, in + done, n);
    std::memset(u + n, 0, 16 - n);
  }
  ds_ += units;
}

GDAKI_HD inline void wqe_writer::atomic(uint64_t swap_add, uint64_t compare) {
  auto* s = reinterpret_cast<prm::atomic_seg*>(unit(ds_++));
  s->swap_add = prm::to_be64(swap_add);
  s->compare = prm::to_be64(compare);
}

GDAKI_HD inline void wqe_writer::masked_cs32(uint32_t swap, uint32_t compare, uint32_t swap_mask,
                                             uint32_t compare_mask) {
  auto* s = reinterpret_cast<prm::masked_cs32_seg*>(unit(ds_++));
  s->swap = prm::to_be32(swap);
  s->compare = prm::to_be32(compare);
  s->swap_mask = prm::to_be32(swap_mask);
  s->compare_mask = prm::to_be32(compare_mask);
}

GDAKI_HD inline void wqe_writer::masked_cs64(uint64_t swap, uint64_t compare, uint64_t swap_mask,
                                             uint64_t compare_mask) {
  auto* a = reinterpret_cast<prm::be64*>(unit(ds_++));
  a[0] = prm::to_be64(swap);
  a[1] = prm::to_be64(compare);
  auto* b = reinterpret_cast<prm::be64*>(unit(ds_++));
  b[0] = prm::to_be64(swap_mask);
  b[1] = prm::to_be64(compare_mask);
}

GDAKI_HD inline void wqe_writer::masked_fa32(uint32_t add, uint32_t field_boundary) {
  auto* s = reinterpret_cast<prm::masked_fa32_seg*>(unit(ds_++));
  s->add = prm::to_be32(add);
  s->field_boundary = prm::to_be32(field_boundary);
  s->reserved[0] = 0;
  s->reserved[1] = 0;
}

GDAKI_HD inline void wqe_writer::masked_fa64(uint64_t add, uint64_t field_boundary) {
  auto* s = reinterpret_cast<prm::masked_fa64_seg*>(unit(ds_++));
  s->add = prm::to_be64(add);
  s->field_boundary = prm::to_be64(field_boundary);
}

GDAKI_HD inline uint32_t wqe_writer::finish(prm::send_opcode op, uint8_t fm_ce_se, uint32_t imm_raw, uint8_t opmod) {
  const uint32_t nbb = prm::wqebbs_for_ds(ds_);
  if (auto_signals(start_, nbb, auto_signal_) && (fm_ce_se & prm::ctrl_flags::ce_mask) == prm::ctrl_flags::ce_error_only) {
    fm_ce_se |= prm::ctrl_flags::cq_update;
  }
  auto* c = reinterpret_cast<prm::ctrl_seg*>(unit(0));
  c->opmod_idx_opcode = prm::to_be32(prm::ctrl_word0(opmod, static_cast<uint16_t>(start_), op));
  c->qpn_ds = prm::to_be32(prm::ctrl_word1(qpn_, ds_));
  c->signature = 0;
  c->dci_stream_channel_id[0] = 0;
  c->dci_stream_channel_id[1] = 0;
  c->fm_ce_se = fm_ce_se;
  c->imm = imm_raw;
  return nbb;
}

GDAKI_HD constexpr bool wqe_writer::auto_signals(uint64_t start, uint32_t nbb, uint32_t every) {
  return every != 0 && ((start + nbb) & ~uint64_t{every - 1}) != (start & ~uint64_t{every - 1});
}

// ---- One function per WQE kind ----------------------------------------------------------

GDAKI_HD inline uint32_t prepare_nop(const qp_handle& qp, uint64_t start, uint8_t flags) {
  wqe_writer w(qp, start);
  return w.finish(prm::send_opcode::nop, flags);
}

namespace detail {
// WRITE, WRITE with immediate and READ share one layout: ctrl, raddr, data segments.
GDAKI_HD inline uint32_t prepare_raddr_sgl(const qp_handle& qp, uint64_t start, prm::send_opcode op, uint64_t raddr,
                                           uint32_t rkey, const sge* sgl, uint32_t num_sge, uint8_t flags,
                                           uint32_t imm_raw) {
  wqe_writer w(qp, start);
  w.raddr(raddr, rkey);
  for (uint32_t i = 0; i < num_sge; ++i) w.data(sgl[i]);
  return w.finish(op, flags, imm_raw);
}
}  // namespace detail

GDAKI_HD inline uint32_t prepare_write(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                       const sge* sgl, uint32_t num_sge, uint8_t flags) {
  return detail::prepare_raddr_sgl(qp, start, prm::send_opcode::rdma_write, raddr, rkey, sgl, num_sge, flags, 0);
}

GDAKI_HD inline uint32_t prepare_write_imm(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           const sge* sgl, uint32_t num_sge, uint32_t imm_raw, uint8_t flags) {
  return detail::prepare_raddr_sgl(qp, start, prm::send_opcode::rdma_write_imm, raddr, rkey, sgl, num_sge, flags,
                                   imm_raw);
}

GDAKI_HD inline uint32_t prepare_write_inline(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                              const void* data, uint32_t len, uint8_t flags) {
  wqe_writer w(qp, start);
  w.raddr(raddr, rkey);
  w.inline_data(data, len);
  return w.finish(prm::send_opcode::rdma_write, flags);
}

GDAKI_HD inline uint32_t prepare_read(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                      const sge* sgl, uint32_t num_sge, uint8_t flags) {
  return detail::prepare_raddr_sgl(qp, start, prm::send_opcode::rdma_read, raddr, rkey, sgl, num_sge, flags, 0);
}

GDAKI_HD inline uint32_t prepare_atomic_fa(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint64_t add, const sge& result, uint8_t flags) {
  wqe_writer w(qp, start);
  w.raddr(raddr, rkey);
  w.atomic(add, 0);
  w.data(result);
  return w.finish(prm::send_opcode::atomic_fa, flags);
}

GDAKI_HD inline uint32_t prepare_atomic_cs(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint64_t compare, uint64_t swap, const sge& result, uint8_t flags) {
  wqe_writer w(qp, start);
  w.raddr(raddr, rkey);
  w.atomic(swap, compare);
  w.data(result);
  return w.finish(prm::send_opcode::atomic_cs, flags);
}

GDAKI_HD inline uint32_t prepare_masked_cs(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint32_t size, uint64_t compare, uint64_t compare_mask,
                                           uint64_t swap, uint64_t swap_mask, const sge& result, uint8_t flags) {
  wqe_writer w(qp, start);
  w.raddr(raddr, rkey);
  if (size == 8) {
    w.masked_cs64(swap, compare, swap_mask, compare_mask);
  } else {
    w.masked_cs32(static_cast<uint32_t>(swap), static_cast<uint32_t>(compare), static_cast<uint32_t>(swap_mask),
                  static_cast<uint32_t>(compare_mask));
  }
  w.data(result);
  return w.finish(prm::send_opcode::atomic_masked_cs, flags, 0,
                  size == 8 ? prm::opmod_ext_atomic_8b : prm::opmod_ext_atomic_4b);
}

GDAKI_HD inline uint32_t prepare_masked_fa(const qp_handle& qp, uint64_t start, uint64_t raddr, uint32_t rkey,
                                           uint32_t size, uint64_t add, uint64_t field_boundary, const sge& result,
                                           uint8_t flags) {
  wqe_writer w(qp, start);
  w.raddr(raddr, rkey);
  if (size == 8) {
    w.masked_fa64(add, field_boundary);
  } else {
    w.masked_fa32(static_cast<uint32_t>(add), static_cast<uint32_t>(field_boundary));
  }
  w.data(result);
  return w.finish(prm::send_opcode::atomic_masked_fa, flags, 0,
                  size == 8 ? prm::opmod_ext_atomic_8b : prm::opmod_ext_atomic_4b);
}

GDAKI_HD inline uint32_t prepare_send(const qp_handle& qp, uint64_t start, const sge* sgl, uint32_t num_sge,
                                      uint8_t flags) {
  wqe_writer w(qp, start);
  for (uint32_t i = 0; i < num_sge; ++i) w.data(sgl[i]);
  return w.finish(prm::send_opcode::send, flags);
}

GDAKI_HD inline uint32_t prepare_send_imm(const qp_handle& qp, uint64_t start, const sge* sgl, uint32_t num_sge,
                                          uint32_t imm_raw, uint8_t flags) {
  wqe_writer w(qp, start);
  for (uint32_t i = 0; i < num_sge; ++i) w.data(sgl[i]);
  return w.finish(prm::send_opcode::send_imm, flags, imm_raw);
}

GDAKI_HD inline uint32_t prepare_send_inline(const qp_handle& qp, uint64_t start, const void* data, uint32_t len,
                                             uint8_t flags) {
  wqe_writer w(qp, start);
  w.inline_data(data, len);
  return w.finish(prm::send_opcode::send, flags);
}

}  // namespace gdaki::dev
