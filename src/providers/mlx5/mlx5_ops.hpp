// internal: the mlx5 provider's slot implementations, one file per object.
#pragma once

#include "gdaki/verbs/provider.hpp"

struct ibv_context;

namespace gdaki::mlx5 {

using verbs::provider_object;

extern const verbs::provider_ops ops;

// mlx5_device.cpp
status list_devices(std::vector<verbs::device_info>* out);
status open_device(std::string_view name, provider_object** out, std::string* why);
status close_device(provider_object* dev);
status query_device(provider_object* dev, verbs::device_attr* out, std::string* why);
status query_port(provider_object* dev, uint32_t port, verbs::port_attr* out, std::string* why);

// mlx5_pd.cpp
status alloc_pd(provider_object* dev, provider_object** out, uint32_t* pdn, std::string* why);
status dealloc_pd(provider_object* pd);
status reg_mr(provider_object* pd, void* addr, size_t length, uint32_t access, provider_object** out,
              verbs::mr_keys* keys, std::string* why);
status dereg_mr(provider_object* mr);

// mlx5_cq.cpp
status create_cq(provider_object* dev, const verbs::cq_init& init, provider_object** out, uint32_t* cqn,
                 uint32_t* depth, std::string* why);
status destroy_cq(provider_object* cq);
status export_cq(provider_object* cq, dev::cq_handle* out, std::string* why);
status cq_in_error(provider_object* cq, bool* out);

// mlx5_srq.cpp
status create_srq(provider_object* pd, const verbs::srq_init& init, provider_object** out, uint32_t* srqn,
                  verbs::srq_caps* caps, std::string* why);
status destroy_srq(provider_object* srq);
status export_srq(provider_object* srq, dev::srq_handle* out, std::string* why);
status set_srq_free_list(provider_object* srq, dev::srq_handle* list);

// mlx5_qp.cpp
status create_qp(provider_object* pd, const verbs::qp_create_args& args, provider_object** out, uint32_t* qpn,
                 verbs::qp_caps* caps, std::string* why);
status modify_qp(provider_object* qp, const verbs::qp_attr& attr, uint32_t mask, std::string* why);
status query_qp(provider_object* qp, verbs::qp_attr* out, std::string* why);
status destroy_qp(provider_object* qp);
status export_qp(provider_object* qp, const verbs::qp_export_options& opt, dev::qp_handle* out, std::string* why);

struct ibverbs_api;
struct mlx5dv_api;
// For tests: a device served by the given tables and context (fakes, usually) instead of
// the loaded rdma-core; `devx` says whether DEVX objects are allowed. Close it with
// ops.close_device, which calls ibv->close_device(ctx).
provider_object* make_device_for_test(std::string_view name, const ibverbs_api* ibv, const mlx5dv_api* dv,
                                      ibv_context* ctx, bool devx);

// Why the provider serves no device on this machine (rdma-core missing, no RDMA device,
// none of them mlx5), or an empty string when it serves at least one. For `gdaki doctor`
// and error messages: the registry only sees an empty device list.
std::string unavailable_reason();

}  // namespace gdaki::mlx5
