// internal: the soft provider's slot implementations, one file per object.
#pragma once

#include "gdaki/verbs/provider.hpp"

namespace gdaki::soft {

using verbs::provider_object;

extern const verbs::provider_ops ops;

// soft_device.cpp
status list_devices(std::vector<verbs::device_info>* out);
status open_device(std::string_view name, provider_object** out, std::string* why);
status close_device(provider_object* dev);
status query_device(provider_object* dev, verbs::device_attr* out, std::string* why);
status query_port(provider_object* dev, uint32_t port, verbs::port_attr* out, std::string* why);
// soft_pd.cpp
status alloc_pd(provider_object* dev, provider_object** out, uint32_t* pdn, std::string* why);
status dealloc_pd(provider_object* pd);
// soft_mr.cpp
status reg_mr(provider_object* pd, void* addr, size_t length, uint32_t access, provider_object** out,
              verbs::mr_keys* keys, std::string* why);
status dereg_mr(provider_object* mr);
// soft_cq.cpp
status create_cq(provider_object* dev, const verbs::cq_init& init, provider_object** out, uint32_t* cqn,
                 uint32_t* depth, std::string* why);
status destroy_cq(provider_object* cq);
status export_cq(provider_object* cq, dev::cq_handle* out, std::string* why);
status cq_in_error(provider_object* cq, bool* out);
// Not a slot: a QP's RESET and destroy drop its unpolled CQEs from cq and advance the
// consumer index past them, returning the SRQ WQEs of receive CQEs to `srq` when not null
// (core/cq_clean.hpp: what rdma-core's mlx5 provider and gdaki's do).
struct soft_cq;
void discard_qp_cqes(soft_cq& cq, uint32_t qpn, dev::srq_handle* srq);
// soft_qp.cpp
status create_qp(provider_object* pd, const verbs::qp_create_args& args, provider_object** out, uint32_t* qpn,
                 verbs::qp_caps* caps, std::string* why);
status modify_qp(provider_object* qp, const verbs::qp_attr& attr, uint32_t mask, std::string* why);
status query_qp(provider_object* qp, verbs::qp_attr* out, std::string* why);
status destroy_qp(provider_object* qp);
status export_qp(provider_object* qp, const verbs::qp_export_options& opt, dev::qp_handle* out, std::string* why);
// soft_srq.cpp
status create_srq(provider_object* pd, const verbs::srq_init& init, provider_object** out, uint32_t* srqn,
                  verbs::srq_caps* caps, std::string* why);
status destroy_srq(provider_object* srq);
status export_srq(provider_object* srq, dev::srq_handle* out, std::string* why);
status set_srq_free_list(provider_object* srq, dev::srq_handle* list);

}  // namespace gdaki::soft
