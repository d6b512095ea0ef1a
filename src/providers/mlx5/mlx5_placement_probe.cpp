// The RDMA half of gpu::probe(): see mlx5_placement_probe.hpp.
#include "mlx5_placement_probe.hpp"

#include "mlx5_devices.hpp"
#include "mlx5_loader.hpp"

namespace gdaki::mlx5 {

void probe_rdma(gpu::capabilities& c) {
  std::string why;
  const ibverbs_api* ibv = ibverbs(&why);
  if (ibv == nullptr) {
    c.notes.push_back(why);
    return;
  }
  for (const auto& m : ibv->missing) c.notes.push_back(m);
  c.ibv_dmabuf_mr = ibv->reg_dmabuf_mr != nullptr;
  const mlx5dv_api* dv = mlx5dv(&why);
  if (dv == nullptr) {
    c.notes.push_back(why);
    return;
  }
  for (const auto& m : dv->missing) c.notes.push_back(m);
  c.devx_umem_dmabuf = dv->devx_umem_reg_ex != nullptr;
  c.rdma_core = true;
  const rdma_device_scan scan = scan_devices(*ibv, dv);
  c.mlx5_devices = static_cast<int>(scan.mlx5_count());
  if (scan.code != status::ok) c.notes.push_back(scan.message);
}

}  // namespace gdaki::mlx5
