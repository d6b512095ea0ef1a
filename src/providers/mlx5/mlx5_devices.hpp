// internal: which RDMA devices this machine has and which of them the mlx5 provider can
// drive. Used by the provider's device listing, by placement::probe() and by `gdaki doctor`.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gdaki/status.hpp"
#include "mlx5_loader.hpp"

namespace gdaki::mlx5 {

struct rdma_device_entry {
  std::string name;  // the kernel's name, e.g. "mlx5_0"
  bool mlx5 = false;  // mlx5dv_is_supported(): a ConnectX the provider can drive
};

struct rdma_device_scan {
  // ok: at least one mlx5 device; not_found: no RDMA device, or none of them is mlx5;
  // not_supported: rdma-core could not be loaded.
  status code = status::not_found;
  std::string message;  // why, in words, when code != ok; a one-line summary otherwise
  std::vector<rdma_device_entry> devices;

  size_t mlx5_count() const;
};

// Lists devices through `ibv`; `dv` (may be null) decides which are mlx5. Never throws.
rdma_device_scan scan_devices(const ibverbs_api& ibv, const mlx5dv_api* dv);

// The same through the process-wide loaders; reports a missing rdma-core as not_supported.
rdma_device_scan scan_devices();

}  // namespace gdaki::mlx5
