// mlx5 devices: listing, opening (with DEVX when the kernel allows it), device and port
// attributes, all through the run-time loaders.
#include <endian.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "mlx5_devices.hpp"
#include "mlx5_loader.hpp"
#include "mlx5_objects.hpp"
#include "mlx5_ops.hpp"
#include "mlx5_prm_cmd.hpp"
#include "mlx5_translate.hpp"

namespace gdaki::mlx5 {

namespace {

// Loads both libraries, or says which is missing.
status need_rdma_core(const ibverbs_api** ibv, const mlx5dv_api** dv, std::string* why) {
  std::string msg;
  *ibv = ibverbs(&msg);
  if (*ibv == nullptr) {
    if (why != nullptr) *why = msg;
    return status::not_supported;
  }
  *dv = mlx5dv(&msg);
  if (*dv == nullptr) {
    if (why != nullptr) *why = msg;
    return status::not_supported;
  }
  return status::ok;
}

}  // namespace

status query_atomic_caps(device_obj* d, prm_cmd::atomic_caps* out) {
  const auto in = prm_cmd::build_query_hca_cap(prm_cmd::cap_type::atomic);
  std::vector<uint8_t> outbuf(prm_cmd::size::query_hca_cap_out, 0);
  const int rc = d->dv->devx_general_cmd(d->ctx, in.data(), in.size(), outbuf.data(), outbuf.size());
  std::string why;
  if (status s = check_cmd(prm_cmd::op::query_hca_cap, rc, outbuf.data(), outbuf.size(), "mlx5dv_devx_general_cmd",
                           &why);
      s != status::ok) {
    return s;
  }
  *out = prm_cmd::parse_atomic_caps(outbuf);
  return status::ok;
}

std::string unavailable_reason() {
  const rdma_device_scan scan = scan_devices();
  return scan.code == status::ok ? std::string() : scan.message;
}

status list_devices(std::vector<verbs::device_info>* out) {
  const ibverbs_api* ibv = nullptr;
  const mlx5dv_api* dv = nullptr;
  if (status s = need_rdma_core(&ibv, &dv, nullptr); s != status::ok) return s;
  const rdma_device_scan scan = scan_devices(*ibv, dv);
  for (const auto& d : scan.devices) {
    if (d.mlx5) out->push_back({d.name, "mlx5", "ConnectX through rdma-core (mlx5dv)"});
  }
  return scan.code;  // not_found with no mlx5 device: the registry then lists nothing
}

status open_device(std::string_view name, provider_object** out, std::string* why) {
  const ibverbs_api* ibv = nullptr;
  const mlx5dv_api* dv = nullptr;
  if (status s = need_rdma_core(&ibv, &dv, why); s != status::ok) return s;
  int n = 0;
  ibv_device** list = ibv->get_device_list(&n);
  if (list == nullptr || n <= 0) {
    if (list != nullptr) ibv->free_device_list(list);
    *why = scan_devices(*ibv, dv).message;
    return status::not_found;
  }
  ibv_device* dev = nullptr;
  for (int i = 0; i < n && dev == nullptr; ++i) {
    if (name == ibv->get_device_name(list[i])) dev = list[i];
  }
  if (dev == nullptr || !dv->is_supported(dev)) {
    ibv->free_device_list(list);
    *why = dev == nullptr ? "no RDMA device of that name" : "not an mlx5 device";
    return dev == nullptr ? status::not_found : status::not_supported;
  }
  auto* d = new device_obj;
  d->ops = &ops;
  d->name = std::string(name);
  d->ibv = ibv;
  d->dv = dv;
  // DEVX is what lets rings live in caller-chosen (GPU or host-pinned) memory; without it
  // (older kernels, some containers) the device still opens for queries.
  mlx5dv_context_attr ca{};
  ca.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
  d->ctx = dv->open_device(dev, &ca);
  d->devx = d->ctx != nullptr;
  if (d->ctx == nullptr) d->ctx = ibv->open_device(dev);
  ibv->free_device_list(list);
  if (d->ctx == nullptr) {
    *why = std::string("ibv_open_device failed: ") + std::strerror(errno);
    delete d;
    return status::io_error;
  }
  *out = d;
  return status::ok;
}

status close_device(provider_object* dev) {
  auto* d = static_cast<device_obj*>(dev);
  if (d->cq_uar != nullptr) d->dv->devx_free_uar(d->cq_uar);
  if (d->ctx != nullptr) d->ibv->close_device(d->ctx);
  delete d;
  return status::ok;
}

provider_object* make_device_for_test(std::string_view name, const ibverbs_api* ibv, const mlx5dv_api* dv,
                                      ibv_context* ctx, bool devx) {
  auto* d = new device_obj;
  d->ops = &ops;
  d->name = std::string(name);
  d->ibv = ibv;
  d->dv = dv;
  d->ctx = ctx;
  d->devx = devx;
  return d;
}

status query_device(provider_object* dev, verbs::device_attr* out, std::string* why) {
  auto* d = static_cast<device_obj*>(dev);
  ibv_device_attr a{};
  if (int rc = d->ibv->query_device(d->ctx, &a); rc != 0) {
    *why = std::string("ibv_query_device failed: ") + std::strerror(rc);
    return status::io_error;
  }
  out->name = d->name;
  out->provider = "mlx5";
  out->node_guid = be64toh(a.node_guid);
  out->vendor_id = a.vendor_id;
  out->vendor_part_id = a.vendor_part_id;
  out->phys_port_cnt = a.phys_port_cnt;
  out->max_qp = static_cast<uint32_t>(a.max_qp);
  out->max_qp_wr = static_cast<uint32_t>(a.max_qp_wr);
  out->max_recv_wr = static_cast<uint32_t>(a.max_qp_wr);
  out->max_sge = static_cast<uint32_t>(a.max_sge);
  out->max_inline = 0;  // known per QP only (set at creation); not a device attribute in verbs
  out->max_cq = static_cast<uint32_t>(a.max_cq);
  out->max_cqe = static_cast<uint32_t>(a.max_cqe);
  out->max_mr = static_cast<uint32_t>(a.max_mr);
  out->max_mr_size = a.max_mr_size;
  out->max_pd = static_cast<uint32_t>(a.max_pd);
  out->max_qp_rd_atom = static_cast<uint32_t>(a.max_qp_init_rd_atom);  // as requester
  out->max_qp_dest_rd_atom = static_cast<uint32_t>(a.max_qp_rd_atom);  // as responder
  // [unverified] IBV_ATOMIC_HCA is how mlx5 reports host-endian atomics (mlx5-datapath.md 6.4).
  out->atomic_host_endian = a.atomic_cap == IBV_ATOMIC_HCA;
  out->masked_atomics = false;
  // With DEVX, the atomic HCA caps say it exactly: the 8-byte response endianness mode and
  // whether masked compare-swap / fetch-add exist for 8-byte operands on RC QPs.
  if (d->devx) {
    prm_cmd::atomic_caps ac;
    if (query_atomic_caps(d, &ac) == status::ok) {
      out->atomic_host_endian = ac.req_8B_endianness_mode == 1;
      out->masked_atomics = ac.masked_cmp_swap && ac.masked_fetch_add && (ac.atomic_size_qp & 8u) != 0;
    }
  }
  return status::ok;
}

status query_port(provider_object* dev, uint32_t port, verbs::port_attr* out, std::string* why) {
  auto* d = static_cast<device_obj*>(dev);
  if (port == 0 || port > 255) {
    *why = "port " + std::to_string(port) + " does not exist (ports are numbered from 1)";
    return status::invalid;
  }
  ibv_port_attr pa{};
  if (int rc = mlx5::query_port(*d->ibv, d->ctx, static_cast<uint8_t>(port), &pa); rc != 0) {
    *why = "ibv_query_port(" + std::to_string(port) + ") failed: " + std::strerror(rc);
    return rc == EINVAL ? status::invalid : status::io_error;
  }
  const auto link = link_from_ibv(pa.link_layer);
  const auto max_mtu = mtu_from_ibv(pa.max_mtu);
  const auto active_mtu = mtu_from_ibv(pa.active_mtu);
  if (!link || !max_mtu || !active_mtu) {
    *why = !link ? link.reason : !max_mtu ? max_mtu.reason : active_mtu.reason;
    return status::not_supported;
  }
  switch (pa.state) {
    case IBV_PORT_INIT: out->state = verbs::port_state::init; break;
    case IBV_PORT_ARMED: out->state = verbs::port_state::armed; break;
    case IBV_PORT_ACTIVE:
    case IBV_PORT_ACTIVE_DEFER: out->state = verbs::port_state::active; break;
    default: out->state = verbs::port_state::down; break;
  }
  // gdaki's path_mtu shares ibv_mtu's numbering (1 = 256 ... 5 = 4096).
  out->max_mtu = static_cast<verbs::path_mtu>(pa.max_mtu);
  out->active_mtu = static_cast<verbs::path_mtu>(pa.active_mtu);
  out->layer = link.value == link_kind::ethernet ? verbs::link_layer::ethernet : verbs::link_layer::infiniband;
  out->lid = pa.lid;
  out->gid_tbl_len = static_cast<uint32_t>(pa.gid_tbl_len);
  out->pkey_tbl_len = pa.pkey_tbl_len;
  ibv_gid gid{};
  if (d->ibv->query_gid(d->ctx, static_cast<uint8_t>(port), 0, &gid) == 0) {
    std::memcpy(out->gid, gid.raw, sizeof out->gid);
  }
  return status::ok;
}

}  // namespace gdaki::mlx5
