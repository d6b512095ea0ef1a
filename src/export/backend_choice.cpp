// choose_backend: the one place that decides which backend an export gets (gdaki doctor
// prints the same decision). See gdaki/export.hpp and docs/proxy.md, "Choosing the
// backend".
//
// Each backend is first checked for whether it can work at all on these inputs (every
// party reaches the memory it touches, the doorbell reaches the NIC); a request for one
// that cannot is refused with the cause, and the automatic choice takes the fastest one
// that can: direct, then cpu-assisted, then proxy.
#include <string>

#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/provider_caps.hpp"

namespace gdaki {

namespace {

using memory = backend_inputs::memory;

backend_choice make(dev::qp_backend b, dev::doorbell_mode m, bool service, const char* name, std::string reason) {
  return {b, m, service, name, std::move(reason)};
}

backend_choice direct(std::string reason) {
  return make(dev::qp_backend::direct, dev::doorbell_mode::db_store, false, "direct", std::move(reason));
}
backend_choice cpu_assisted(std::string reason) {
  return make(dev::qp_backend::direct, dev::doorbell_mode::cpu_assisted, true, "cpu-assisted", std::move(reason));
}
backend_choice via_proxy(std::string reason) {
  return make(dev::qp_backend::proxy, dev::doorbell_mode::db_store, true, "proxy", std::move(reason));
}

[[noreturn]] void refuse(const backend_inputs& in, const char* what, const std::string& why) {
  throw error(status::not_supported, std::string("export: the ") + what + " backend cannot run on provider '" +
                                         in.provider + "': " + why);
}

bool cpu_reaches(memory m) { return m != memory::gpu; }
bool gpu_reaches(memory m) { return m != memory::host; }

// Whether a thread of this kind reaches the QP's rings, doorbell record and CQs; if not,
// appends "<who> cannot reach the <object> (<kind> memory)" for each one it cannot.
bool reaches_queues(const backend_inputs& in, bool gpu_thread, const char* who, std::string* why) {
  bool ok = true;
  auto check = [&](memory m, const char* object) {
    if (m == memory::unknown || (gpu_thread ? gpu_reaches(m) : cpu_reaches(m))) return;
    if (!ok) *why += "; ";
    *why += std::string(who) + " cannot reach the " + object + " (" + to_string(m) + " memory)";
    ok = false;
  };
  check(in.rings, "work-queue rings");
  check(in.doorbell_record, "doorbell record");
  check(in.cqs, "CQ rings");
  return ok;
}

// Why each backend cannot work on `in` (empty: it can). A NIC modelled by CPU threads (the
// soft NIC's engine) is a CPU thread whatever the backend, so the queues must be
// CPU-reachable for all three there.
struct feasibility {
  std::string direct, cpu_assisted, proxy;
};

feasibility check_backends(const backend_inputs& in, const verbs::provider_caps& caps) {
  const bool gpu = in.initiator == initiator::gpu;
  const char* initiators = gpu ? "GPU initiators" : "CPU initiators";
  feasibility f;
  std::string engine;
  if (caps.nic_on_cpu_threads) reaches_queues(in, false, "the NIC's engine (a CPU thread)", &engine);

  reaches_queues(in, gpu, initiators, &f.direct);
  if (gpu && caps.mmio_doorbell && in.gpu_uar == backend_inputs::uar_mapping::no) {
    if (!f.direct.empty()) f.direct += "; ";
    f.direct += "GPU stores cannot reach the NIC's doorbell (UAR) page (cuMemHostRegister(IOMEMORY) of it failed)";
  }

  reaches_queues(in, gpu, initiators, &f.cpu_assisted);
  if (in.doorbell_record != memory::unknown && !cpu_reaches(in.doorbell_record)) {
    if (!f.cpu_assisted.empty()) f.cpu_assisted += "; ";
    f.cpu_assisted += "the CPU doorbell service cannot read a doorbell record in gpu memory";
  }

  // The proxy thread writes the WQEs and the doorbell record and polls the CQs itself.
  reaches_queues(in, false, "the proxy thread (CPU)", &f.proxy);

  for (std::string* s : {&f.direct, &f.cpu_assisted, &f.proxy}) {
    if (!engine.empty() && s->find(engine) == std::string::npos) *s += (s->empty() ? "" : "; ") + engine;
  }
  return f;
}

std::string unreachable_all(const feasibility& f) {
  return "no backend can work with this placement: direct: " + f.direct + "; cpu-assisted: " + f.cpu_assisted +
         "; proxy: " + f.proxy + " (place the rings, doorbell record and CQs where the initiators and the CPU "
         "both reach them: host_pinned)";
}

}  // namespace

const char* to_string(backend_inputs::memory m) {
  switch (m) {
    case memory::unknown: return "unknown";
    case memory::host: return "host";
    case memory::host_pinned: return "host_pinned";
    case memory::gpu: return "gpu";
  }
  return "?";
}

backend_choice choose_backend(const backend_inputs& in, backend_request request) {
  const bool gpu = in.initiator == initiator::gpu;
  const verbs::provider_caps caps = in.caps ? *in.caps : verbs::caps_of(in.provider).value_or(verbs::provider_caps{});
  if (!caps.executes_wqes) {
    // A fabric that does not execute mlx5 WQEs (libfabric's tcp, shm, verbs, efa, ...):
    // only descriptors can travel, and a CPU proxy turns them into fabric operations.
    if (request == backend_request::direct || request == backend_request::cpu_assisted) {
      refuse(in, request == backend_request::direct ? "direct" : "cpu-assisted",
             "the NIC does not execute mlx5 WQEs; use the proxy backend (libfabric poster)");
    }
    return via_proxy("provider '" + in.provider +
                 "' does not execute mlx5 WQEs: initiators write descriptors and a CPU proxy posts them "
                 "through libfabric");
  }
  const feasibility f = check_backends(in, caps);
  switch (request) {
    case backend_request::direct:
      if (!f.direct.empty()) refuse(in, "direct", f.direct + "; use cpu-assisted or proxy where they can run");
      return direct("requested");
    case backend_request::cpu_assisted:
      if (!f.cpu_assisted.empty()) refuse(in, "cpu-assisted", f.cpu_assisted);
      return cpu_assisted("requested");
    case backend_request::proxy:
      if (!f.proxy.empty()) refuse(in, "proxy", f.proxy);
      return via_proxy("requested");
    case backend_request::automatic:
      break;
  }
  // Direct where it surely works: a NIC that polls doorbell records, and CPU initiators
  // (they store to an MMIO doorbell page themselves). GPU stores to an MMIO doorbell need
  // the page mapped for the GPU.
  const bool gpu_mmio = gpu && caps.mmio_doorbell;
  if (f.direct.empty() && !gpu_mmio) {
    if (!caps.mmio_doorbell) {
      if (gpu) {
        return direct(in.provider + " NIC, GPU initiators: GPU threads write WQEs and doorbell records in host-pinned "
                      "memory and the NIC's engine thread polls the doorbell records; no extra CPU service");
      }
      return direct(in.provider + " NIC, CPU initiators: " +
                    (caps.doorbell_runs_nic ? "the thread that rings the doorbell runs the NIC model (host hook)"
                                            : "the NIC polls the doorbell records") +
                    "; no extra CPU service");
    }
    return direct(in.provider + ", CPU initiators: CPU threads store to the doorbell (UAR) page themselves");
  }
  if (gpu_mmio && in.gpu_uar == backend_inputs::uar_mapping::yes && f.direct.empty()) {
    return direct(in.provider + ", GPU initiators: GPU stores reach the doorbell (UAR) page (cuMemHostRegister(IOMEMORY) "
                  "of it works), so GPU threads ring the NIC themselves");
  }
  const std::string who = in.provider + ", " + (gpu ? "GPU" : "CPU") + " initiators: ";
  const char* uar_why = in.gpu_uar == backend_inputs::uar_mapping::no
                            ? "GPU stores cannot reach the doorbell (UAR) page (cuMemHostRegister(IOMEMORY) failed: "
                              "IOMMU, ACS or virtualization)"
                            : "whether GPU stores reach the doorbell (UAR) page is not known (only mapping a real "
                              "UAR page tells)";
  // Reached only by GPU initiators on an MMIO doorbell whose mapping is not confirmed (direct
  // works everywhere else cpu-assisted could).
  if (f.cpu_assisted.empty()) {
    std::string why = who + uar_why + ", so GPU threads write WQEs and doorbell records and a CPU thread rings";
    if (in.gpu_uar == backend_inputs::uar_mapping::unknown) why += "; request direct to override";
    return cpu_assisted(why);
  }
  if (f.proxy.empty()) {
    return via_proxy(who + "direct cannot run (" + (f.direct.empty() ? std::string(uar_why) : f.direct) +
                     ") nor cpu-assisted (" + f.cpu_assisted +
                     "), so the initiators write descriptors into a ring the export places where they reach it and "
                     "a CPU proxy posts the WQEs");
  }
  if (f.direct.empty()) {
    // Only direct can reach this placement, and the UAR mapping is not known to fail: the
    // export maps the UAR page and fails with the cause if it cannot.
    return direct(who + "the only backend this placement allows (cpu-assisted: " + f.cpu_assisted + "; proxy: " +
                  f.proxy + "); " + uar_why + ", so the export maps the UAR page and fails naming the cause if it "
                  "cannot");
  }
  refuse(in, "automatic", unreachable_all(f));
}

}  // namespace gdaki
