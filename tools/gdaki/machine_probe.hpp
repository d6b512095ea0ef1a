// What doctor and devices report about this machine: gpu::probe() with the RDMA half this
// build has (the mlx5 provider's probe where it is compiled in).
#pragma once

#include "gpu/placement.hpp"

namespace gdaki::tool {

gpu::capabilities probe_machine();

}  // namespace gdaki::tool
