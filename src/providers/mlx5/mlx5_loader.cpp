#include "mlx5_loader.hpp"

#include <cstring>
#include <mutex>

namespace gdaki::mlx5 {

const detail::library_spec& ibverbs_spec() {
  static const detail::library_spec spec{
      "libibverbs.so.1", "GDAKI_LIBIBVERBS", "the mlx5 provider is unavailable",
      "install rdma-core (apt-get install libibverbs1 ibverbs-providers)"};
  return spec;
}

const detail::library_spec& mlx5dv_spec() {
  static const detail::library_spec spec{
      "libmlx5.so.1", "GDAKI_LIBMLX5", "the mlx5 provider is unavailable",
      "install rdma-core's mlx5 provider (apt-get install ibverbs-providers)"};
  return spec;
}

namespace {

// libibverbs exports two ABIs of its oldest names: IBVERBS_1.0 (the pre-2006 layout) and
// IBVERBS_1.1. verbs.h binds to 1.1, so ask for exactly that version.
constexpr const char* ibverbs_1_1 = "IBVERBS_1.1";

std::string join_failure(const detail::library_spec& spec, const std::vector<std::string>& missing) {
  return missing.front() + "; " + spec.disables + "; " + spec.remedy;
}

}  // namespace

status load_ibverbs(ibverbs_api& out, std::string& message) {
  const auto& spec = ibverbs_spec();
  detail::dynlib lib;
  if (status s = detail::dynlib::open(spec, lib, message); s != status::ok) return s;

  ibverbs_api api{};
  std::vector<std::string> req;
  const char* core = spec.disables;
  using detail::resolve;
  resolve(spec, lib, api.get_device_list, "ibv_get_device_list", req, core, ibverbs_1_1);
  resolve(spec, lib, api.free_device_list, "ibv_free_device_list", req, core, ibverbs_1_1);
  resolve(spec, lib, api.get_device_name, "ibv_get_device_name", req, core, ibverbs_1_1);
  resolve(spec, lib, api.open_device, "ibv_open_device", req, core, ibverbs_1_1);
  resolve(spec, lib, api.close_device, "ibv_close_device", req, core, ibverbs_1_1);
  resolve(spec, lib, api.query_device, "ibv_query_device", req, core, ibverbs_1_1);
  resolve(spec, lib, api.query_port_compat, "ibv_query_port", req, core, ibverbs_1_1);
  resolve(spec, lib, api.query_gid, "ibv_query_gid", req, core, ibverbs_1_1);
  resolve(spec, lib, api.alloc_pd, "ibv_alloc_pd", req, core, ibverbs_1_1);
  resolve(spec, lib, api.dealloc_pd, "ibv_dealloc_pd", req, core, ibverbs_1_1);
  resolve(spec, lib, api.reg_mr, "ibv_reg_mr", req, core, ibverbs_1_1);
  resolve(spec, lib, api.dereg_mr, "ibv_dereg_mr", req, core, ibverbs_1_1);
  resolve(spec, lib, api.create_cq, "ibv_create_cq", req, core, ibverbs_1_1);
  resolve(spec, lib, api.destroy_cq, "ibv_destroy_cq", req, core, ibverbs_1_1);
  resolve(spec, lib, api.create_qp, "ibv_create_qp", req, core, ibverbs_1_1);
  resolve(spec, lib, api.modify_qp, "ibv_modify_qp", req, core, ibverbs_1_1);
  resolve(spec, lib, api.query_qp, "ibv_query_qp", req, core, ibverbs_1_1);
  resolve(spec, lib, api.destroy_qp, "ibv_destroy_qp", req, core, ibverbs_1_1);
  resolve(spec, lib, api.create_ah, "ibv_create_ah", req, core, ibverbs_1_1);
  resolve(spec, lib, api.destroy_ah, "ibv_destroy_ah", req, core, ibverbs_1_1);
  if (!req.empty()) {
    message = join_failure(spec, req);
    return status::not_supported;
  }
  resolve(spec, lib, api.reg_dmabuf_mr, "ibv_reg_dmabuf_mr", api.missing,
          "GPU memory cannot be registered through dma-buf (needs rdma-core 34 or later)",
          "IBVERBS_1.12");
  resolve(spec, lib, api.query_gid_ex, "_ibv_query_gid_ex", api.missing,
          "GID types cannot be queried (needs rdma-core 33 or later); RoCE v2 GIDs cannot be "
          "told apart from v1",
          "IBVERBS_1.11");
  api.path = lib.path();
  out = std::move(api);
  message.clear();
  return status::ok;
}

status load_mlx5dv(mlx5dv_api& out, std::string& message) {
  const auto& spec = mlx5dv_spec();
  detail::dynlib lib;
  if (status s = detail::dynlib::open(spec, lib, message); s != status::ok) return s;

  mlx5dv_api api{};
  std::vector<std::string> req;
  const char* core = spec.disables;
  using detail::resolve;
  resolve(spec, lib, api.is_supported, "mlx5dv_is_supported", req, core);
  resolve(spec, lib, api.open_device, "mlx5dv_open_device", req, core);
  resolve(spec, lib, api.query_device, "mlx5dv_query_device", req, core);
  resolve(spec, lib, api.init_obj, "mlx5dv_init_obj", req, core);
  resolve(spec, lib, api.create_cq, "mlx5dv_create_cq", req, core);
  resolve(spec, lib, api.create_qp, "mlx5dv_create_qp", req, core);
  resolve(spec, lib, api.devx_alloc_uar, "mlx5dv_devx_alloc_uar", req, core);
  resolve(spec, lib, api.devx_free_uar, "mlx5dv_devx_free_uar", req, core);
  resolve(spec, lib, api.devx_umem_reg, "mlx5dv_devx_umem_reg", req, core);
  resolve(spec, lib, api.devx_umem_dereg, "mlx5dv_devx_umem_dereg", req, core);
  resolve(spec, lib, api.devx_obj_create, "mlx5dv_devx_obj_create", req, core);
  resolve(spec, lib, api.devx_obj_modify, "mlx5dv_devx_obj_modify", req, core);
  resolve(spec, lib, api.devx_obj_query, "mlx5dv_devx_obj_query", req, core);
  resolve(spec, lib, api.devx_obj_destroy, "mlx5dv_devx_obj_destroy", req, core);
  resolve(spec, lib, api.devx_query_eqn, "mlx5dv_devx_query_eqn", req, core);
  resolve(spec, lib, api.devx_general_cmd, "mlx5dv_devx_general_cmd", req, core);
  if (!req.empty()) {
    message = join_failure(spec, req);
    return status::not_supported;
  }
  resolve(spec, lib, api.devx_umem_reg_ex, "mlx5dv_devx_umem_reg_ex", api.missing,
          "rings cannot be placed in GPU memory through dma-buf (needs rdma-core 40 or later); "
          "GPU-resident rings need nvidia-peermem");
  api.path = lib.path();
  out = std::move(api);
  message.clear();
  return status::ok;
}

const ibverbs_api* ibverbs(std::string* message) {
  static std::once_flag once;
  static ibverbs_api api;
  static std::string why;
  static bool ok = false;
  std::call_once(once, [] { ok = load_ibverbs(api, why) == status::ok; });
  if (!ok && message != nullptr) *message = why;
  return ok ? &api : nullptr;
}

const mlx5dv_api* mlx5dv(std::string* message) {
  static std::once_flag once;
  static mlx5dv_api api;
  static std::string why;
  static bool ok = false;
  std::call_once(once, [] { ok = load_mlx5dv(api, why) == status::ok; });
  if (!ok && message != nullptr) *message = why;
  return ok ? &api : nullptr;
}

int query_port(const ibverbs_api& api, ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  // verbs_get_ctx_op only reads the context's op table (no libibverbs symbol), so this is
  // the inline wrapper's logic without its link-time reference to ibv_query_port.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx != nullptr) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  // The compat entry point writes only the leading, older part of the struct: zero the
  // rest so fields it does not know read as 0.
  std::memset(attr, 0, sizeof(*attr));
  return api.query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace gdaki::mlx5
