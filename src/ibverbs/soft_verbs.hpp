// internal: the soft device's implementation of each verb, called by the exported entry
// points (entry_points.cpp) once they know the object is ours. Each follows the return
// convention of the verb it implements: an errno value for int verbs, NULL with errno set
// for verbs that return objects. Errors are also printed once, naming the object and the
// cause (an errno alone says too little to someone running an unchanged binary).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "gdaki/status.hpp"
#include "soft_objects.hpp"

namespace gdaki::ibverbs {

// ---- devices (verbs_device.cpp) ----
bool is_soft_device(const ibv_device* d);
// GDAKI_VERBS_LOG_ERRORS (read once; throws gdaki::error naming it when malformed).
bool verbs_log_errors();
inline bool is_soft(const ibv_context* c) { return c != nullptr && is_soft_device(c->device); }
// The soft devices, appended to rdma-core's list by ibv_get_device_list.
int soft_device_count();
ibv_device* soft_device_at(int i);
uint64_t soft_device_guid(const ibv_device* d);  // network order, as ibv_get_device_guid
ibv_context* soft_open_device(ibv_device* d);
int soft_close_device(ibv_context* c);
int soft_query_device(ibv_context* c, ibv_device_attr* a);
int soft_query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in, ibv_device_attr_ex* a, size_t size);
int soft_query_port(ibv_context* c, uint8_t port, ibv_port_attr* a, size_t size);
int soft_query_gid(ibv_context* c, uint32_t port, uint32_t index, uint8_t gid[16]);
int soft_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, size_t size);
int soft_query_pkey(ibv_context* c, uint8_t port, int index, __be16* pkey);
// The device's wire address (its GID 0), starting its listener on first use.
int soft_local_gid(soft_context* ctx, uint8_t gid[16]);

// ---- PD and MR (verbs_memory.cpp) ----
ibv_pd* soft_alloc_pd(ibv_context* c);
int soft_dealloc_pd(ibv_pd* p);
ibv_mr* soft_reg_mr(ibv_pd* p, void* addr, size_t length, uint64_t iova, unsigned access);
int soft_dereg_mr(ibv_mr* m);

// ---- CQs and completion channels (verbs_cq.cpp) ----
ibv_comp_channel* soft_create_comp_channel(ibv_context* c);
int soft_destroy_comp_channel(ibv_comp_channel* ch);
ibv_cq* soft_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int vector);
int soft_destroy_cq(ibv_cq* cq);
int soft_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int soft_req_notify_cq(ibv_cq* cq, int solicited_only);
int soft_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context);
void soft_ack_cq_events(ibv_cq* cq, unsigned n);
void soft_stop_notifier(context_state* st);

// ---- QPs (verbs_qp.cpp, verbs_post.cpp, verbs_qp_ex.cpp) ----
ibv_qp* soft_create_qp(ibv_pd* p, ibv_qp_init_attr* attr);
ibv_qp* soft_create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* attr);
int soft_modify_qp(ibv_qp* q, ibv_qp_attr* attr, int mask);
int soft_query_qp(ibv_qp* q, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init);
int soft_destroy_qp(ibv_qp* q);
int soft_post_send(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad);
int soft_post_recv(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad);
void soft_fill_qp_ex(soft_qp* q);

// ---- SRQs (verbs_srq.cpp) ----
ibv_srq* soft_create_srq(ibv_pd* p, ibv_srq_init_attr* attr);
int soft_modify_srq(ibv_srq* s, ibv_srq_attr* attr, int mask);
int soft_query_srq(ibv_srq* s, ibv_srq_attr* attr);
int soft_destroy_srq(ibv_srq* s);
int soft_post_srq_recv(ibv_srq* s, ibv_recv_wr* wr, ibv_recv_wr** bad);

// Every verb the soft device does not implement: EOPNOTSUPP, said once per verb.
int soft_not_supported(const char* verb);

// Maps a gdaki status to the errno a verb returns, and reports the cause once.
int soft_fail(const char* verb, status st, const std::string& why);
int errno_of(status st);

}  // namespace gdaki::ibverbs
