// internal: the responder's logic, written once for every wire. `X` moves the bytes:
//   bool place(const dst_piece* d, uint32_t nd)   the message payload into d[0..nd)
//   void read_out(const uint8_t* from, uint64_t n) READ data back to the requester
//   void atomic_result(uint64_t old)               an atomic's original value (host order)
// The in-process wire copies from the requester's WQE and buffers (responder.cpp); the
// remote wires read from a socket or copy across processes (wire/). Every check runs
// before X is asked to move anything, so a failed check writes nothing.
#pragma once

#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "cqe_writer.hpp"
#include "executor.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/op_traits.hpp"
#include "gdaki/verbs/mr.hpp"
#include "placement.hpp"
#include "responder.hpp"

namespace gdaki::soft::resp_detail {

// Whether a QP's access flags grant a remote right (SEND needs none: every QP takes it).
constexpr bool qp_grants(uint32_t access_flags, prm::remote_right r) {
  switch (r) {
    case prm::remote_right::write: return (access_flags & verbs::access::remote_write) != 0;
    case prm::remote_right::read: return (access_flags & verbs::access::remote_read) != 0;
    case prm::remote_right::atomic: return (access_flags & verbs::access::remote_atomic) != 0;
    case prm::remote_right::none: break;
  }
  return true;
}

// The MR `rkey` names, if it is live, in the responder's PD, covers [addr, addr + len) and
// grants `need`; else nullptr.
inline const mr_entry* check_rkey(const soft_qp& resp, uint32_t rkey, uint64_t addr, uint64_t len, uint32_t need) {
  const mr_entry* e = keys().find(rkey, true);
  if (e == nullptr || e->pdn != resp.pd->pdn || !(e->access & need)) return nullptr;
  if (addr < e->addr || len > e->length || addr - e->addr > e->length - len) return nullptr;
  return e;
}

inline respond_result remote_error(soft_qp& resp, prm::syndrome s) {
  enter_error_locked_resp(resp);
  return {s, false, 0};
}

inline bool rq_has_wqe(const soft_qp& resp) {
  const uint32_t dbr = prm::from_be(prm::be32{dev::arch::load_acquire(&resp.dbrec->rcv.raw)}) & 0xffff;
  return ((dbr - static_cast<uint32_t>(resp.rq_ci)) & 0xffff) != 0;
}

// The receive WQE a message lands in: the next of the QP's RQ, or one taken from its SRQ.
struct recv_wqe {
  const prm::data_seg* seg = nullptr;  // its scatter list
  uint32_t slots = 0;                  // data segments it can hold
  uint16_t counter = 0;                // what the CQE's wqe_counter says
};

// Takes the receive WQE for a message arriving at resp; false when there is none (RNR).
// RQ: the next WQE, consumed by complete_recv. SRQ: claimed here, under the SRQ's lock, so
// that the responder of another QP on the same SRQ cannot take it too; the next one is
// the claimed WQE's link (srq_next_seg), as the NIC follows the list the posters keep.
inline bool take_recv(soft_qp& resp, recv_wqe* out) {
  if (resp.srq == nullptr) {
    if (!rq_has_wqe(resp)) return false;
    out->slots = (1u << resp.log_rq_stride) / 16;
    out->seg = reinterpret_cast<const prm::data_seg*>(resp.rq + ((resp.rq_ci & (resp.rq_wqes() - 1)) << resp.log_rq_stride));
    out->counter = static_cast<uint16_t>(resp.rq_ci);
    return true;
  }
  soft_srq& q = *resp.srq;
  std::lock_guard lk(q.mu);
  // Acquire: the WQE's bytes were written before the DBR word that counts it (srq_post).
  const uint32_t dbr = prm::from_be(prm::be32{dev::arch::load_acquire(&q.dbrec->rcv.raw)}) & 0xffff;
  if (((dbr - static_cast<uint32_t>(q.taken)) & 0xffff) == 0) return false;
  const uint8_t* w = q.wqes + (static_cast<size_t>(q.next_wqe) << q.log_stride);
  out->seg = reinterpret_cast<const prm::data_seg*>(w + sizeof(prm::srq_next_seg));
  out->slots = q.max_sge;
  out->counter = static_cast<uint16_t>(q.next_wqe);
  q.next_wqe = prm::from_be(reinterpret_cast<const prm::srq_next_seg*>(w)->next_wqe_index) & ((1u << q.log_n) - 1);
  ++q.taken;
  return true;
}

// What a receive CQE puts in srqn_uidx: the QP's user index when it has one (CQE version
// 1, where the user index names the QP and the QP its SRQ), else for a QP on an SRQ the
// SRQ's number (version 0: rdma-core's poller looks the SRQ up by it).
inline uint32_t recv_srqn_uidx(const soft_qp& resp) {
  return resp.srq != nullptr && resp.user_index == 0 ? resp.srq->srqn : resp.user_index;
}

// Responder CQE for a consumed receive WQE (success or error); `payload`: the message's
// bytes when the QP scatters it to the CQE.
inline void complete_recv(uint32_t src_qpn, soft_qp& resp, const recv_wqe& rw, const parsed_wqe& w,
                          prm::cqe_opcode op, prm::syndrome s, const uint8_t* payload = nullptr) {
  cqe_fields f;
  f.opcode = op;
  f.synd = s;
  f.qpn = resp.qpn;
  f.src_qpn = src_qpn;
  f.user_index = recv_srqn_uidx(resp);
  f.wqe_counter = rw.counter;
  if (s == prm::syndrome::none) {
    f.byte_cnt = static_cast<uint32_t>(w.length);
    f.solicited = w.solicited();
    if (op == prm::cqe_opcode::resp_wr_imm || op == prm::cqe_opcode::resp_send_imm) f.imm_raw = w.imm_raw;
    f.inline_payload = payload;
  }
  if (resp.srq == nullptr) {
    ++resp.rq_ci;
    resp.rq_ci_seen.store(resp.rq_ci, std::memory_order_release);
  }
  if (write_cqe(*resp.rcq, f) == cq_write::overrun) enter_error_locked_resp(resp);
}

// The bytes could not be moved (the wire failed): the QP goes to ERR. An RQ WQE was not
// consumed and is flushed with the rest; an SRQ WQE was taken already and must come back
// to its poster, so it completes here as flushed (the SRQ's other WQEs stay).
inline respond_result abandon_recv(uint32_t src_qpn, soft_qp& resp, const recv_wqe& rw, const parsed_wqe& w) {
  if (resp.srq != nullptr) complete_recv(src_qpn, resp, rw, w, prm::cqe_opcode::resp_err, prm::syndrome::wr_flush);
  return remote_error(resp, prm::syndrome::remote_op);
}

template <class X>
respond_result do_write(uint32_t src_qpn, const parsed_wqe& w, soft_qp& resp, X& x) {
  using prm::syndrome;
  // A zero-length RDMA WRITE carries no data, so its rkey is not checked (IBA 9.7.4.1.3).
  if (w.length != 0 && check_rkey(resp, w.rkey, w.raddr, w.length, verbs::access::remote_write) == nullptr) {
    return remote_error(resp, syndrome::remote_access);
  }
  const bool imm = prm::traits_of(w.opcode).consumes_recv;
  recv_wqe rw;
  if (imm && !take_recv(resp, &rw)) return {syndrome::none, true, resp.attr.min_rnr_timer};
  if (w.length != 0) {
    const dst_piece d{reinterpret_cast<uint8_t*>(w.raddr), w.length};
    if (!x.place(&d, 1)) return imm ? abandon_recv(src_qpn, resp, rw, w) : remote_error(resp, syndrome::remote_op);
    placement_done();
  }
  // WRITE_IMM consumes a receive WQE without scattering into it.
  if (imm) complete_recv(src_qpn, resp, rw, w, prm::cqe_opcode::resp_wr_imm, syndrome::none);
  return {};
}

template <class X>
respond_result do_send(uint32_t src_qpn, const parsed_wqe& w, soft_qp& resp, X& x) {
  using prm::syndrome;
  recv_wqe rw;
  if (!take_recv(resp, &rw)) return {syndrome::none, true, resp.attr.min_rnr_timer};
  const uint32_t slots = rw.slots;
  const prm::data_seg* seg = rw.seg;
  dst_piece dst[prm::max_ds];
  uint32_t nd = 0;
  uint64_t capacity = 0;
  bool bad_key = false;
  for (uint32_t i = 0; i < slots && capacity < w.length; ++i) {
    const uint32_t lkey = prm::from_be(seg[i].lkey);
    if (lkey == prm::invalid_lkey) break;  // the terminator of a short list
    const uint32_t len = prm::from_be(seg[i].byte_count);
    if (len == 0) continue;
    const uint64_t addr = prm::from_be(seg[i].addr);
    const mr_entry* e = keys().find(lkey, false);
    if (e == nullptr || e->pdn != resp.pd->pdn || !(e->access & verbs::access::local_write) || addr < e->addr ||
        len > e->length || addr - e->addr > e->length - len) {
      bad_key = true;  // reported after the length check below, as the length is known first
    }
    dst[nd++] = {reinterpret_cast<uint8_t*>(addr), len};
    capacity += len;
  }
  const auto op = prm::traits_of(w.opcode).has_imm ? prm::cqe_opcode::resp_send_imm : prm::cqe_opcode::resp_send;
  if (capacity < w.length) {
    complete_recv(src_qpn, resp, rw, w, prm::cqe_opcode::resp_err, syndrome::local_length);
    return remote_error(resp, syndrome::remote_inval_req);
  }
  if (bad_key) {
    complete_recv(src_qpn, resp, rw, w, prm::cqe_opcode::resp_err, syndrome::local_prot);
    return remote_error(resp, syndrome::remote_op);
  }
  // Scatter-to-CQE (cs_res = 1): a 1..32-byte message goes into the CQE, not the buffer.
  // The checks above still ran: the soft NIC answers a receive too short or with a bad key
  // as it does without scattering to the CQE ([unverified] whether a ConnectX checks the
  // posted list then; rdma-core re-checks the length when it copies the CQE's bytes out).
  if (resp.scatter_to_cqe && w.length != 0 && w.length <= prm::cqe_inline_scatter_max) {
    uint8_t payload[prm::cqe_inline_scatter_max];
    const dst_piece into_cqe{payload, w.length};
    if (!x.place(&into_cqe, 1)) return abandon_recv(src_qpn, resp, rw, w);
    complete_recv(src_qpn, resp, rw, w, op, syndrome::none, payload);
    return {};
  }
  if (!x.place(dst, nd)) return abandon_recv(src_qpn, resp, rw, w);
  placement_done();
  complete_recv(src_qpn, resp, rw, w, op, syndrome::none);
  return {};
}

template <class X>
respond_result do_read(const parsed_wqe& w, soft_qp& resp, X& x) {
  using prm::syndrome;
  if (w.length != 0 && check_rkey(resp, w.rkey, w.raddr, w.length, verbs::access::remote_read) == nullptr) {
    return remote_error(resp, syndrome::remote_access);
  }
  x.read_out(reinterpret_cast<const uint8_t*>(w.raddr), w.length);
  placement_done();
  return {};
}

template <class X>
respond_result do_atomic(const parsed_wqe& w, soft_qp& resp, X& x) {
  using prm::syndrome;
  if (w.raddr % w.atomic_size != 0) return remote_error(resp, syndrome::remote_inval_req);
  if (check_rkey(resp, w.rkey, w.raddr, w.atomic_size, verbs::access::remote_atomic) == nullptr) {
    return remote_error(resp, syndrome::remote_access);
  }
  x.atomic_result(execute_atomic(w, reinterpret_cast<void*>(w.raddr)));
  placement_done();
  return {};
}

// Executes w from the QP `src_qpn` at `resp`. The caller holds the key table's shared lock
// and resp.resp_mu; resp is live, in RTR or RTS, and connected to src_qpn.
template <class X>
respond_result respond_with(uint32_t src_qpn, const parsed_wqe& w, soft_qp& resp, X& x) {
  using prm::op_kind;
  const prm::op_traits t = prm::traits_of(w.opcode);
  // The QP must grant the opcode's remote right before anything else is looked at.
  if (!qp_grants(resp.attr.access_flags, t.right)) return remote_error(resp, prm::syndrome::remote_inval_req);
  switch (t.kind) {
    case op_kind::write: return do_write(src_qpn, w, resp, x);
    case op_kind::send: return do_send(src_qpn, w, resp, x);
    case op_kind::read: return do_read(w, resp, x);
    case op_kind::atomic:
    case op_kind::masked_atomic: return do_atomic(w, resp, x);
    case op_kind::nop:
    case op_kind::unsupported: break;
  }
  return {prm::syndrome::local_qp_op, false, 0};  // parse_segments rejects these first
}

}  // namespace gdaki::soft::resp_detail
