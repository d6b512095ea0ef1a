// Protection domains and memory regions of the soft device: gdaki's own verbs::pd and
// verbs::mr, so keys, bounds and access flags are checked by the soft NIC exactly as for
// a gdaki program (docs/soft-nic.md, Keys).
#include <cerrno>
#include <cstdint>

#include "gdaki/error.hpp"
#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

ibv_pd* soft_alloc_pd(ibv_context* c) {
  auto* p = new soft_pd{};
  try {
    p->obj = new verbs::pd(ctx_of(c)->st->dev);
  } catch (const gdaki::error& e) {
    delete p;
    errno = soft_fail("ibv_alloc_pd", e.code(), e.what());
    return nullptr;
  }
  p->pd.context = c;
  p->pd.handle = p->obj->pdn();
  return &p->pd;
}

int soft_dealloc_pd(ibv_pd* pd) {
  soft_pd* p = pd_of(pd);
  delete p->obj;  // the control layer keeps it alive while MRs or QPs still use it
  delete p;
  return 0;
}

ibv_mr* soft_reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  // Optional flags (IBV_ACCESS_OPTIONAL_RANGE: relaxed ordering and the like) may be
  // ignored by any device; every other unknown flag is refused.
  constexpr unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC;
  const unsigned required = access & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if ((required & ~known) != 0) {
    errno = soft_fail("ibv_reg_mr", status::not_supported,
                      "access flags 0x" + std::to_string(required & ~known) +
                          " (zero-based, on-demand paging, memory windows, ...) are not supported");
    return nullptr;
  }
  if (iova != reinterpret_cast<uintptr_t>(addr)) {
    // The soft NIC names remote memory by virtual address, as the MR was registered.
    errno = soft_fail("ibv_reg_mr_iova", status::not_supported, "an iova other than the buffer address");
    return nullptr;
  }
  auto* m = new soft_mr{};
  try {
    m->obj = new verbs::mr(*pd_of(pd)->obj, addr, length, required);
  } catch (const gdaki::error& e) {
    delete m;
    errno = soft_fail("ibv_reg_mr", e.code(), e.what());
    return nullptr;
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = m->obj->lkey();
  m->mr.lkey = m->obj->lkey();
  m->mr.rkey = m->obj->rkey();
  return &m->mr;
}

int soft_dereg_mr(ibv_mr* mr) {
  soft_mr* m = mr_of(mr);
  delete m->obj;  // once it returns no NIC access to the range is in flight
  delete m;
  return 0;
}

}  // namespace gdaki::ibverbs
