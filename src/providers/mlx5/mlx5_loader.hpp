// internal: rdma-core's libibverbs.so.1 and libmlx5.so.1, loaded at run time. gdaki does
// not link rdma-core, so the library (and the soft provider) runs where rdma-core is
// absent; the mlx5 provider then reports which library is missing. rdma-core's headers
// are used for types only: every call goes through the tables below, never through a
// verbs.h name, because several of those names are inline wrappers or macros (see
// query_port) that would pull in a link-time dependency.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "gdaki/status.hpp"
#include "gpu/dynlib.hpp"

namespace gdaki::mlx5 {

// libibverbs entry points. Required ones are never null in a loaded table.
struct ibverbs_api {
  decltype(&::ibv_get_device_list) get_device_list;
  decltype(&::ibv_free_device_list) free_device_list;
  decltype(&::ibv_get_device_name) get_device_name;
  decltype(&::ibv_open_device) open_device;
  decltype(&::ibv_close_device) close_device;
  decltype(&::ibv_query_device) query_device;
  // The exported ibv_query_port fills only the old, shorter port attributes; use
  // mlx5::query_port() below, which does what verbs.h's inline wrapper does.
  decltype(&::ibv_query_port) query_port_compat;
  decltype(&::ibv_query_gid) query_gid;
  decltype(&::ibv_alloc_pd) alloc_pd;
  decltype(&::ibv_dealloc_pd) dealloc_pd;
  decltype(&::ibv_reg_mr) reg_mr;
  decltype(&::ibv_dereg_mr) dereg_mr;
  decltype(&::ibv_create_cq) create_cq;
  decltype(&::ibv_destroy_cq) destroy_cq;
  decltype(&::ibv_create_qp) create_qp;
  decltype(&::ibv_modify_qp) modify_qp;
  decltype(&::ibv_query_qp) query_qp;
  decltype(&::ibv_destroy_qp) destroy_qp;
  // An address handle resolves a RoCE peer's MAC address (read back through
  // mlx5dv_init_obj), which a DEVX QP's address path needs and the kernel does not fill in.
  decltype(&::ibv_create_ah) create_ah;
  decltype(&::ibv_destroy_ah) destroy_ah;
  // Optional, null when absent: rdma-core 34+ (IBVERBS_1.12) for GPU memory through
  // dma-buf; rdma-core 33+ (IBVERBS_1.11) for GID types.
  decltype(&::ibv_reg_dmabuf_mr) reg_dmabuf_mr;
  decltype(&::_ibv_query_gid_ex) query_gid_ex;

  std::string path;
  std::vector<std::string> missing;  // one line per absent optional entry point
};

// libmlx5 (mlx5dv) entry points: direct access to rings, doorbells and DEVX objects.
struct mlx5dv_api {
  decltype(&::mlx5dv_is_supported) is_supported;
  decltype(&::mlx5dv_open_device) open_device;
  decltype(&::mlx5dv_query_device) query_device;
  decltype(&::mlx5dv_init_obj) init_obj;
  decltype(&::mlx5dv_create_cq) create_cq;
  decltype(&::mlx5dv_create_qp) create_qp;
  decltype(&::mlx5dv_devx_alloc_uar) devx_alloc_uar;
  decltype(&::mlx5dv_devx_free_uar) devx_free_uar;
  decltype(&::mlx5dv_devx_umem_reg) devx_umem_reg;
  decltype(&::mlx5dv_devx_umem_dereg) devx_umem_dereg;
  decltype(&::mlx5dv_devx_obj_create) devx_obj_create;
  decltype(&::mlx5dv_devx_obj_modify) devx_obj_modify;
  decltype(&::mlx5dv_devx_obj_query) devx_obj_query;
  decltype(&::mlx5dv_devx_obj_destroy) devx_obj_destroy;
  decltype(&::mlx5dv_devx_query_eqn) devx_query_eqn;
  decltype(&::mlx5dv_devx_general_cmd) devx_general_cmd;
  // Optional (rdma-core 40+, MLX5_1.19): DEVX umem over a dma-buf, for GPU-resident rings
  // without nvidia-peermem.
  decltype(&::mlx5dv_devx_umem_reg_ex) devx_umem_reg_ex;

  std::string path;
  std::vector<std::string> missing;
};

const detail::library_spec& ibverbs_spec();
const detail::library_spec& mlx5dv_spec();

// Load libibverbs.so.1 (GDAKI_LIBIBVERBS) / libmlx5.so.1 (GDAKI_LIBMLX5) into `out`,
// reading the environment on every call. Return ok; not_found when the library cannot be
// opened; not_supported when it lacks a required entry point. `message` names the library
// and what is disabled.
status load_ibverbs(ibverbs_api& out, std::string& message);
status load_mlx5dv(mlx5dv_api& out, std::string& message);

// Process-wide tables, loaded once on first use (thread-safe). nullptr when unavailable,
// with the reason in *message when message is not null.
const ibverbs_api* ibverbs(std::string* message = nullptr);
const mlx5dv_api* mlx5dv(std::string* message = nullptr);

// ibv_query_port as verbs.h's inline wrapper does it: the provider's extended query_port
// (full ibv_port_attr) when the context has one, else the exported compat entry point.
// Returns 0 or an errno value, like ibv_query_port.
int query_port(const ibverbs_api& api, ibv_context* ctx, uint8_t port, ibv_port_attr* attr);

}  // namespace gdaki::mlx5
