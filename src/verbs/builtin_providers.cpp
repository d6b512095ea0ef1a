// The built-in providers, one line each. Explicit references (not static initialisers),
// so a static link of libgdaki keeps every provider. The mlx5 provider adds its line here.
#include "builtin_providers.hpp"

namespace gdaki::soft {
const verbs::provider_ops* provider_table();
}
#if defined(GDAKI_HAVE_MLX5_PROVIDER)  // built only where rdma-core's headers are installed
namespace gdaki::mlx5 {
const verbs::provider_ops* provider_table();
}
#endif

namespace gdaki::verbs::detail {

std::vector<const provider_ops*> builtin_providers() {
  return {
      soft::provider_table(),
#if defined(GDAKI_HAVE_MLX5_PROVIDER)
      mlx5::provider_table(),
#endif
  };
}

}  // namespace gdaki::verbs::detail
