// choose_backend: the one place that decides which backend an export gets (gdaki doctor
// prints the same decision). See gdaki/export.hpp.
#include <string>

#include "gdaki/error.hpp"
#include "gdaki/export.hpp"

namespace gdaki {

namespace {

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

}  // namespace

backend_choice choose_backend(const backend_inputs& in, backend_request request) {
  const bool gpu = in.initiator == initiator::gpu;
  const bool wqe_nic = in.provider == "soft" || in.provider == "mlx5";
  if (!wqe_nic) {
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
  switch (request) {
    case backend_request::direct:
      if (gpu && in.provider == "mlx5" && in.gpu_uar == backend_inputs::uar_mapping::no) {
        refuse(in, "direct", "GPU stores cannot reach the NIC's doorbell (UAR) page (cuMemHostRegister(IOMEMORY) "
                             "of it failed); use cpu-assisted or proxy");
      }
      return direct("requested");
    case backend_request::cpu_assisted:
      return cpu_assisted("requested");
    case backend_request::proxy:
      return via_proxy("requested");
    case backend_request::automatic:
      break;
  }
  if (in.provider == "soft") {
    return gpu ? direct("soft NIC, GPU initiators: GPU threads write WQEs and doorbell records in host-pinned "
                        "memory and the soft NIC's engine thread polls the doorbell records; no extra CPU service")
               : direct("soft NIC, CPU initiators: the thread that rings the doorbell runs the NIC model (host "
                        "hook); no extra CPU service");
  }
  if (!gpu) return direct("mlx5, CPU initiators: CPU threads store to the doorbell (UAR) page themselves");
  switch (in.gpu_uar) {
    case backend_inputs::uar_mapping::yes:
      return direct("mlx5, GPU initiators: GPU stores reach the doorbell (UAR) page (cuMemHostRegister(IOMEMORY) "
                    "of it works), so GPU threads ring the NIC themselves");
    case backend_inputs::uar_mapping::no:
      return cpu_assisted("mlx5, GPU initiators: GPU stores cannot reach the doorbell (UAR) page "
                          "(cuMemHostRegister(IOMEMORY) failed: IOMMU, ACS or virtualization), so GPU threads write "
                          "WQEs and doorbell records and a CPU thread rings");
    case backend_inputs::uar_mapping::unknown:
      break;
  }
  return cpu_assisted("mlx5, GPU initiators: whether GPU stores reach the doorbell (UAR) page is not known "
                      "(only mapping a real UAR page tells), so the safe choice: GPU threads write WQEs and doorbell "
                      "records and a CPU thread rings; request direct to override");
}

}  // namespace gdaki
