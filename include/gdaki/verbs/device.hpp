// Devices: listing, opening by name, device and port attributes. A device is the root of
// every other control-path object (pd.hpp, cq.hpp, ...); those objects keep their device
// alive, so destruction order is free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gdaki/verbs/provider_caps.hpp"

namespace gdaki::verbs {

namespace detail {
struct object_ref;  // internal: provider ops + provider object + parent references
}

// One entry of device::list().
struct device_info {
  std::string name;         // e.g. "soft0", "mlx5_0"
  std::string provider;     // the provider that serves it: "soft", "mlx5"
  std::string description;  // one line, for `gdaki info`
};

struct device_attr {
  std::string name;
  std::string provider;
  uint64_t node_guid = 0;
  uint32_t vendor_id = 0;
  uint32_t vendor_part_id = 0;
  uint32_t phys_port_cnt = 1;
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;        // largest SQ, in WQEBBs
  uint32_t max_recv_wr = 0;      // largest RQ, in receive WQEs
  uint32_t max_sge = 0;          // largest gather / scatter list
  uint32_t max_inline = 0;       // largest inline payload, bytes
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
  uint64_t max_mr_size = 0;
  uint32_t max_pd = 0;
  uint32_t max_qp_rd_atom = 0;   // outstanding READ/atomic per QP (requester)
  uint32_t max_qp_dest_rd_atom = 0;
  bool atomic_host_endian = true;  // atomics operate on host-order words (IBV_ATOMIC_HCA)
  bool masked_atomics = false;     // ATOMIC_MASKED_CS / _FA (4 and 8 bytes)
};

enum class port_state : uint32_t { down = 1, init = 2, armed = 3, active = 4 };
enum class link_layer : uint32_t { infiniband = 1, ethernet = 2 };
enum class path_mtu : uint32_t { mtu_256 = 1, mtu_512 = 2, mtu_1024 = 3, mtu_2048 = 4, mtu_4096 = 5 };

struct port_attr {
  port_state state = port_state::down;
  path_mtu max_mtu = path_mtu::mtu_4096;
  path_mtu active_mtu = path_mtu::mtu_4096;
  link_layer layer = link_layer::infiniband;
  uint16_t lid = 0;
  uint8_t gid[16] = {};  // GID index 0
  uint32_t gid_tbl_len = 1;
  uint32_t pkey_tbl_len = 1;
};

class device {
 public:
  // Returns every device of every registered provider.
  static std::vector<device_info> list();

  // Opens the device called `name` (see list()). Throws gdaki::error: not_found when no
  // provider has it, or the provider's reason when opening fails.
  static device open(std::string_view name);

  device() = default;  // an empty handle; open() gives a usable one
  device(device&&) noexcept = default;
  device& operator=(device&&) noexcept = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  ~device() = default;  // closes the device once every object created from it is gone

  explicit operator bool() const { return ref_ != nullptr; }
  const std::string& name() const;
  std::string provider_name() const;
  // What the device's provider declares its NIC does (decide by these, not by the name).
  provider_caps caps() const;

  // Returns the device attributes. Throws gdaki::error on failure.
  device_attr query() const;
  // Returns the attributes of port `port` (1-based). Throws gdaki::error (invalid port).
  port_attr query_port(uint32_t port = 1) const;

  // internal: the shared reference children hold.
  const std::shared_ptr<detail::object_ref>& ref() const { return ref_; }

 private:
  std::shared_ptr<detail::object_ref> ref_;
};

}  // namespace gdaki::verbs
