// Memory registration: a region of caller memory made reachable by the NIC, named locally
// by its lkey and remotely by its rkey, with access flags checked on every use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gdaki/verbs/pd.hpp"

namespace gdaki::verbs {

// Access flags (values of ibv_access_flags). An MR with remote_write or remote_atomic
// must also have local_write (ibv_reg_mr(3)); the same flags gate a QP's incoming ops.
namespace access {
inline constexpr uint32_t local_write = 1;
inline constexpr uint32_t remote_write = 2;
inline constexpr uint32_t remote_read = 4;
inline constexpr uint32_t remote_atomic = 8;
inline constexpr uint32_t all = local_write | remote_write | remote_read | remote_atomic;
}  // namespace access

class mr {
 public:
  mr() = default;
  // Registers [addr, addr + length) in protection domain p with `access` flags. Throws
  // gdaki::error: invalid (null/empty range, remote write/atomic without local write,
  // unknown flags), no_memory (key table full).
  mr(const pd& p, void* addr, size_t length, uint32_t access_flags);
  mr(mr&&) noexcept = default;
  mr& operator=(mr&&) noexcept = default;
  mr(const mr&) = delete;
  mr& operator=(const mr&) = delete;
  ~mr() = default;  // deregisters: once it returns no NIC access to the range is in flight

  explicit operator bool() const { return ref_ != nullptr; }
  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  void* addr() const { return addr_; }
  size_t length() const { return length_; }
  uint32_t access_flags() const { return access_; }

 private:
  std::shared_ptr<detail::object_ref> ref_;
  uint32_t lkey_ = 0, rkey_ = 0, access_ = 0;
  void* addr_ = nullptr;
  size_t length_ = 0;
};

}  // namespace gdaki::verbs
