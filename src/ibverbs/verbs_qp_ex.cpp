// The ibv_qp_ex work-request API (ibv_wr_start, ibv_wr_rdma_write, ibv_wr_set_sge, ...,
// ibv_wr_complete) that perftest uses by default: each call adds to a list of ordinary
// ibv_send_wr, and ibv_wr_complete posts the list with soft_post_send, so both APIs
// write the same WQEs through the same code. Operations the soft NIC lacks (memory
// windows, invalidation, TSO, UD/XRC addressing, atomic write) make ibv_wr_complete
// return EOPNOTSUPP and post nothing.
#include <cerrno>
#include <cstring>

#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

namespace {

qp_state* st_of(ibv_qp_ex* x) { return reinterpret_cast<soft_qp*>(x)->st; }

ibv_send_wr& add(ibv_qp_ex* x, ibv_wr_opcode op) {
  qp_state* st = st_of(x);
  ibv_send_wr w{};
  w.wr_id = x->wr_id;
  w.send_flags = static_cast<unsigned>(x->wr_flags);
  w.opcode = op;
  st->wr_list.push_back(w);
  return st->wr_list.back();
}

void set_sges(ibv_qp_ex* x, size_t n, const ibv_sge* sges) {
  qp_state* st = st_of(x);
  if (st->wr_list.empty()) {
    st->wr_error = EINVAL;  // an SGE before any operation
    return;
  }
  auto copy = std::make_unique<ibv_sge[]>(n == 0 ? 1 : n);
  if (n != 0) std::memcpy(copy.get(), sges, n * sizeof(ibv_sge));
  st->wr_list.back().sg_list = copy.get();
  st->wr_list.back().num_sge = static_cast<int>(n);
  st->wr_sges.push_back(std::move(copy));
}

void set_inline(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs) {
  qp_state* st = st_of(x);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bufs[i].length;
  auto data = std::make_unique<uint8_t[]>(total == 0 ? 1 : total);
  size_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(data.get() + off, bufs[i].addr, bufs[i].length);
    off += bufs[i].length;
  }
  const ibv_sge one{reinterpret_cast<uintptr_t>(data.get()), static_cast<uint32_t>(total), 0};
  st->wr_inline.push_back(std::move(data));
  set_sges(x, 1, &one);
  if (!st->wr_list.empty()) st->wr_list.back().send_flags |= IBV_SEND_INLINE;
}

void unsupported(ibv_qp_ex* x) { st_of(x)->wr_error = EOPNOTSUPP; }

void reset(qp_state* st) {
  st->wr_list.clear();
  st->wr_sges.clear();
  st->wr_inline.clear();
  st->wr_error = 0;
}

}  // namespace

void soft_fill_qp_ex(soft_qp* q) {
  ibv_qp_ex& qx = q->qpx;
  qx.wr_start = [](ibv_qp_ex* x) { reset(st_of(x)); };
  qx.wr_abort = [](ibv_qp_ex* x) { reset(st_of(x)); };
  qx.wr_complete = [](ibv_qp_ex* x) {
    qp_state* st = st_of(x);
    int rc = st->wr_error;
    if (rc == 0 && !st->wr_list.empty()) {
      for (size_t i = 0; i + 1 < st->wr_list.size(); ++i) st->wr_list[i].next = &st->wr_list[i + 1];
      ibv_send_wr* bad = nullptr;
      rc = soft_post_send(&x->qp_base, st->wr_list.data(), &bad);
    }
    reset(st);
    return rc;
  };
  qx.wr_rdma_write = [](ibv_qp_ex* x, uint32_t rkey, uint64_t raddr) {
    add(x, IBV_WR_RDMA_WRITE).wr.rdma = {raddr, rkey};
  };
  qx.wr_rdma_write_imm = [](ibv_qp_ex* x, uint32_t rkey, uint64_t raddr, __be32 imm) {
    ibv_send_wr& w = add(x, IBV_WR_RDMA_WRITE_WITH_IMM);
    w.wr.rdma = {raddr, rkey};
    w.imm_data = imm;
  };
  qx.wr_rdma_read = [](ibv_qp_ex* x, uint32_t rkey, uint64_t raddr) { add(x, IBV_WR_RDMA_READ).wr.rdma = {raddr, rkey}; };
  qx.wr_send = [](ibv_qp_ex* x) { add(x, IBV_WR_SEND); };
  qx.wr_send_imm = [](ibv_qp_ex* x, __be32 imm) { add(x, IBV_WR_SEND_WITH_IMM).imm_data = imm; };
  qx.wr_atomic_cmp_swp = [](ibv_qp_ex* x, uint32_t rkey, uint64_t raddr, uint64_t compare, uint64_t swap) {
    ibv_send_wr& w = add(x, IBV_WR_ATOMIC_CMP_AND_SWP);
    w.wr.atomic.remote_addr = raddr;
    w.wr.atomic.rkey = rkey;
    w.wr.atomic.compare_add = compare;
    w.wr.atomic.swap = swap;
  };
  qx.wr_atomic_fetch_add = [](ibv_qp_ex* x, uint32_t rkey, uint64_t raddr, uint64_t addv) {
    ibv_send_wr& w = add(x, IBV_WR_ATOMIC_FETCH_AND_ADD);
    w.wr.atomic.remote_addr = raddr;
    w.wr.atomic.rkey = rkey;
    w.wr.atomic.compare_add = addv;
  };
  qx.wr_set_sge = [](ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
    const ibv_sge s{addr, length, lkey};
    set_sges(x, 1, &s);
  };
  qx.wr_set_sge_list = [](ibv_qp_ex* x, size_t n, const ibv_sge* l) { set_sges(x, n, l); };
  qx.wr_set_inline_data = [](ibv_qp_ex* x, void* addr, size_t length) {
    const ibv_data_buf b{addr, length};
    set_inline(x, 1, &b);
  };
  qx.wr_set_inline_data_list = [](ibv_qp_ex* x, size_t n, const ibv_data_buf* l) { set_inline(x, n, l); };
  qx.wr_bind_mw = [](ibv_qp_ex* x, ibv_mw*, uint32_t, const ibv_mw_bind_info*) { unsupported(x); };
  qx.wr_local_inv = [](ibv_qp_ex* x, uint32_t) { unsupported(x); };
  qx.wr_send_inv = [](ibv_qp_ex* x, uint32_t) { unsupported(x); };
  qx.wr_send_tso = [](ibv_qp_ex* x, void*, uint16_t, uint16_t) { unsupported(x); };
  qx.wr_set_ud_addr = [](ibv_qp_ex* x, ibv_ah*, uint32_t, uint32_t) { unsupported(x); };
  qx.wr_set_xrc_srqn = [](ibv_qp_ex* x, uint32_t) { unsupported(x); };
  qx.wr_atomic_write = [](ibv_qp_ex* x, uint32_t, uint64_t, const void*) { unsupported(x); };
}

}  // namespace gdaki::ibverbs
