// internal: the byte order in which a ConnectX writes the old value of an 8-byte fetch-add
// or compare-and-swap into the requester's result buffer, from QUERY_HCA_CAP's atomic
// caps. The NIC has two requester modes for standard 8-byte atomics: big-endian (the IB
// wire order, 0) and host endianness (1); the Linux driver selects host endianness when
// the NIC supports it, and otherwise reports the device as IBV_ATOMIC_NONE. gdaki's data
// path (device/ops.hpp, atomic_*_wait) hands the result buffer's word to callers as a host
// value, so on a big-endian-mode NIC every result would come back byte-swapped: the
// provider refuses to export there (docs/mlx5.md, "Atomic result byte order").
#pragma once

#include <string>

#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5 {

enum class atomic_results : uint8_t {
  host_order,  // req_8B_endianness_mode 1: results as host words
  big_endian,  // mode 0 (or a reserved value): results as IB wire (big-endian) words
  none,        // no 8-byte compare-swap and fetch-add on RC QPs: no results to misread
};

atomic_results atomic_results_of(const prm_cmd::atomic_caps& c);

// "host order", "big-endian", "no 8-byte atomics"
const char* to_string(atomic_results r);

}  // namespace gdaki::mlx5
