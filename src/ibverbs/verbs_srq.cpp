// Shared receive queues of the soft device: gdaki's verbs::srq behind ibv_srq. Receives
// are posted with the data path's own poster (dev::srq_post, the mlx5 SRQ WQE and its
// linked free list) and come back to the free list when the application polls their
// completion (drain_recv in verbs_cq.cpp), as rdma-core's mlx5 provider does.
#include <cerrno>
#include <cstring>

#include "gdaki/device/sq.hpp"
#include "gdaki/error.hpp"
#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

ibv_srq* soft_create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  const char* verb = "ibv_create_srq";
  const uint32_t sge = a->attr.max_sge == 0 ? 1 : a->attr.max_sge;
  auto* st = new srq_state;
  try {
    verbs::srq_init init;
    init.max_wr = a->attr.max_wr == 0 ? 1 : a->attr.max_wr;
    init.max_sge = sge;
    st->obj = verbs::srq(*pd_of(pd)->obj, init);
  } catch (const gdaki::error& e) {
    delete st;
    errno = soft_fail(verb, e.code(), e.what());
    return nullptr;
  }
  st->wr_id.assign(st->obj.caps().wqes, 0);
  st->max_sge = st->obj.caps().max_sge;
  // What was granted (ibv_create_srq(3): the attributes are updated to the actual values).
  a->attr.max_wr = st->obj.caps().max_wr;
  a->attr.max_sge = st->max_sge;
  auto* s = new soft_srq{};
  s->st = st;
  ibv_srq& b = s->srq;
  b.context = pd->context;
  b.srq_context = a->srq_context;
  b.pd = pd;
  b.handle = st->obj.srqn();
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  return &b;
}

int soft_modify_srq(ibv_srq* is, ibv_srq_attr* a, int mask) {
  if (mask & IBV_SRQ_MAX_WR) {
    return soft_fail("ibv_modify_srq", status::not_supported, "resizing an SRQ (IBV_SRQ_MAX_WR)");
  }
  // The limit event (IBV_EVENT_SRQ_LIMIT_REACHED) is an async event, which the soft device
  // never raises: arming one would promise an event that never comes. Disarming is fine.
  if ((mask & IBV_SRQ_LIMIT) && a->srq_limit != 0) {
    return soft_fail("ibv_modify_srq", status::not_supported, "SRQ limit events (IBV_SRQ_LIMIT)");
  }
  (void)is;
  return 0;
}

int soft_query_srq(ibv_srq* is, ibv_srq_attr* a) {
  const srq_state* st = srq_of(is)->st;
  std::memset(a, 0, sizeof *a);
  a->max_wr = st->obj.caps().max_wr;
  a->max_sge = st->max_sge;
  a->srq_limit = 0;
  return 0;
}

int soft_destroy_srq(ibv_srq* is) {
  soft_srq* s = srq_of(is);
  try {
    s->st->obj.destroy();  // busy while a QP receives from it: EBUSY, nothing changes
  } catch (const gdaki::error& e) {
    return soft_fail("ibv_destroy_srq", e.code(), e.what());
  }
  pthread_mutex_destroy(&is->mutex);
  pthread_cond_destroy(&is->cond);
  delete s->st;
  delete s;
  return 0;
}

int soft_post_srq_recv(ibv_srq* is, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  srq_state* st = srq_of(is)->st;
  std::lock_guard<std::mutex> lock(st->mu);
  dev::srq_handle& h = *st->obj.host_handle();
  for (; wr != nullptr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > st->max_sge) {
      *bad = wr;
      return EINVAL;
    }
    dev::sge sgl[31];
    for (int i = 0; i < wr->num_sge; ++i) sgl[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
    // The WQE this post fills is the list head (only posts move it, and we hold mu): its
    // wr_id is in place before srq_post's DBR store lets the NIC take it.
    st->wr_id[h.head] = wr->wr_id;
    const status s = dev::srq_post(h, sgl, static_cast<uint32_t>(wr->num_sge));
    if (s != status::ok) {
      *bad = wr;
      return s == status::again ? ENOMEM : EINVAL;  // again: max_wr receives outstanding
    }
  }
  return 0;
}

}  // namespace gdaki::ibverbs
