// Protection domains: MRs and QPs of one PD may be used together; a key from another PD
// fails the lkey/rkey check.
#pragma once

#include <cstdint>
#include <memory>

#include "gdaki/verbs/device.hpp"

namespace gdaki::verbs {

class pd {
 public:
  pd() = default;
  // Allocates a protection domain on dev. Throws gdaki::error.
  explicit pd(const device& dev);
  pd(pd&&) noexcept = default;
  pd& operator=(pd&&) noexcept = default;
  pd(const pd&) = delete;
  pd& operator=(const pd&) = delete;
  ~pd() = default;  // freed once every MR and QP in it is gone

  explicit operator bool() const { return ref_ != nullptr; }
  uint32_t pdn() const { return pdn_; }
  const std::shared_ptr<detail::object_ref>& ref() const { return ref_; }

 private:
  std::shared_ptr<detail::object_ref> ref_;
  uint32_t pdn_ = 0;
};

}  // namespace gdaki::verbs
