// Definitions for gdaki/device/twosided.hpp: the SEND builder and its post (direct
// backend only), and the receive side: posting, polling, scatter-to-CQE.
// Internal: not to be included directly; include gdaki/device/twosided.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>
#include <type_traits>

namespace gdaki::dev {

namespace detail {

// One SEND or SEND_IMM WQE: a pointer segment (none for zero bytes) or inline bytes.
struct send_builder {
  const qp_handle* qp;
  local_ptr src;        // pointer payload (inline == nullptr)
  const void* inl;      // inline payload, copied into the WQE
  uint32_t bytes;
  bool has_imm;
  uint32_t imm_raw;     // the immediate's bytes exactly as they go on the wire
  uint8_t ctrl;
  GDAKI_HD void operator()(uint64_t start) const {
    wqe_writer w(*qp, start);
    if (inl != nullptr) {
      w.inline_data(inl, bytes);
    } else if (bytes != 0) {
      w.data(sge{src.addr, bytes, src.lkey});
    }
    w.finish(has_imm ? prm::send_opcode::send_imm : prm::send_opcode::send, ctrl, has_imm ? imm_raw : 0);
  }
  GDAKI_HD uint32_t wqebbs() const {
    return inl != nullptr ? wqebbs_send_inline(bytes) : wqebbs_send(bytes != 0 ? 1u : 0u);
  }
};

// Posts a SEND builder: like post(), but the direct backend only. Every lane of a
// collective call passes the same handle, so all of them see the same backend and return
// together without meeting in an exchange.
template <typename Scope, sharing S>
GDAKI_HD inline status post_send(qp_handle& qp, bool skip, bool bad_args, const send_builder& b, uint64_t* ticket,
                                 uint64_t timeout_ns, bool ring) {
  if (qp.backend != qp_backend::direct) return status::not_supported;
  if constexpr (!std::is_same_v<Scope, scope_thread>) {
    if (!group_shares_the_qp<Scope>(qp)) return status::invalid;
  }
  const uint32_t nbb = skip || bad_args ? 0u : b.wqebbs();
  const status st = post_direct<Scope, S>(qp, nbb, b, ticket, timeout_ns, ring);
  return bad_args ? status::invalid : st;  // a bad lane took part as a skipping one
}

}  // namespace detail

template <typename Scope, sharing S>
GDAKI_HD inline status send(qp_handle& qp, local_ptr src, uint64_t bytes, uint64_t* ticket, uint32_t flags,
                            uint64_t timeout_ns) {
  const detail::send_builder b{&qp, src, nullptr, static_cast<uint32_t>(bytes), false, 0, detail::ctrl_byte(flags)};
  return detail::post_send<Scope, S>(qp, (flags & op_flags::skip) != 0, bytes > max_message_bytes, b, ticket,
                                     timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status send_imm(qp_handle& qp, local_ptr src, uint64_t bytes, uint32_t imm_raw, uint64_t* ticket,
                                uint32_t flags, uint64_t timeout_ns) {
  const detail::send_builder b{&qp, src, nullptr, static_cast<uint32_t>(bytes), true, imm_raw, detail::ctrl_byte(flags)};
  return detail::post_send<Scope, S>(qp, (flags & op_flags::skip) != 0, bytes > max_message_bytes, b, ticket,
                                     timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status send_inline(qp_handle& qp, const void* data, uint32_t len, bool has_imm, uint32_t imm_raw,
                                   uint64_t* ticket, uint32_t flags, uint64_t timeout_ns) {
  const detail::send_builder b{&qp, {0, 0}, data, len, has_imm, imm_raw, detail::ctrl_byte(flags)};
  return detail::post_send<Scope, S>(qp, (flags & op_flags::skip) != 0, len > qp.max_inline, b, ticket, timeout_ns,
                                     detail::rings(flags));
}

GDAKI_HD inline status recv_post(qp_handle& qp, local_ptr dst, uint32_t bytes) {
  const sge g{dst.addr, bytes, dst.lkey};
  return rq_post(qp, &g, bytes != 0 ? 1u : 0u);
}

GDAKI_HD inline status recv_post(srq_handle& srq, local_ptr dst, uint32_t bytes, uint32_t* index) {
  const sge g{dst.addr, bytes, dst.lkey};
  return srq_post(srq, &g, bytes != 0 ? 1u : 0u, index);
}

namespace detail {

// Copies a scatter-to-CQE payload out of the CQE before the claim; discarded if the claim
// fails (see GDAKI_SPECULATIVE_READ, cq.hpp).
GDAKI_HD GDAKI_SPECULATIVE_READ inline void copy_cqe_payload(const prm::cqe64* cqe, uint32_t n, uint8_t* out) {
  const auto* from = reinterpret_cast<const uint8_t*>(cqe);
  for (uint32_t i = 0; i < n; ++i) out[i] = from[i];
}

// Scatters a payload from the CQE into receive WQE `index`'s list, as a NIC would have:
// in order, stopping at the terminator or the stride end. Its slot cannot be reused before
// rq_completed passes it, which the caller does only afterwards. Returns false (local
// length error, rdma-core's IBV_WC_LOC_LEN_ERR) when the list is too short.
GDAKI_HD inline bool scatter_from_cqe(const qp_handle& qp, uint64_t index, const uint8_t* payload, uint32_t n) {
  const srq_handle* q = qp.srq;
  // An SRQ WQE's list follows its 16-byte next segment; it is not freed before this copy.
  const auto* seg = q != nullptr
                        ? reinterpret_cast<const prm::data_seg*>(srq_wqe(*q, static_cast<uint32_t>(index)) +
                                                                 sizeof(prm::srq_next_seg))
                        : reinterpret_cast<const prm::data_seg*>(qp.rq_buf +
                                                                 ((index & (rq_wqes(qp) - 1)) << qp.log_rq_stride));
  const uint32_t slots = q != nullptr ? q->max_sge : (1u << qp.log_rq_stride) / 16;
  uint32_t done = 0;
  for (uint32_t i = 0; i < slots && done < n; ++i) {
    if (prm::from_be(seg[i].lkey) == prm::invalid_lkey) break;
    const uint32_t len = prm::from_be(seg[i].byte_count);
    auto* to = reinterpret_cast<uint8_t*>(prm::from_be(seg[i].addr));
    for (uint32_t k = 0; k < len && done < n; ++k) to[k] = payload[done++];
  }
  return done == n;
}

}  // namespace detail

GDAKI_HD inline status recv_poll(qp_handle& qp, recv_completion* out) {
  cq_handle& cq = *qp.recv_cq;
  completion c;
  uint32_t inline_len = 0;
  for (;;) {
    const uint64_t ci = arch::local::load_acquire(&cq.ci);
    uint32_t tail;
    if (!cqe_ready(cq, ci, &tail)) return status::again;
    const prm::cqe64* cqe = cq.cqes + (ci & (cqe_count(cq) - 1));
    decode_cqe(cqe, tail, &c);
    const auto op_own = static_cast<uint8_t>(tail >> 24);
    inline_len = !prm::cqe_is_error(c.opcode) && (op_own & prm::cqe_format_mask) == prm::cqe_inline_scatter_32
                     ? (c.byte_cnt < prm::cqe_inline_scatter_max ? c.byte_cnt : prm::cqe_inline_scatter_max)
                     : 0;
    if (inline_len != 0) detail::copy_cqe_payload(cqe, inline_len, out->payload);
    if (arch::local::compare_swap(&cq.ci, ci, ci + 1)) {
      cq_publish_ci(cq);
      break;
    }
  }
  out->opcode = c.opcode;
  out->syndrome = c.syndrome;
  out->byte_cnt = c.byte_cnt;
  out->has_imm = c.opcode == prm::cqe_opcode::resp_send_imm || c.opcode == prm::cqe_opcode::resp_wr_imm;
  out->imm_raw = out->has_imm ? c.imm_raw : 0;
  out->solicited = c.solicited;
  out->src_qpn = c.src_qpn;
  // An SRQ's CQE names its WQE by index (the free list reuses them in any order).
  out->index = qp.srq != nullptr ? c.wqe_counter : widen16(arch::local::load_acquire(&qp.rq_ready), c.wqe_counter);
  out->payload_in_cqe = inline_len != 0;
  if (inline_len != 0 && !detail::scatter_from_cqe(qp, out->index, out->payload, inline_len)) {
    out->opcode = prm::cqe_opcode::resp_err;
    out->syndrome = prm::syndrome::local_length;
  }
  if (qp.srq != nullptr) {
    srq_free(*qp.srq, static_cast<uint32_t>(out->index));
  } else {
    arch::local::fetch_max(&qp.rq_completed, out->index + 1);
  }
  return out->syndrome == prm::syndrome::none ? status::ok : status::io_error;
}

GDAKI_HD inline status recv_wait(qp_handle& qp, recv_completion* out, uint64_t timeout_ns) {
  return detail::poll_until([&] { return recv_poll(qp, out); }, timeout_ns);
}

}  // namespace gdaki::dev
