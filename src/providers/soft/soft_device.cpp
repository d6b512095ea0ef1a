// Soft devices: soft0 .. soft<devices-1>. Each open is its own context with its own
// progress engine; keys and QP numbers are shared by the whole process (soft_tables.hpp).
#include <cstdio>

#include "engine/engine.hpp"
#include "soft_objects.hpp"
#include "soft_ops.hpp"
#include "wire/wire.hpp"

namespace gdaki::soft {

soft_device::~soft_device() = default;

status list_devices(std::vector<verbs::device_info>* out) {
  const config c = get_config();
  for (uint32_t i = 0; i < c.devices; ++i) {
    out->push_back({"soft" + std::to_string(i), "soft", "software NIC executing mlx5 WQEs in process"});
  }
  return status::ok;
}

status open_device(std::string_view name, provider_object** out, std::string* why) {
  const config c = get_config();
  unsigned idx = 0;
  char tail = 0;
  const std::string n(name);
  if (std::sscanf(n.c_str(), "soft%u%c", &idx, &tail) != 1 || idx >= c.devices) {
    *why = "no such soft device";
    return status::not_found;
  }
  auto* d = new soft_device;
  d->ops = &ops;
  d->index = idx;
  d->cfg = c;
  d->eng = std::make_unique<engine>(c);
  d->wire = std::make_unique<wire::endpoint>(*d);
  *out = d;
  return status::ok;
}

status close_device(provider_object* dev) {
  delete static_cast<soft_device*>(dev);  // joins the engine threads
  return status::ok;
}

status query_device(provider_object* dev, verbs::device_attr* out, std::string*) {
  auto* d = static_cast<soft_device*>(dev);
  out->name = "soft" + std::to_string(d->index);
  out->provider = "soft";
  out->node_guid = 0x50f7000000000000ull | d->index;
  out->vendor_id = 0;
  out->vendor_part_id = 0;
  out->phys_port_cnt = 1;
  out->max_qp = 1u << 16;
  out->max_qp_wr = 1u << 15;
  out->max_recv_wr = 1u << 15;
  out->max_sge = 30;
  out->max_inline = 16 * 64 - 16 - 16 - 4;  // a 16-WQEBB WRITE: ctrl + raddr + inline header
  out->max_cq = 1u << 16;
  out->max_cqe = 1u << 22;
  out->max_mr = (1u << 23) - 2;
  out->max_mr_size = ~uint64_t{0};
  out->max_pd = 1u << 16;
  out->max_qp_rd_atom = 16;
  out->max_qp_dest_rd_atom = 16;
  out->atomic_host_endian = true;
  out->masked_atomics = true;
  return status::ok;
}

status query_port(provider_object* dev, uint32_t port, verbs::port_attr* out, std::string* why) {
  auto* d = static_cast<soft_device*>(dev);
  if (port != 1) {
    *why = "port " + std::to_string(port) + " does not exist (soft devices have port 1)";
    return status::invalid;
  }
  out->state = verbs::port_state::active;
  out->max_mtu = verbs::path_mtu::mtu_4096;
  out->active_mtu = verbs::path_mtu::mtu_4096;
  out->layer = verbs::link_layer::infiniband;
  out->lid = static_cast<uint16_t>(d->index + 1);
  for (auto& g : out->gid) g = 0;
  out->gid[0] = 0xfe;
  out->gid[1] = 0x80;
  out->gid[15] = static_cast<uint8_t>(d->index + 1);
  return status::ok;
}

}  // namespace gdaki::soft
