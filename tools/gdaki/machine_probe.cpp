// probe_machine(): see machine_probe.hpp.
#include "machine_probe.hpp"

#if defined(GDAKI_HAVE_MLX5_PROVIDER)
#include "providers/mlx5/mlx5_placement_probe.hpp"
#endif

namespace gdaki::tool {

gpu::capabilities probe_machine() {
  gpu::probe_options o;
#if defined(GDAKI_HAVE_MLX5_PROVIDER)
  o.rdma = &mlx5::probe_rdma;
  return gpu::probe(o);
#else
  gpu::capabilities c = gpu::probe(o);
  c.notes.push_back("gdaki was built without rdma-core headers (libibverbs-dev): the mlx5 provider is not compiled in");
  return c;
#endif
}

}  // namespace gdaki::tool
