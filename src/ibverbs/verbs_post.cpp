// ibv_post_send and ibv_post_recv of the soft device: each work request becomes one mlx5
// WQE written into the QP's send (or receive) ring with the data path's own builder
// (dev::wqe_writer) and published with its doorbell record and doorbell (dev::sq_submit,
// dev::rq_post), exactly as a gdaki kernel posts. There is no second model of the NIC:
// the soft NIC executes these WQEs as it executes any other (on the posting thread when
// inline execution is on, docs/soft-nic.md).
//
// One poster at a time per QP (a mutex, as rdma-core's mlx5 provider takes its SQ lock),
// so reservation is the data path's exclusive form; a WR that does not fit returns ENOMEM
// without polling, because the completions that free room belong to the application.
#include <cerrno>
#include <cstring>

#include "gdaki/device/sq.hpp"
#include "gdaki/prm/op_traits.hpp"
#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

namespace {

// A verbs work request's opcode, its completion's opcode, and the opcode's traits (which
// segments the WQE carries: prm/op_traits.hpp).
struct send_shape {
  prm::send_opcode op;
  ibv_wc_opcode wc;
  prm::op_traits t;
};

int shape_of(ibv_wr_opcode op, send_shape* s) {
  auto set = [s](prm::send_opcode o, ibv_wc_opcode wc) {
    *s = {o, wc, prm::traits_of(o)};
    return 0;
  };
  switch (op) {
    case IBV_WR_RDMA_WRITE: return set(prm::send_opcode::rdma_write, IBV_WC_RDMA_WRITE);
    case IBV_WR_RDMA_WRITE_WITH_IMM: return set(prm::send_opcode::rdma_write_imm, IBV_WC_RDMA_WRITE);
    case IBV_WR_SEND: return set(prm::send_opcode::send, IBV_WC_SEND);
    case IBV_WR_SEND_WITH_IMM: return set(prm::send_opcode::send_imm, IBV_WC_SEND);
    case IBV_WR_RDMA_READ: return set(prm::send_opcode::rdma_read, IBV_WC_RDMA_READ);
    case IBV_WR_ATOMIC_CMP_AND_SWP: return set(prm::send_opcode::atomic_cs, IBV_WC_COMP_SWAP);
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return set(prm::send_opcode::atomic_fa, IBV_WC_FETCH_ADD);
    default: return EOPNOTSUPP;  // LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, ATOMIC_WRITE, DRIVER1
  }
}

// Writes one WR as one WQE at the next free WQEBB; returns 0 or the errno for bad_wr.
int post_one(qp_state* st, dev::qp_handle& h, const ibv_send_wr* wr) {
  send_shape s;
  if (shape_of(wr->opcode, &s) != 0) {
    return soft_not_supported("ibv_post_send with this opcode (only SEND, WRITE, READ, CAS, FADD)");
  }
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > st->max_send_sge) return EINVAL;
  const bool atomic = s.t.kind == prm::op_kind::atomic;  // verbs has no masked atomics
  const bool inl = (wr->send_flags & IBV_SEND_INLINE) != 0 && s.t.inline_allowed;
  uint64_t total = 0;
  uint32_t nonzero = 0;
  for (int i = 0; i < wr->num_sge; ++i) {
    total += wr->sg_list[i].length;
    nonzero += wr->sg_list[i].length != 0;
  }
  if (atomic && (wr->num_sge != 1 || wr->sg_list[0].length != 8)) return EINVAL;  // 8-byte atomics only
  if (inl && total > st->max_inline) return EINVAL;
  const uint32_t ds = 1 + (s.t.has_raddr ? 1 : 0) + (atomic ? 2 : inl ? prm::inline_ds(static_cast<uint32_t>(total)) : nonzero);
  const uint32_t nbb = prm::wqebbs_for_ds(ds);
  if (nbb > h.max_send_wqebbs) return EINVAL;
  const uint64_t ring = dev::sq_wqebbs(h);
  const uint64_t start = dev::arch::load_relaxed(&h.sq_reserved);
  if (start + nbb - dev::arch::load_acquire(&h.sq_completed) > ring) return ENOMEM;  // SQ full

  uint8_t flags = 0;
  const bool signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0 || st->sig_all;
  if (signaled) flags |= prm::ctrl_flags::cq_update;
  if (wr->send_flags & IBV_SEND_SOLICITED) flags |= prm::ctrl_flags::solicited;
  if (wr->send_flags & IBV_SEND_FENCE) flags |= prm::ctrl_flags::fence;
  // Read by the poller once the CQE is there; the WQE's release (sq_mark_ready) orders it.
  st->sq_slots[start & (ring - 1)] = {wr->wr_id, atomic ? 8u : static_cast<uint32_t>(total),
                                      static_cast<uint8_t>(s.wc), signaled};

  dev::wqe_writer w(h, start);
  if (s.t.has_raddr) w.raddr(atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr,
                             atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey);
  if (atomic) {
    if (s.op == prm::send_opcode::atomic_cs) {
      w.atomic(wr->wr.atomic.swap, wr->wr.atomic.compare_add);
    } else {
      w.atomic(wr->wr.atomic.compare_add, 0);
    }
    w.data({wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey});
  } else if (inl) {
    uint8_t buf[1024];  // max_inline is below 1 KiB (a 16-WQEBB WQE)
    uint32_t off = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      std::memcpy(buf + off, reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
      off += wr->sg_list[i].length;
    }
    w.inline_data(buf, off);
  } else {
    // Zero-length entries are skipped, as on mlx5 (a zero byte_count would mean 2 GiB).
    for (int i = 0; i < wr->num_sge; ++i) {
      if (wr->sg_list[i].length != 0) w.data({wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey});
    }
  }
  w.finish(s.op, flags, s.t.has_imm ? wr->imm_data : 0);  // imm_data is already in wire order
  dev::arch::store_relaxed(&h.sq_reserved, start + nbb);
  dev::sq_mark_ready(h, start, nbb);
  return 0;
}

}  // namespace

int soft_post_send(ibv_qp* iq, ibv_send_wr* wr, ibv_send_wr** bad) {
  qp_state* st = qp_of(iq)->st;
  if (iq->state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  std::lock_guard<std::mutex> lock(st->send_mu);
  dev::qp_handle& h = *st->h;
  int rc = 0;
  bool posted = false;
  for (; wr != nullptr; wr = wr->next) {
    rc = post_one(st, h, wr);
    if (rc != 0) break;
    posted = true;
  }
  // One doorbell for the whole list, as a NIC driver rings once per ibv_post_send.
  if (posted) dev::sq_submit(h);
  if (rc != 0) *bad = wr;
  return rc;
}

int soft_post_recv(ibv_qp* iq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  qp_state* st = qp_of(iq)->st;
  if (iq->state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  if (st->srq != nullptr) {  // its receives are posted to the SRQ (ibv_post_srq_recv)
    *bad = wr;
    return EINVAL;
  }
  std::lock_guard<std::mutex> lock(st->recv_mu);
  dev::qp_handle& h = *st->h;
  const uint64_t ring = dev::rq_wqes(h);
  for (; wr != nullptr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > st->max_recv_sge) {
      *bad = wr;
      return EINVAL;
    }
    const uint64_t idx = dev::arch::load_relaxed(&h.rq_reserved);
    if (idx - dev::arch::load_acquire(&h.rq_completed) >= ring) {
      *bad = wr;
      return ENOMEM;  // RQ full: its room comes back as the application polls
    }
    dev::sge sgl[30];
    for (int i = 0; i < wr->num_sge; ++i) sgl[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
    st->rq_wr_id[idx & (ring - 1)] = wr->wr_id;  // published by rq_post's release of the DBR
    const status s = dev::rq_post(h, sgl, static_cast<uint32_t>(wr->num_sge));
    if (s != status::ok) {
      *bad = wr;
      return s == status::again ? ENOMEM : EINVAL;
    }
  }
  return 0;
}

}  // namespace gdaki::ibverbs
