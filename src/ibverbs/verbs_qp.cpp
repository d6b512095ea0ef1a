// RC queue pairs of the soft device: gdaki's verbs::qp with a private send CQ and receive
// CQ each (verbs_cq.cpp says why), exported once so post_send / post_recv write mlx5 WQEs
// through the data path (verbs_post.cpp). The state machine and its attribute checks are
// gdaki's own (src/verbs/qp.cpp); this file translates ibverbs attributes to them.
#include <cerrno>
#include <cstring>

#include "connection_token.hpp"
#include "gdaki/error.hpp"
#include "gdaki/prm/wqe.hpp"
#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

namespace {

uint32_t next_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Largest WQE a QP with these caps may need, in WQEBBs (RDMA with every SGE, or inline).
uint32_t largest_wqe(uint32_t max_send_sge, uint32_t max_inline) {
  const uint32_t rdma = prm::wqebbs_for_ds(2 + max_send_sge);
  const uint32_t inl = max_inline == 0 ? 1 : prm::wqebbs_for_ds(2 + prm::inline_ds(max_inline));
  return rdma > inl ? rdma : inl;
}

void export_handles(qp_state* st) {
  st->hs = std::make_unique<dev::cq_handle>(st->scq.export_handle());
  st->hr = std::make_unique<dev::cq_handle>(st->rcq.export_handle());
  verbs::qp_export_options eo;
  eo.srq = st->srq != nullptr ? st->srq->obj.host_handle() : nullptr;
  st->h = std::make_unique<dev::qp_handle>(st->q.export_handle(st->hs.get(), st->hr.get(), eo));
  st->sq_slots.assign(dev::sq_wqebbs(*st->h), send_slot{});
  st->rq_wr_id.assign(dev::rq_wqes(*st->h), 0);
}

void attach(ibv_cq* cq, qp_state* st, bool send) {
  cq_state* c = cq_of(cq)->st;
  std::lock_guard<std::mutex> lock(c->mu);
  c->members.push_back({st, send});
  (send ? st->send_cq : st->recv_cq) = c;
}

void detach(cq_state* c, qp_state* st) {
  if (c == nullptr) return;
  std::lock_guard<std::mutex> lock(c->mu);
  std::erase_if(c->members, [&](const cq_member& m) { return m.qp == st; });
}

}  // namespace

ibv_qp* soft_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  const char* verb = "ibv_create_qp";
  if (a->qp_type != IBV_QPT_RC) {
    errno = soft_fail(verb, status::not_supported, "qp_type " + std::to_string(a->qp_type) + ": only RC QPs exist");
    return nullptr;
  }
  if (a->srq != nullptr && (!is_soft(a->srq->context) || a->srq->pd != pd)) {
    errno = soft_fail(verb, status::invalid, "the srq must be an SRQ of the soft device in the QP's PD");
    return nullptr;
  }
  if (a->send_cq == nullptr || a->recv_cq == nullptr || !is_soft(a->send_cq->context) ||
      !is_soft(a->recv_cq->context)) {
    errno = soft_fail(verb, status::invalid, "send_cq and recv_cq must be CQs of the soft device");
    return nullptr;
  }
  ibv_qp_cap& cap = a->cap;
  const uint32_t send_sge = cap.max_send_sge == 0 ? 1 : cap.max_send_sge;
  const uint32_t recv_sge = cap.max_recv_sge == 0 ? 1 : cap.max_recv_sge;
  const uint32_t nbb = largest_wqe(send_sge, cap.max_inline_data);
  if (nbb > 16 || send_sge > 30 || recv_sge > 30) {
    errno = soft_fail(verb, status::invalid,
                      "max_send_sge " + std::to_string(send_sge) + " / max_inline_data " +
                          std::to_string(cap.max_inline_data) + " need a " + std::to_string(nbb) +
                          "-WQEBB WQE; the soft NIC takes at most 16 (30 SGEs, 972 inline bytes)");
    return nullptr;
  }
  const uint32_t send_wr = cap.max_send_wr == 0 ? 1 : cap.max_send_wr;
  const uint32_t recv_wr = cap.max_recv_wr == 0 ? 1 : cap.max_recv_wr;
  auto* st = new qp_state;
  soft_context* ctx = ctx_of(pd->context);
  st->ctx = ctx;
  st->srq = a->srq != nullptr ? srq_of(a->srq)->st : nullptr;
  try {
    const uint32_t sq = next_pow2(send_wr * nbb < 8 ? 8 : send_wr * nbb);
    // On an SRQ the QP may take every WQE of it before the application polls: its private
    // receive CQ holds that many.
    const uint32_t rq = st->srq != nullptr ? st->srq->obj.caps().wqes : next_pow2(recv_wr);
    st->scq = verbs::cq(ctx->st->dev, verbs::cq_init{.depth = sq, .ring = {}, .ignore_overrun = true});
    st->rcq = verbs::cq(ctx->st->dev, verbs::cq_init{.depth = rq, .ring = {}, .ignore_overrun = true});
    verbs::qp_init init;
    init.send_cq = &st->scq;
    init.recv_cq = &st->rcq;
    init.sq_wqebbs = sq;
    init.rq_wqes = rq;
    init.max_send_sge = send_sge;
    init.max_recv_sge = recv_sge;
    init.max_inline = cap.max_inline_data;
    init.srq = st->srq != nullptr ? &st->srq->obj : nullptr;
    st->q = verbs::qp(*pd_of(pd)->obj, init);
    export_handles(st);
  } catch (const gdaki::error& e) {
    delete st;
    errno = soft_fail(verb, e.code(), e.what());
    return nullptr;
  }
  const verbs::qp_caps& got = st->q.caps();
  st->max_send_sge = send_sge;
  st->max_recv_sge = recv_sge;
  st->max_inline = got.max_inline;
  st->max_send_wr = got.sq_wqebbs / nbb;
  st->max_recv_wr = got.rq_wqes;  // 0 on an SRQ (ibv_create_qp(3): then ignored)
  st->sig_all = a->sq_sig_all != 0;
  cap.max_send_wr = st->max_send_wr;
  cap.max_recv_wr = st->max_recv_wr;
  cap.max_send_sge = send_sge;
  cap.max_recv_sge = recv_sge;
  cap.max_inline_data = st->max_inline;

  auto* q = new soft_qp{};
  q->st = st;
  ibv_qp& b = q->qpx.qp_base;
  b.context = pd->context;
  b.qp_context = a->qp_context;
  b.pd = pd;
  b.send_cq = a->send_cq;
  b.recv_cq = a->recv_cq;
  b.srq = a->srq;
  b.handle = st->q.qpn();
  b.qp_num = st->q.qpn();
  b.state = IBV_QPS_RESET;
  b.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  soft_fill_qp_ex(q);
  attach(a->send_cq, st, true);
  attach(a->recv_cq, st, false);
  return &b;
}

ibv_qp* soft_create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* a) {
  constexpr uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if ((a->comp_mask & ~known) != 0 || !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr) {
    errno = soft_fail("ibv_create_qp_ex", status::not_supported,
                      "comp_mask 0x" + std::to_string(a->comp_mask) +
                          ": only a PD and send_ops_flags are supported (no XRC, TSO, RSS, create flags)");
    return nullptr;
  }
  constexpr uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                           IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                           IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~ops) != 0) {
    errno = soft_fail("ibv_create_qp_ex", status::not_supported,
                      "send_ops_flags beyond SEND, WRITE, READ and the two 8-byte atomics");
    return nullptr;
  }
  (void)c;
  return soft_create_qp(a->pd, reinterpret_cast<ibv_qp_init_attr*>(a));
}

int soft_modify_qp(ibv_qp* iq, ibv_qp_attr* a, int mask) {
  qp_state* st = qp_of(iq)->st;
  // The attribute mask is checked by verbs::qp::modify against the one RC state machine
  // (src/verbs/qp_transitions.cpp): bits IBA does not allow in the transition are EINVAL,
  // legal ones gdaki has no field for (alternate path, path migration) EOPNOTSUPP, each
  // named. CUR_STATE is checked here and not passed on.
  if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != static_cast<ibv_qp_state>(st->q.state())) {
    return soft_fail("ibv_modify_qp", status::invalid, "qp " + std::to_string(iq->qp_num) + ": cur_qp_state is stale");
  }
  verbs::qp_attr g;
  g.state = static_cast<verbs::qp_state>(a->qp_state);
  g.pkey_index = a->pkey_index;
  g.port_num = a->port_num;
  g.access_flags = a->qp_access_flags;
  g.mtu = static_cast<verbs::path_mtu>(a->path_mtu);
  g.dest_qp_num = a->dest_qp_num;
  g.rq_psn = a->rq_psn;
  g.max_dest_rd_atomic = a->max_dest_rd_atomic;
  g.min_rnr_timer = a->min_rnr_timer;
  g.sq_psn = a->sq_psn;
  g.timeout = a->timeout;
  g.retry_cnt = a->retry_cnt;
  g.rnr_retry = a->rnr_retry;
  g.max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_AV) {
    const ibv_ah_attr& ah = a->ah_attr;
    g.av.dlid = ah.dlid;
    g.av.sl = ah.sl;
    g.av.port_num = ah.port_num;
    g.av.is_global = ah.is_global != 0;
    if (ah.is_global) {
      std::memcpy(g.av.dgid, ah.grh.dgid.raw, 16);
      g.av.sgid_index = ah.grh.sgid_index;
      g.av.hop_limit = ah.grh.hop_limit;
      g.av.traffic_class = ah.grh.traffic_class;
      g.av.flow_label = ah.grh.flow_label;
      uint8_t mine[16];
      if (const int rc = soft_local_gid(st->ctx, mine); rc != 0) return rc;
      connection_token(mine, iq->qp_num, g.av.dgid, a->dest_qp_num, g.av.token);
    }
  }
  const bool to_reset = a->qp_state == IBV_QPS_RESET && st->q.state() != verbs::qp_state::reset;
  try {
    if (to_reset) {
      // RESET zeroes the doorbell record and drops every WQE: export again, with the
      // posters and pollers held off (docs/soft-nic.md, States).
      std::scoped_lock lock(st->send_mu, st->recv_mu);
      std::unique_lock<std::mutex> send_cq(st->send_cq->mu), recv_cq;
      if (st->recv_cq != st->send_cq) recv_cq = std::unique_lock<std::mutex>(st->recv_cq->mu);
      st->q.modify(g, static_cast<uint32_t>(mask & ~IBV_QP_CUR_STATE));
      export_handles(st);
    } else {
      st->q.modify(g, static_cast<uint32_t>(mask & ~IBV_QP_CUR_STATE));
    }
  } catch (const gdaki::error& e) {
    return soft_fail("ibv_modify_qp", e.code(), e.what());
  }
  iq->state = a->qp_state;
  return 0;
}

int soft_query_qp(ibv_qp* iq, ibv_qp_attr* a, int, ibv_qp_init_attr* init) {
  qp_state* st = qp_of(iq)->st;
  verbs::qp_attr g;
  try {
    g = st->q.query();
  } catch (const gdaki::error& e) {
    return soft_fail("ibv_query_qp", e.code(), e.what());
  }
  std::memset(a, 0, sizeof *a);
  a->qp_state = static_cast<ibv_qp_state>(g.state);
  a->cur_qp_state = a->qp_state;
  a->path_mtu = static_cast<ibv_mtu>(g.mtu);
  a->qp_access_flags = static_cast<int>(g.access_flags);
  a->pkey_index = g.pkey_index;
  a->port_num = g.port_num;
  a->dest_qp_num = g.dest_qp_num;
  a->rq_psn = g.rq_psn;
  a->sq_psn = g.sq_psn;
  a->max_rd_atomic = g.max_rd_atomic;
  a->max_dest_rd_atomic = g.max_dest_rd_atomic;
  a->min_rnr_timer = g.min_rnr_timer;
  a->timeout = g.timeout;
  a->retry_cnt = g.retry_cnt;
  a->rnr_retry = g.rnr_retry;
  a->ah_attr.dlid = g.av.dlid;
  a->ah_attr.sl = g.av.sl;
  a->ah_attr.port_num = g.av.port_num;
  a->ah_attr.is_global = g.av.is_global;
  std::memcpy(a->ah_attr.grh.dgid.raw, g.av.dgid, 16);
  a->ah_attr.grh.sgid_index = g.av.sgid_index;
  a->ah_attr.grh.hop_limit = g.av.hop_limit;
  a->ah_attr.grh.traffic_class = g.av.traffic_class;
  a->ah_attr.grh.flow_label = g.av.flow_label;
  a->cap.max_send_wr = st->max_send_wr;
  a->cap.max_recv_wr = st->max_recv_wr;
  a->cap.max_send_sge = st->max_send_sge;
  a->cap.max_recv_sge = st->max_recv_sge;
  a->cap.max_inline_data = st->max_inline;
  iq->state = a->qp_state;
  if (init != nullptr) {
    std::memset(init, 0, sizeof *init);
    init->qp_context = iq->qp_context;
    init->send_cq = iq->send_cq;
    init->recv_cq = iq->recv_cq;
    init->srq = iq->srq;
    init->cap = a->cap;
    init->qp_type = IBV_QPT_RC;
    init->sq_sig_all = st->sig_all;
  }
  return 0;
}

int soft_destroy_qp(ibv_qp* iq) {
  soft_qp* q = qp_of(iq);
  qp_state* st = q->st;
  detach(st->send_cq, st);
  detach(st->recv_cq, st);
  pthread_mutex_destroy(&iq->mutex);
  pthread_cond_destroy(&iq->cond);
  delete st;  // handles first, then the QP (the NIC stops touching its rings), then its CQs
  delete q;
  return 0;
}

}  // namespace gdaki::ibverbs
