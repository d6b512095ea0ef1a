// See mlx5_atomic_results.hpp.
#include "mlx5_atomic_results.hpp"

namespace gdaki::mlx5 {

atomic_results atomic_results_of(const prm_cmd::atomic_caps& c) {
  const bool standard_8b = c.cmp_swap && c.fetch_add && (c.atomic_size_qp & 8u) != 0;
  if (!standard_8b) return atomic_results::none;
  // Only mode 1 is host order; 0 is big-endian and 2, 3 are reserved, so read as
  // not-host-order rather than trusted.
  return c.req_8B_endianness_mode == 1 ? atomic_results::host_order : atomic_results::big_endian;
}

const char* to_string(atomic_results r) {
  switch (r) {
    case atomic_results::host_order: return "host order";
    case atomic_results::big_endian: return "big-endian";
    case atomic_results::none: return "no 8-byte atomics";
  }
  return "?";
}

}  // namespace gdaki::mlx5
