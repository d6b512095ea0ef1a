#include "mlx5_devices.hpp"

#include <cerrno>
#include <cstring>

namespace gdaki::mlx5 {

size_t rdma_device_scan::mlx5_count() const {
  size_t n = 0;
  for (const auto& d : devices) n += d.mlx5 ? 1 : 0;
  return n;
}

rdma_device_scan scan_devices(const ibverbs_api& ibv, const mlx5dv_api* dv) {
  rdma_device_scan scan;
  int n = 0;
  errno = 0;
  ibv_device** list = ibv.get_device_list(&n);
  const int err = errno;
  if (list == nullptr || n <= 0) {
    // rdma-core returns NULL with ENOSYS when the kernel has no RDMA stack (no
    // /sys/class/infiniband_verbs), and an empty list when it has one but no device.
    scan.code = status::not_found;
    scan.message = "no RDMA devices found";
    if (list == nullptr && err != 0) {
      scan.message += std::string(" (ibv_get_device_list: ") + std::strerror(err) + ")";
    }
    if (err == ENOSYS) {
      scan.message += ": the kernel RDMA stack is not loaded (no ib_uverbs / no "
                      "/sys/class/infiniband_verbs)";
    }
    scan.message += "; the mlx5 provider is unavailable";
    if (list != nullptr) ibv.free_device_list(list);
    return scan;
  }
  for (int i = 0; i < n; ++i) {
    rdma_device_entry e;
    const char* name = ibv.get_device_name(list[i]);
    e.name = name != nullptr ? name : "";
    e.mlx5 = dv != nullptr && dv->is_supported(list[i]);
    scan.devices.push_back(std::move(e));
  }
  ibv.free_device_list(list);
  const size_t m = scan.mlx5_count();
  if (m == 0) {
    scan.code = status::not_found;
    scan.message = std::to_string(scan.devices.size()) + " RDMA device(s) found, none of them mlx5";
    if (dv == nullptr) scan.message += " (libmlx5.so.1 is not loaded, so none can be checked)";
    scan.message += "; the mlx5 provider is unavailable";
    return scan;
  }
  scan.code = status::ok;
  scan.message = std::to_string(m) + " mlx5 device(s) of " + std::to_string(scan.devices.size()) +
                 " RDMA device(s)";
  return scan;
}

rdma_device_scan scan_devices() {
  std::string why;
  const ibverbs_api* ibv = ibverbs(&why);
  if (ibv == nullptr) {
    rdma_device_scan scan;
    scan.code = status::not_supported;
    scan.message = why;
    return scan;
  }
  // libmlx5 missing is not fatal for listing: the scan says none can be checked.
  return scan_devices(*ibv, mlx5dv());
}

}  // namespace gdaki::mlx5
