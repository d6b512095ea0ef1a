// internal: the RDMA half of gpu::probe() (gpu/placement.hpp), which the mlx5 provider
// supplies: whether rdma-core loads, which dma-buf entry points it has, how many mlx5
// devices there are. Passed as probe_options::rdma, so the GPU support code never
// includes provider headers.
#pragma once

#include "gpu/placement.hpp"

namespace gdaki::mlx5 {

// Fills c.rdma_core, c.ibv_dmabuf_mr, c.devx_umem_dmabuf and c.mlx5_devices, with a note
// for whatever is missing. Never throws.
void probe_rdma(gpu::capabilities& c);

}  // namespace gdaki::mlx5
