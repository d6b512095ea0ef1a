// Completion queues: a ring of 64-byte mlx5 CQEs plus a doorbell record, written by the
// NIC and polled by the data path (gdaki/device/cq.hpp) through an exported cq_handle.
#pragma once

#include <cstdint>
#include <memory>

#include "gdaki/device/handles.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/memory.hpp"

namespace gdaki::verbs {

struct cq_init {
  uint32_t depth = 256;  // CQEs; rounded up to a power of two (1 is allowed: collapsed use)
  placement ring{};      // where the CQE ring lives (the doorbell record lives beside it)
  // Overrun ignore (CQC `oi`): the NIC does not read set_ci and never fails on a full CQ.
  // The default, as DOCA and UCX GDAKI set it: exported pollers flow-control through the
  // SQ. With false, writing a CQE when set_ci shows no room moves the CQ to error: no
  // further CQEs are written and the QP that tried moves to ERR.
  bool ignore_overrun = true;
};

class cq {
 public:
  cq() = default;
  // Creates a CQ on dev. Every CQE's op_own is initialised to 0xF1 (INVALID, owner 1) so
  // owner-only and wqe_counter pollers both see an empty ring. Throws gdaki::error.
  cq(const device& dev, const cq_init& init);
  cq(cq&&) noexcept = default;
  cq& operator=(cq&&) noexcept = default;
  cq(const cq&) = delete;
  cq& operator=(const cq&) = delete;
  ~cq() = default;  // after it returns the NIC writes no more CQEs into this ring

  explicit operator bool() const { return ref_ != nullptr; }
  uint32_t cqn() const { return cqn_; }
  uint32_t depth() const { return depth_; }

  // Returns the plain-data handle the data path polls: ring, doorbell record, geometry,
  // ci = 0. The caller places it (host memory, host-pinned or GPU memory) and must export
  // once per consumer: ci lives in the handle. Throws gdaki::error.
  dev::cq_handle export_handle() const;

  // True once the CQ went to error (overrun without ignore_overrun).
  bool in_error() const;

  const std::shared_ptr<detail::object_ref>& ref() const { return ref_; }

 private:
  std::shared_ptr<detail::object_ref> ref_;
  uint32_t cqn_ = 0, depth_ = 0;
};

}  // namespace gdaki::verbs
