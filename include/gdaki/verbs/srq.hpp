// Shared receive queues (SRQ): receive WQEs that every QP created with qp_init::srq
// consumes, in posting order, whichever QP a message arrives on. Such a QP has no receive
// queue of its own; its receive CQEs name the SRQ's WQE (wqe_counter) and the SRQ
// (srqn_uidx), and its flushes never touch the SRQ (IBA 10.2.9.5: WQEs it already took
// complete in error on its CQ, the rest stay for the other QPs).
#pragma once

#include <cstdint>
#include <memory>

#include "gdaki/device/handles.hpp"
#include "gdaki/device/wqe.hpp"
#include "gdaki/verbs/memory.hpp"
#include "gdaki/status.hpp"
#include "gdaki/verbs/pd.hpp"

namespace gdaki::verbs {

struct srq_init {
  uint32_t max_wr = 256;  // receives outstanding at once (the ring gets max_wr + 1 WQEs,
                          // rounded up to a power of 2: the free list keeps one)
  uint32_t max_sge = 4;   // largest scatter list in one receive
  placement ring{};       // where the WQE ring lives (host or host_pinned: its free list is
                          // linked by the CPU at creation)
};

// What the provider granted at creation.
struct srq_caps {
  uint32_t max_wr = 0;   // receives outstanding at once (ring WQEs - 1)
  uint32_t max_sge = 0;  // data segments per WQE
  uint32_t wqes = 0, stride = 0;
  // A ring of `ring_wqes` WQEs (a power of two) of 2^log_stride bytes: one WQE is always
  // kept free (the list's tail), so max_wr is one less. What both providers report.
  static srq_caps of_ring(uint32_t ring_wqes, uint32_t log_stride, uint32_t max_sge) {
    return {ring_wqes - 1, max_sge, ring_wqes, 1u << log_stride};
  }
};

class srq {
 public:
  srq() = default;
  // Creates an SRQ on p. Throws gdaki::error: invalid (max_wr 0 or above 32767, max_sge
  // 0 or above 31), not_supported (the provider has no SRQ, or the placement).
  srq(const pd& p, const srq_init& init);
  srq(srq&&) noexcept = default;
  srq& operator=(srq&& other) noexcept;
  srq(const srq&) = delete;
  srq& operator=(const srq&) = delete;
  // The provider object is released once no QP uses it; the CPU free list (host_handle())
  // goes with this object, so the provider stops returning WQEs to it.
  ~srq();

  explicit operator bool() const { return ref_ != nullptr; }
  uint32_t srqn() const { return srqn_; }
  const srq_caps& caps() const { return caps_; }

  // Destroys the SRQ now. Throws gdaki::error busy while a QP created with it exists
  // (ibv_destroy_srq's EBUSY), and leaves the object as it was.
  void destroy();

  // Posts one receive from the CPU through the handle this object keeps (host_handle()).
  // Returns ok, again (max_wr receives outstanding) or invalid (num_sge > max_sge).
  // An SRQ is driven through one handle: this one, or one export_handle() copy placed for
  // a kernel (each tracks the free list itself).
  // *index (if not null): the WQE used, which its receive CQE names in wqe_counter.
  status post_recv(const dev::sge* sgl, uint32_t num_sge, uint32_t* index = nullptr);

  // The handle post_recv uses: pass it as qp_export_options::srq for CPU pollers, and to
  // dev::srq_free / dev::recv_poll. Stable for the object's life.
  dev::srq_handle* host_handle() const { return host_.get(); }

  // A fresh handle (empty free-list state) for an initiator that posts and frees itself,
  // e.g. copied into GPU memory. Throws gdaki::error busy once host_handle() has posted.
  // From then on a QP's RESET or destroy can not return the WQEs of the receive CQEs it
  // discards (the CPU does not lock a kernel's list): they stay taken (design.md 32).
  dev::srq_handle export_handle() const;

  const std::shared_ptr<detail::object_ref>& ref() const { return ref_; }

 private:
  std::shared_ptr<detail::object_ref> ref_;
  std::shared_ptr<dev::srq_handle> host_;
  uint32_t srqn_ = 0;
  srq_caps caps_;
};

}  // namespace gdaki::verbs
