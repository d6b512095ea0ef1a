// The exported libibverbs entry points of libgdaki_verbs.so. Each one asks whether the
// object belongs to the soft device; if so the soft implementation (soft_verbs.hpp)
// serves it, otherwise the call goes to rdma-core's own function of the same name and
// symbol version. The versions (libgdaki_verbs.map) are rdma-core's, so a program
// linked against libibverbs binds to these when the library is preloaded.
//
// Verbs that rdma-core implements inline (ibv_post_send, ibv_poll_cq, ibv_req_notify_cq,
// ibv_query_port, ibv_query_device_ex, ibv_create_qp_ex, ...) never reach an exported
// symbol: they call through the context's ops table or the verbs_context, which
// soft_open_device fills.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>

#include "real_verbs.hpp"
#include "soft_verbs.hpp"

// verbs.h turns these into inline wrappers; here they are the exported functions.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace gdaki::ibverbs;

namespace {

template <typename R>
R missing() {
  errno = ENOSYS;
  if constexpr (std::is_void_v<R>) {
    return;
  } else if constexpr (std::is_pointer_v<R>) {
    return nullptr;
  } else {
    return static_cast<R>(ENOSYS);
  }
}

template <typename Fn>
struct result_of_fn;
template <typename R, typename... A>
struct result_of_fn<R (*)(A...)> {
  using type = R;
};

}  // namespace

// Calls rdma-core's `name` at symbol version `ver` with the same arguments.
#define GDAKI_FORWARD(ver, name, ...)                                                       \
  do {                                                                                      \
    static const auto real_fn = real_verbs<decltype(&name)>(#name, ver);                    \
    if (real_fn == nullptr) return missing<result_of_fn<decltype(&name)>::type>();            \
    return real_fn(__VA_ARGS__);                                                            \
  } while (0)

extern "C" {

// ---- devices -------------------------------------------------------------------------

namespace {
std::mutex lists_mu;
std::map<ibv_device**, ibv_device**>& lists() {  // our array -> rdma-core's, for free
  static std::map<ibv_device**, ibv_device**> m;
  return m;
}
}  // namespace

ibv_device** ibv_get_device_list(int* num) {
  static const auto real_get = real_verbs<ibv_device** (*)(int*)>("ibv_get_device_list", "IBVERBS_1.1");
  int rn = 0;
  ibv_device** rl = real_get != nullptr ? real_get(&rn) : nullptr;
  if (rl == nullptr) rn = 0;
  const int n = rn + soft_device_count();
  auto** all = static_cast<ibv_device**>(std::calloc(static_cast<size_t>(n) + 1, sizeof(ibv_device*)));
  if (all == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // Real devices first, so programs that take the first device keep using the hardware.
  for (int i = 0; i < rn; ++i) all[i] = rl[i];
  for (int i = 0; i < soft_device_count(); ++i) all[rn + i] = soft_device_at(i);
  {
    std::lock_guard<std::mutex> lock(lists_mu);
    lists()[all] = rl;
  }
  if (num != nullptr) *num = n;
  return all;
}

void ibv_free_device_list(ibv_device** list) {
  static const auto real_free = real_verbs<void (*)(ibv_device**)>("ibv_free_device_list", "IBVERBS_1.1");
  ibv_device** rl = nullptr;
  {
    std::lock_guard<std::mutex> lock(lists_mu);
    auto it = lists().find(list);
    if (it == lists().end()) {
      if (real_free != nullptr) real_free(list);  // not ours: someone else's list
      return;
    }
    rl = it->second;
    lists().erase(it);
  }
  if (rl != nullptr && real_free != nullptr) real_free(rl);
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* d) {
  if (is_soft_device(d)) return d->name;
  GDAKI_FORWARD("IBVERBS_1.1", ibv_get_device_name, d);
}

__be64 ibv_get_device_guid(ibv_device* d) {
  if (is_soft_device(d)) return soft_device_guid(d);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_get_device_guid, d);
}

int ibv_get_device_index(ibv_device* d) {
  if (is_soft_device(d)) return -1;  // no kernel index: the soft device is not in sysfs
  GDAKI_FORWARD("IBVERBS_1.9", ibv_get_device_index, d);
}

ibv_context* ibv_open_device(ibv_device* d) {
  if (is_soft_device(d)) return soft_open_device(d);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_open_device, d);
}

int ibv_close_device(ibv_context* c) {
  if (is_soft(c)) return soft_close_device(c);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_close_device, c);
}

int ibv_query_device(ibv_context* c, ibv_device_attr* a) {
  if (is_soft(c)) return soft_query_device(c, a);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_query_device, c, a);
}

int ibv_query_port(ibv_context* c, uint8_t port, _compat_ibv_port_attr* a) {
  // The compat layout is ibv_port_attr up to link_layer (later fields were added after it).
  if (is_soft(c)) return soft_query_port(c, port, reinterpret_cast<ibv_port_attr*>(a), offsetof(ibv_port_attr, flags));
  GDAKI_FORWARD("IBVERBS_1.1", ibv_query_port, c, port, a);
}

int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  if (is_soft(c)) return index < 0 || soft_query_gid(c, port, static_cast<uint32_t>(index), gid->raw) != 0 ? -1 : 0;
  GDAKI_FORWARD("IBVERBS_1.1", ibv_query_gid, c, port, index, gid);
}

int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t flags, size_t size) {
  if (is_soft(c)) return flags != 0 ? EINVAL : soft_query_gid_ex(c, port, index, e, size);
  GDAKI_FORWARD("IBVERBS_1.11", _ibv_query_gid_ex, c, port, index, e, flags, size);
}

ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* e, size_t max, uint32_t flags, size_t size) {
  if (is_soft(c)) {
    if (flags != 0 || size < sizeof(ibv_gid_entry)) return -EINVAL;
    if (max < 1) return -EINVAL;
    const int rc = soft_query_gid_ex(c, 1, 0, e, size);
    return rc != 0 ? -rc : 1;
  }
  GDAKI_FORWARD("IBVERBS_1.11", _ibv_query_gid_table, c, e, max, flags, size);
}

// rdma-core's private helper (enum ibv_gid_type_sysfs: 0 IB/RoCE v1, 1 RoCE v2) that
// ibv_devinfo imports; not in the public headers, hence the int.
int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned int index, int* type) {
  if (is_soft(c)) {
    if (port != 1 || index != 0) return -1;
    *type = 1;  // RoCE v2
    return 0;
  }
  GDAKI_FORWARD("IBVERBS_PRIVATE_34", ibv_query_gid_type, c, port, index, type);
}

int ibv_query_pkey(ibv_context* c, uint8_t port, int index, __be16* pkey) {
  if (is_soft(c)) return soft_query_pkey(c, port, index, pkey) != 0 ? -1 : 0;
  GDAKI_FORWARD("IBVERBS_1.1", ibv_query_pkey, c, port, index, pkey);
}

int ibv_get_pkey_index(ibv_context* c, uint8_t port, __be16 pkey) {
  if (is_soft(c)) return port == 1 && be16toh(pkey) == 0xffff ? 0 : -1;
  GDAKI_FORWARD("IBVERBS_1.5", ibv_get_pkey_index, c, port, pkey);
}

// ---- PD, MR --------------------------------------------------------------------------

ibv_pd* ibv_alloc_pd(ibv_context* c) {
  if (is_soft(c)) return soft_alloc_pd(c);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_alloc_pd, c);
}

int ibv_dealloc_pd(ibv_pd* p) {
  if (is_soft(p->context)) return soft_dealloc_pd(p);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_dealloc_pd, p);
}

ibv_mr* ibv_reg_mr(ibv_pd* p, void* addr, size_t length, int access) {
  if (is_soft(p->context)) return soft_reg_mr(p, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
  GDAKI_FORWARD("IBVERBS_1.1", ibv_reg_mr, p, addr, length, access);
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* p, void* addr, size_t length, uint64_t iova, int access) {
  if (is_soft(p->context)) return soft_reg_mr(p, addr, length, iova, static_cast<unsigned>(access));
  GDAKI_FORWARD("IBVERBS_1.7", ibv_reg_mr_iova, p, addr, length, iova, access);
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* p, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (is_soft(p->context)) return soft_reg_mr(p, addr, length, iova, access);
  GDAKI_FORWARD("IBVERBS_1.8", ibv_reg_mr_iova2, p, addr, length, iova, access);
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* p, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  if (is_soft(p->context)) {
    errno = soft_not_supported("ibv_reg_dmabuf_mr (the soft NIC is a CPU: it cannot reach device memory)");
    return nullptr;
  }
  GDAKI_FORWARD("IBVERBS_1.12", ibv_reg_dmabuf_mr, p, offset, length, iova, fd, access);
}

int ibv_rereg_mr(ibv_mr* m, int flags, ibv_pd* p, void* addr, size_t length, int access) {
  if (is_soft(m->context)) {
    errno = soft_not_supported("ibv_rereg_mr");
    return IBV_REREG_MR_ERR_INPUT;
  }
  GDAKI_FORWARD("IBVERBS_1.1", ibv_rereg_mr, m, flags, p, addr, length, access);
}

int ibv_dereg_mr(ibv_mr* m) {
  if (is_soft(m->context)) return soft_dereg_mr(m);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_dereg_mr, m);
}

// ---- CQ and completion channels ----------------------------------------------------

ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  if (is_soft(c)) return soft_create_comp_channel(c);
  GDAKI_FORWARD("IBVERBS_1.0", ibv_create_comp_channel, c);
}

int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  if (is_soft(ch->context)) return soft_destroy_comp_channel(ch);
  GDAKI_FORWARD("IBVERBS_1.0", ibv_destroy_comp_channel, ch);
}

ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int vector) {
  if (is_soft(c)) return soft_create_cq(c, cqe, cq_context, ch, vector);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_create_cq, c, cqe, cq_context, ch, vector);
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (is_soft(cq->context)) {
    // The soft ibv_cq is a view over per-QP CQs sized for their queues: any size holds.
    if (cqe < 1) return EINVAL;
    cq->cqe = cqe;
    return 0;
  }
  GDAKI_FORWARD("IBVERBS_1.1", ibv_resize_cq, cq, cqe);
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (is_soft(cq->context)) return soft_destroy_cq(cq);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_destroy_cq, cq);
}

int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  if (is_soft(ch->context)) return soft_get_cq_event(ch, cq, cq_context);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_get_cq_event, ch, cq, cq_context);
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int n) {
  if (is_soft(cq->context)) return soft_ack_cq_events(cq, n);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_ack_cq_events, cq, n);
}

// ---- QP ------------------------------------------------------------------------------

ibv_qp* ibv_create_qp(ibv_pd* p, ibv_qp_init_attr* a) {
  if (is_soft(p->context)) return soft_create_qp(p, a);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_create_qp, p, a);
}

int ibv_modify_qp(ibv_qp* q, ibv_qp_attr* a, int mask) {
  if (is_soft(q->context)) return soft_modify_qp(q, a, mask);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_modify_qp, q, a, mask);
}

int ibv_query_qp(ibv_qp* q, ibv_qp_attr* a, int mask, ibv_qp_init_attr* init) {
  if (is_soft(q->context)) return soft_query_qp(q, a, mask, init);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_query_qp, q, a, mask, init);
}

int ibv_destroy_qp(ibv_qp* q) {
  if (is_soft(q->context)) return soft_destroy_qp(q);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_destroy_qp, q);
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* q) {
  if (is_soft(q->context)) return &qp_of(q)->qpx;
  GDAKI_FORWARD("IBVERBS_1.6", ibv_qp_to_qp_ex, q);
}

// ---- SRQ (ibv_post_srq_recv is inline: the context's ops table) ------------------------

ibv_srq* ibv_create_srq(ibv_pd* p, ibv_srq_init_attr* a) {
  if (is_soft(p->context)) return soft_create_srq(p, a);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_create_srq, p, a);
}

int ibv_modify_srq(ibv_srq* s, ibv_srq_attr* a, int mask) {
  if (is_soft(s->context)) return soft_modify_srq(s, a, mask);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_modify_srq, s, a, mask);
}

int ibv_query_srq(ibv_srq* s, ibv_srq_attr* a) {
  if (is_soft(s->context)) return soft_query_srq(s, a);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_query_srq, s, a);
}

int ibv_destroy_srq(ibv_srq* s) {
  if (is_soft(s->context)) return soft_destroy_srq(s);
  GDAKI_FORWARD("IBVERBS_1.1", ibv_destroy_srq, s);
}

// ---- what the soft device does not have ----------------------------------------------

ibv_ah* ibv_create_ah(ibv_pd* p, ibv_ah_attr* a) {
  if (is_soft(p->context)) {
    errno = soft_not_supported("ibv_create_ah (UD)");
    return nullptr;
  }
  GDAKI_FORWARD("IBVERBS_1.1", ibv_create_ah, p, a);
}

int ibv_attach_mcast(ibv_qp* q, const ibv_gid* gid, uint16_t lid) {
  if (is_soft(q->context)) return soft_not_supported("ibv_attach_mcast");
  GDAKI_FORWARD("IBVERBS_1.1", ibv_attach_mcast, q, gid, lid);
}

int ibv_detach_mcast(ibv_qp* q, const ibv_gid* gid, uint16_t lid) {
  if (is_soft(q->context)) return soft_not_supported("ibv_detach_mcast");
  GDAKI_FORWARD("IBVERBS_1.1", ibv_detach_mcast, q, gid, lid);
}

}  // extern "C"
