// What a provider declares about the NIC it drives. Exports (the backend choice), gdaki
// doctor and the communicator decide by these, never by comparing provider names, so an
// out-of-tree provider gets the right backend by declaring what its NIC does.
// docs/design.md 25. Host-only.
#pragma once

#include <optional>
#include <string_view>

namespace gdaki::verbs {

struct provider_caps {
  // The NIC reads mlx5 WQEs from the SQ and writes mlx5 CQEs: the direct and CPU-assisted
  // backends can serve it. Without it only descriptors travel (the proxy backend posts
  // them through the provider's own fabric calls, e.g. libfabric).
  bool executes_wqes = false;
  // The NIC is modelled by CPU threads (the soft NIC's engine): the rings, doorbell record
  // and CQs must be CPU-reachable whatever the backend.
  bool nic_on_cpu_threads = false;
  // The doorbell is a store to the NIC's MMIO (UAR) page: GPU initiators ring it directly
  // only where that page can be mapped for the GPU (cuMemHostRegister(IOMEMORY)). Without
  // it the NIC polls the doorbell record, and GPU doorbells never need a mapping.
  bool mmio_doorbell = false;
  // A CPU initiator's doorbell runs the NIC model on the ringing thread (the host hook), so
  // CPU initiators need no service thread.
  bool doorbell_runs_nic = false;
  // The QP honours a traffic class (qp_attr / address.traffic_class).
  bool traffic_class = false;
};

// The capabilities the registered provider `name` declares, or nothing when no provider
// of that name is registered (a libfabric fabric name, a provider not built here).
std::optional<provider_caps> caps_of(std::string_view provider_name);

}  // namespace gdaki::verbs
