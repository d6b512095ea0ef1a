// `gdaki devices`: every registered provider, the devices each one serves, their
// attributes and ports; the RDMA devices rdma-core sees (mlx5 or not); and the GPUs when a
// CUDA driver is present. Nothing here needs a GPU or a NIC: absent things are reported.
#include <CLI/CLI.hpp>

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gdaki/error.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/provider.hpp"
#include "gpu/placement.hpp"
#include "machine_probe.hpp"
#ifdef GDAKI_HAVE_MLX5_PROVIDER
#include "providers/mlx5/mlx5_devices.hpp"
#endif

namespace gdaki::tool {
namespace {

struct devices_options {
  bool json = false;
  bool verbose = false;
};

const char* state_name(verbs::port_state s) {
  switch (s) {
    case verbs::port_state::down: return "DOWN";
    case verbs::port_state::init: return "INIT";
    case verbs::port_state::armed: return "ARMED";
    case verbs::port_state::active: return "ACTIVE";
  }
  return "?";
}

unsigned mtu_bytes(verbs::path_mtu m) { return 128u << static_cast<unsigned>(m); }

std::string gid_text(const uint8_t* g) {
  std::string s;
  char b[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(b, sizeof b, "%02x%02x", g[i], g[i + 1]);
    if (i) s += ':';
    s += b;
  }
  return s;
}

nlohmann::json attr_json(const verbs::device_attr& a) {
  return {{"node_guid", a.node_guid},       {"vendor_id", a.vendor_id},
          {"vendor_part_id", a.vendor_part_id}, {"phys_port_cnt", a.phys_port_cnt},
          {"max_qp", a.max_qp},             {"max_qp_wr", a.max_qp_wr},
          {"max_recv_wr", a.max_recv_wr},   {"max_sge", a.max_sge},
          {"max_inline", a.max_inline},     {"max_cq", a.max_cq},
          {"max_cqe", a.max_cqe},           {"max_mr", a.max_mr},
          {"max_mr_size", a.max_mr_size},   {"max_pd", a.max_pd},
          {"max_qp_rd_atom", a.max_qp_rd_atom}, {"max_qp_dest_rd_atom", a.max_qp_dest_rd_atom},
          {"atomic_host_endian", a.atomic_host_endian}, {"masked_atomics", a.masked_atomics}};
}

int run_devices(const devices_options& o) {
  nlohmann::json out;
  out["providers"] = nlohmann::json::array();
  for (const verbs::provider_ops* p : verbs::providers()) out["providers"].push_back(p->name);
  out["devices"] = nlohmann::json::array();
  for (const verbs::device_info& info : verbs::device::list()) {
    nlohmann::json d = {{"name", info.name}, {"provider", info.provider}, {"description", info.description}};
    try {
      verbs::device dev = verbs::device::open(info.name);
      const verbs::device_attr a = dev.query();
      d["attributes"] = attr_json(a);
      d["ports"] = nlohmann::json::array();
      for (uint32_t port = 1; port <= a.phys_port_cnt; ++port) {
        const verbs::port_attr pa = dev.query_port(port);
        d["ports"].push_back({{"port", port},
                              {"state", state_name(pa.state)},
                              {"max_mtu", mtu_bytes(pa.max_mtu)},
                              {"active_mtu", mtu_bytes(pa.active_mtu)},
                              {"link_layer", pa.layer == verbs::link_layer::ethernet ? "Ethernet" : "InfiniBand"},
                              {"lid", pa.lid},
                              {"gid0", gid_text(pa.gid)}});
      }
    } catch (const gdaki::error& e) {
      d["error"] = e.what();  // listed but not openable: say why instead of failing the listing
    }
    out["devices"].push_back(d);
  }
#ifdef GDAKI_HAVE_MLX5_PROVIDER
  {
    const mlx5::rdma_device_scan scan = mlx5::scan_devices();
    nlohmann::json r = {{"summary", scan.message}, {"devices", nlohmann::json::array()}};
    for (const auto& e : scan.devices) r["devices"].push_back({{"name", e.name}, {"mlx5", e.mlx5}});
    out["rdma"] = r;
  }
#else
  out["rdma"] = {{"summary", "mlx5 provider not built (no infiniband/mlx5dv.h at build time)"},
                 {"devices", nlohmann::json::array()}};
#endif
  const gpu::capabilities caps = probe_machine();
  out["cuda_driver"] = caps.cuda_driver ? nlohmann::json(caps.cuda_driver_version) : nlohmann::json(nullptr);
  out["gpus"] = nlohmann::json::array();
  for (const gpu::gpu_caps& g : caps.gpus) {
    out["gpus"].push_back({{"ordinal", g.ordinal},
                           {"name", g.name},
                           {"pci_bus_id", g.pci_bus_id},
                           {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
                           {"dma_buf", g.dma_buf},
                           {"gpu_direct_rdma", g.gpu_direct_rdma},
                           {"host_register", g.host_register}});
  }
  out["notes"] = caps.notes;

  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return exit_ok;
  }
  std::string provs;
  for (const auto& p : out["providers"]) provs += (provs.empty() ? "" : ", ") + p.get<std::string>();
  std::printf("Providers: %s\n\nDevices:\n", provs.c_str());
  if (out["devices"].empty()) std::printf("  (none)\n");
  for (const auto& d : out["devices"]) {
    std::printf("  %-10s provider %-5s %s\n", d["name"].get<std::string>().c_str(),
                d["provider"].get<std::string>().c_str(), d["description"].get<std::string>().c_str());
    if (d.contains("error")) {
      std::printf("    cannot open: %s\n", d["error"].get<std::string>().c_str());
      continue;
    }
    const auto& a = d["attributes"];
    std::printf("    node_guid 0x%016" PRIx64 "  vendor 0x%x part %u  ports %u\n", a["node_guid"].get<uint64_t>(),
                a["vendor_id"].get<unsigned>(), a["vendor_part_id"].get<unsigned>(), a["phys_port_cnt"].get<unsigned>());
    std::printf("    max_qp %u  max_qp_wr %u  max_recv_wr %u  max_sge %u  max_inline %u\n", a["max_qp"].get<unsigned>(),
                a["max_qp_wr"].get<unsigned>(), a["max_recv_wr"].get<unsigned>(), a["max_sge"].get<unsigned>(),
                a["max_inline"].get<unsigned>());
    if (o.verbose) {
      std::printf("    max_cq %u  max_cqe %u  max_mr %u  max_mr_size %" PRIu64 "  max_pd %u\n", a["max_cq"].get<unsigned>(),
                  a["max_cqe"].get<unsigned>(), a["max_mr"].get<unsigned>(), a["max_mr_size"].get<uint64_t>(),
                  a["max_pd"].get<unsigned>());
      std::printf("    max_qp_rd_atom %u  max_qp_dest_rd_atom %u  atomics %s-endian%s\n",
                  a["max_qp_rd_atom"].get<unsigned>(), a["max_qp_dest_rd_atom"].get<unsigned>(),
                  a["atomic_host_endian"].get<bool>() ? "host" : "big", a["masked_atomics"].get<bool>() ? ", masked" : "");
    }
    for (const auto& p : d["ports"]) {
      std::printf("    port %u: %-6s mtu %u (active %u)  %s  lid 0x%x", p["port"].get<unsigned>(),
                  p["state"].get<std::string>().c_str(), p["max_mtu"].get<unsigned>(), p["active_mtu"].get<unsigned>(),
                  p["link_layer"].get<std::string>().c_str(), p["lid"].get<unsigned>());
      if (o.verbose) std::printf("  gid0 %s", p["gid0"].get<std::string>().c_str());
      std::printf("\n");
    }
  }
  std::printf("\nRDMA devices (rdma-core): %s\n", out["rdma"]["summary"].get<std::string>().c_str());
  for (const auto& r : out["rdma"]["devices"]) {
    std::printf("  %-10s %s\n", r["name"].get<std::string>().c_str(),
                r["mlx5"].get<bool>() ? "mlx5 (served by the mlx5 provider)" : "not mlx5 (not served)");
  }
  std::printf("\nGPUs: ");
  if (!caps.cuda_driver) {
    std::printf("none (no CUDA driver)\n");
  } else if (caps.gpus.empty()) {
    std::printf("none (CUDA driver %d found, no GPU visible)\n", caps.cuda_driver_version);
  } else {
    std::printf("%zu (CUDA driver %d)\n", caps.gpus.size(), caps.cuda_driver_version);
    for (const gpu::gpu_caps& g : caps.gpus) {
      std::printf("  GPU %d: %s  sm_%d%d  %s  dma-buf %s  GPUDirect RDMA %s\n", g.ordinal, g.name.c_str(), g.cc_major,
                  g.cc_minor, g.pci_bus_id.c_str(), g.dma_buf ? "yes" : "no", g.gpu_direct_rdma ? "yes" : "no");
    }
  }
  if (o.verbose) {
    for (const std::string& n : caps.notes) std::printf("  note: %s\n", n.c_str());
  }
  return exit_ok;
}

}  // namespace

command_fn add_devices(CLI::App& app) {
  auto o = std::make_shared<devices_options>();
  CLI::App* sub = app.add_subcommand("devices", "List providers, devices, ports and attributes; RDMA devices; GPUs");
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->add_flag("-v,--verbose", o->verbose, "Every attribute, GIDs and probe notes");
  return [o] { return run_devices(*o); };
}

}  // namespace gdaki::tool
