// `gdaki doctor [--mode M]`: for each way gdaki can run (soft NIC, GPU doorbell,
// CPU-assisted doorbell, CPU proxy, mlx5 with CPU initiators) says what this machine has
// and what is missing, each missing piece with the command or setting that fixes it, then
// the placement gdaki would choose and why, and the backend (direct, cpu-assisted, proxy)
// an export gets on each provider and initiator, with the reason (gdaki::choose_backend,
// the function exported_qp itself calls). The exit status says whether the requested
// mode can run (0) or not (1); without --mode, whether any mode can.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/device.hpp"
#include "gpu/placement.hpp"
#include "machine_probe.hpp"
#ifdef GDAKI_HAVE_LIBFABRIC_POSTER
#include "proxy/libfabric_loader.hpp"
#endif

namespace gdaki::tool {
namespace {

enum class verdict { present, missing, unknown, optional_missing };

const char* verdict_name(verdict v) {
  switch (v) {
    case verdict::present: return "ok";
    case verdict::missing: return "MISSING";
    case verdict::unknown: return "unknown";
    case verdict::optional_missing: return "absent (optional)";
  }
  return "?";
}

struct check {
  std::string id;      // stable key, used by the modes below and in --json
  std::string what;    // the thing checked, in words
  verdict result = verdict::missing;
  std::string detail;  // what was found
  std::string hint;    // what to do when it is not there
};

struct mode {
  std::string name;
  std::string summary;
  std::vector<std::string> needs;     // check ids that must be present
  std::vector<std::string> wants;     // check ids that help; unknown/absent only warns
};

std::vector<check> run_checks(const gpu::capabilities& caps) {
  std::vector<check> out;
  {
    check c{"soft", "soft NIC provider", verdict::missing, "", ""};
    try {
      verbs::device d = verbs::device::open("soft0");
      c.result = verdict::present;
      c.detail = "soft0 opens";
    } catch (const gdaki::error& e) {
      c.detail = e.what();
      c.hint = "GDAKI_SOFT_DEVICES must be at least 1; the soft provider is built into libgdaki";
    }
    out.push_back(c);
  }
  out.push_back({"cuda_driver", "CUDA driver (libcuda.so.1)", caps.cuda_driver ? verdict::present : verdict::missing,
                 caps.cuda_driver ? "version " + std::to_string(caps.cuda_driver_version) : "not loaded",
                 "install the NVIDIA driver (it ships libcuda.so.1), or set GDAKI_LIBCUDA=/path/to/libcuda.so.1"});
  out.push_back({"gpu", "GPUs", caps.gpu_count > 0 ? verdict::present : verdict::missing,
                 std::to_string(caps.gpu_count) + " visible",
                 caps.cuda_driver ? "check nvidia-smi and CUDA_VISIBLE_DEVICES" : "needs the CUDA driver first"});
  out.push_back({"rdma_core", "rdma-core (libibverbs.so.1, libmlx5.so.1)",
                 caps.rdma_core ? verdict::present : verdict::missing, caps.rdma_core ? "loaded" : "not loaded",
                 "apt-get install rdma-core ibverbs-providers libibverbs1"});
  out.push_back({"mlx5_device", "RDMA devices served by mlx5", caps.mlx5_devices > 0 ? verdict::present : verdict::missing,
                 std::to_string(caps.mlx5_devices) + " mlx5 device(s)",
                 "needs a ConnectX NIC with mlx5_ib loaded: check `ibv_devices` / `rdma link`, `modprobe mlx5_ib`"});
  const bool dmabuf = caps.gpu_dma_buf && caps.cuda_dma_buf_export && caps.ibv_dmabuf_mr;
  {
    check c{"peer_memory", "GPU memory registration (dma-buf or nvidia-peermem)", verdict::missing, "", ""};
    if (dmabuf || caps.peermem) {
      c.result = verdict::present;
      c.detail = dmabuf ? "dma-buf" : "nvidia-peermem";
      if (dmabuf && caps.peermem) c.detail = "dma-buf and nvidia-peermem";
    } else {
      c.detail = std::string("dma-buf: GPU ") + (caps.gpu_dma_buf ? "yes" : "no") + ", cuMemGetHandleForAddressRange " +
                 (caps.cuda_dma_buf_export ? "yes" : "no") + ", ibv_reg_dmabuf_mr " + (caps.ibv_dmabuf_mr ? "yes" : "no") +
                 "; nvidia-peermem not loaded";
      c.hint = "`modprobe nvidia-peermem`, or use dma-buf: Linux 5.12+, NVIDIA open kernel modules, rdma-core 34+";
    }
    out.push_back(c);
  }
  out.push_back({"gdrcopy", "GDRCopy (libgdrapi.so.2 + /dev/gdrdrv)",
                 caps.gdrcopy ? verdict::present : verdict::optional_missing, caps.gdrcopy ? "usable" : "not usable",
                 "install gdrcopy and `modprobe gdrdrv` (or set GDAKI_LIBGDRAPI); CPU access to GPU rings is slower "
                 "without it"});
  {
    check c{"doorbell_map", "GPU mapping of the NIC doorbell (UAR) page", verdict::unknown, "", ""};
    if (caps.uar_gpu_mappable == gpu::tristate::yes) {
      c.result = verdict::present;
      c.detail = "cuMemHostRegister(IOMEMORY) of a UAR page works";
    } else if (caps.uar_gpu_mappable == gpu::tristate::no) {
      c.result = verdict::missing;
      c.detail = "cuMemHostRegister(IOMEMORY) of a UAR page failed";
      c.hint = "use --mode cpu-assisted (a CPU thread rings the doorbell); check IOMMU/ACS and virtualization";
    } else {
      c.detail = "only a real UAR page can tell (needs an mlx5 device and a GPU)";
      c.hint = "run `gdaki doctor` on the machine with the GPU and the ConnectX; cpu-assisted works either way";
    }
    out.push_back(c);
  }
  {
    check c{"libfabric", "libfabric (libfabric.so.1) for the proxy poster", verdict::missing, "", ""};
#ifdef GDAKI_HAVE_LIBFABRIC_POSTER
    std::string why;
    if (proxy::ofi::load(&why) != nullptr) {
      c.result = verdict::present;
      c.detail = "loaded";
    } else {
      c.detail = why;
    }
#else
    c.detail = "gdaki was built without rdma/fabric.h";
#endif
    c.hint = "apt-get install libfabric1 (and libfabric-dev to build the poster)";
    out.push_back(c);
  }
  {
    const char* home = std::getenv("DOCA_HOME");
    const std::string path = home ? home : "/opt/mellanox/doca";
    std::error_code ec;
    const bool present = std::filesystem::exists(path, ec);
    out.push_back({"doca", "DOCA SDK (only to compare against DOCA GPUNetIO)",
                   present ? verdict::present : verdict::optional_missing, path + (present ? " exists" : " not found"),
                   "gdaki does not need DOCA; set DOCA_HOME to point at an SDK for side-by-side runs"});
  }
  return out;
}

std::vector<mode> modes() {
  return {
      {"soft", "software NIC, CPU initiators (no GPU, no NIC)", {"soft"}, {}},
      {"gpu-doorbell", "GPU threads write WQEs and ring the ConnectX doorbell themselves",
       {"cuda_driver", "gpu", "rdma_core", "mlx5_device", "peer_memory"}, {"doorbell_map", "gdrcopy"}},
      {"cpu-assisted", "GPU threads write WQEs and doorbell records; a CPU thread rings the doorbell",
       {"cuda_driver", "gpu", "rdma_core", "mlx5_device", "peer_memory"}, {"gdrcopy"}},
      {"proxy", "GPU threads write descriptors; a CPU proxy posts them on a libfabric endpoint",
       {"cuda_driver", "gpu", "libfabric"}, {}},
      {"mlx5", "real ConnectX, CPU initiators", {"rdma_core", "mlx5_device"}, {}},
  };
}

struct backend_row {
  std::string provider, initiator, note;
  backend_inputs inputs;  // what the choice was made from, placement included
  backend_choice choice;
};

backend_inputs::memory memory_of(gpu::location l) {
  switch (l) {
    case gpu::location::host: return backend_inputs::memory::host;
    case gpu::location::host_pinned: return backend_inputs::memory::host_pinned;
    case gpu::location::gpu: return backend_inputs::memory::gpu;
  }
  return backend_inputs::memory::unknown;
}

// What gdaki::exported_qp with backend_request::automatic gives on this machine, for the
// placement gpu::decide picks for that provider and initiator (a machine without the NIC
// or the GPU is judged as if it had them, with a note). A combination no backend can
// serve is shown as refused, with the reason the export would throw.
std::vector<backend_row> export_backends(const gpu::capabilities& caps) {
  backend_inputs::uar_mapping uar = backend_inputs::uar_mapping::unknown;
  if (caps.uar_gpu_mappable == gpu::tristate::yes) uar = backend_inputs::uar_mapping::yes;
  if (caps.uar_gpu_mappable == gpu::tristate::no) uar = backend_inputs::uar_mapping::no;
  std::vector<backend_row> rows;
  for (const char* provider : {"soft", "mlx5", "libfabric"}) {
    for (initiator who : {initiator::cpu, initiator::gpu}) {
      backend_row r{provider, who == initiator::cpu ? "cpu" : "gpu", "", {}, {}};
      r.inputs.provider = provider;
      r.inputs.initiator = who;
      r.inputs.gpu_uar = uar;
      if (r.provider != "libfabric") {
        gpu::capabilities as = caps;
        as.mlx5_devices = r.provider == "mlx5" ? std::max(1, caps.mlx5_devices) : 0;
        as.rdma_core = r.provider == "mlx5" ? true : caps.rdma_core;
        as.cuda_driver = who == initiator::gpu;
        as.gpu_count = who == initiator::gpu ? std::max(1, caps.gpu_count) : 0;
        const gpu::placement_decision d = gpu::decide(as);
        r.inputs.rings = memory_of(d.rings.value);
        r.inputs.doorbell_record = memory_of(d.doorbell_records.value);
        r.inputs.cqs = memory_of(d.cqs.value);
      }
      try {
        r.choice = choose_backend(r.inputs);
      } catch (const error& e) {
        r.choice.name = "refused";
        r.choice.reason = e.what();
      }
      if (r.provider == "mlx5" && caps.mlx5_devices == 0) r.note = "no mlx5 device here";
      if (who == initiator::gpu && caps.gpu_count == 0) r.note += std::string(r.note.empty() ? "" : "; ") + "no GPU here";
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

struct doctor_options {
  std::string mode = "all";
  bool json = false;
};

int run_doctor(const doctor_options& o) {
  const gpu::capabilities caps = probe_machine();
  const std::vector<check> checks = run_checks(caps);
  std::map<std::string, const check*> by_id;
  for (const check& c : checks) by_id[c.id] = &c;

  nlohmann::json j;
  j["checks"] = nlohmann::json::array();
  for (const check& c : checks) {
    j["checks"].push_back(
        {{"id", c.id}, {"what", c.what}, {"result", verdict_name(c.result)}, {"detail", c.detail}, {"hint", c.hint}});
  }
  j["modes"] = nlohmann::json::array();
  bool requested_ok = false, any_ok = false;
  std::string text;
  for (const mode& m : modes()) {
    std::vector<const check*> missing, warn;
    for (const std::string& id : m.needs) {
      if (by_id.at(id)->result != verdict::present) missing.push_back(by_id.at(id));
    }
    for (const std::string& id : m.wants) {
      if (by_id.at(id)->result != verdict::present) warn.push_back(by_id.at(id));
    }
    const bool can = missing.empty();
    any_ok |= can;
    if (m.name == o.mode) requested_ok = can;
    if (o.mode != "all" && m.name != o.mode) continue;
    nlohmann::json jm = {{"mode", m.name}, {"summary", m.summary}, {"can_run", can}};
    jm["missing"] = nlohmann::json::array();
    for (const check* c : missing) jm["missing"].push_back({{"id", c->id}, {"hint", c->hint}});
    j["modes"].push_back(jm);
    text += "\n" + m.name + ": " + (can ? "can run" : "CANNOT run") + "  (" + m.summary + ")\n";
    for (const check* c : missing) text += "  missing: " + c->what + "\n    hint: " + c->hint + "\n";
    for (const check* c : warn) text += "  " + std::string(verdict_name(c->result)) + ": " + c->what + "\n    hint: " + c->hint + "\n";
  }
  const gpu::placement_decision d = gpu::decide(caps);
  j["placement"] = gpu::describe(d);
  const std::vector<backend_row> backends = export_backends(caps);
  j["export_backends"] = nlohmann::json::array();
  std::string btext;
  for (const backend_row& b : backends) {
    const std::string placement = std::string("rings ") + to_string(b.inputs.rings) + ", doorbell record " +
                                  to_string(b.inputs.doorbell_record) + ", CQs " + to_string(b.inputs.cqs);
    j["export_backends"].push_back({{"provider", b.provider},
                                    {"initiator", b.initiator},
                                    {"backend", b.choice.name},
                                    {"cpu_service", b.choice.cpu_service},
                                    {"reason", b.choice.reason},
                                    {"rings", to_string(b.inputs.rings)},
                                    {"doorbell_record", to_string(b.inputs.doorbell_record)},
                                    {"cqs", to_string(b.inputs.cqs)},
                                    {"note", b.note}});
    btext += "  " + b.provider + ", " + b.initiator + " initiators: " + b.choice.name +
             (b.note.empty() ? "" : "  [" + b.note + "]") +
             (b.provider == "libfabric" ? "" : "\n    placement: " + placement) + "\n    why: " + b.choice.reason +
             "\n";
  }
  j["notes"] = caps.notes;
  const bool ok = o.mode == "all" ? any_ok : requested_ok;
  j["ok"] = ok;

  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return ok ? exit_ok : exit_failure;
  }
  std::printf("Checks:\n");
  for (const check& c : checks) {
    std::printf("  %-18s %-52s %s\n", verdict_name(c.result), c.what.c_str(), c.detail.c_str());
  }
  std::printf("%s\nPlacement gdaki would choose here:\n%s", text.c_str(), gpu::describe(d).c_str());
  std::printf("\nBackend an export gets (gdaki::exported_qp, backend automatic):\n%s", btext.c_str());
  if (!caps.notes.empty()) {
    std::printf("\nProbe notes:\n");
    for (const std::string& n : caps.notes) std::printf("  %s\n", n.c_str());
  }
  std::printf("\n%s\n", o.mode == "all" ? (ok ? "At least one mode can run." : "No mode can run.")
                                        : (ok ? ("Mode " + o.mode + " can run.").c_str()
                                              : ("Mode " + o.mode + " cannot run: see the hints above.").c_str()));
  return ok ? exit_ok : exit_failure;
}

}  // namespace

command_fn add_doctor(CLI::App& app) {
  auto o = std::make_shared<doctor_options>();
  CLI::App* sub = app.add_subcommand(
      "doctor", "Say what each mode (soft, gpu-doorbell, cpu-assisted, proxy, mlx5) needs, what is missing, and how to fix it");
  sub->add_option("-m,--mode", o->mode, "The mode to check; the exit status says whether it can run")
      ->check(CLI::IsMember({"all", "soft", "gpu-doorbell", "cpu-assisted", "proxy", "mlx5"}))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->footer("Exit status: 0 when the mode can run (with --mode all: when any mode can), 1 when it cannot.");
  return [o] { return run_doctor(*o); };
}

}  // namespace gdaki::tool
