// Shared receive queues: creation on a PD, destruction refused while a QP uses one, CPU
// posting through a handle the object keeps, export of a fresh handle for an initiator.
#include "gdaki/verbs/srq.hpp"

#include <string>
#include <utility>

#include "gdaki/device/sq.hpp"
#include "gdaki/error.hpp"

#include "object_ref.hpp"

namespace gdaki::verbs {

namespace {

// The geometry from the provider, and the free list every WQE starts on: head at WQE 0,
// tail at the last, each linked to the next by the provider at creation.
dev::srq_handle fresh_handle(const detail::object_ref& r) {
  dev::srq_handle h{};
  std::string why;
  detail::check(r.ops->export_srq(r.impl, &h, &why), r.label, "export", why);
  h.lock = 0;
  h.head = 0;
  h.tail = dev::srq_wqes(h) - 1;
  h.posted = 0;
  h.freed = 0;
  return h;
}

}  // namespace

srq::srq(const pd& p, const srq_init& init) {
  const auto& r = detail::need(p.ref(), "pd");
  if (init.max_wr == 0 || init.max_wr >= (1u << 15)) {
    throw error(status::invalid, r.label + ": create srq: max_wr must be 1..32767 (16-bit WQE indexes)");
  }
  if (init.max_sge == 0 || init.max_sge > 31) {
    throw error(status::invalid, r.label + ": create srq: max_sge must be 1..31 (a WQE holds at most 512 bytes)");
  }
  provider_object* impl = nullptr;
  std::string why;
  detail::check(r.ops->create_srq(r.impl, init, &impl, &srqn_, &caps_, &why), r.label, "create srq", why);
  ref_ = detail::make_ref(r.ops, impl, r.ops->destroy_srq,
                          "srq " + std::to_string(srqn_) + " on " + detail::device_label(p.ref()));
  ref_->parents.push_back(p.ref());
  host_ = std::make_shared<dev::srq_handle>(fresh_handle(*ref_));
  // RESET / destroy of a QP on this SRQ return the WQEs of the receive CQEs they discard
  // to the free list the CPU posts through (provider.hpp set_srq_free_list).
  (void)ref_->ops->set_srq_free_list(ref_->impl, host_.get());
}

srq::~srq() {
  if (ref_) (void)ref_->ops->set_srq_free_list(ref_->impl, nullptr);
}

srq& srq::operator=(srq&& other) noexcept {
  if (this != &other) {
    if (ref_) (void)ref_->ops->set_srq_free_list(ref_->impl, nullptr);  // our host_ goes
    ref_ = std::move(other.ref_);
    host_ = std::move(other.host_);
    srqn_ = std::exchange(other.srqn_, 0);
    caps_ = std::exchange(other.caps_, {});
  }
  return *this;
}

void srq::destroy() {
  const auto& r = detail::need(ref_, "srq");
  // Every QP created with this SRQ holds a reference to it (qp.cpp): more than ours means
  // one still exists, and its responder may still take WQEs from the ring.
  if (ref_.use_count() > 1) {
    throw error(status::busy, r.label + ": destroy: " + std::to_string(ref_.use_count() - 1) +
                                  " QP(s) still receive from it; destroy them first");
  }
  (void)r.ops->set_srq_free_list(r.impl, nullptr);
  ref_.reset();
  host_.reset();
  srqn_ = 0;
  caps_ = {};
}

status srq::post_recv(const dev::sge* sgl, uint32_t num_sge, uint32_t* index) {
  detail::need(ref_, "srq");
  return dev::srq_post(*host_, sgl, num_sge, index);
}

dev::srq_handle srq::export_handle() const {
  const auto& r = detail::need(ref_, "srq");
  if (host_->posted != 0) {
    throw error(status::busy, r.label + ": export: receives were posted through host_handle(); an SRQ's free "
                                        "list is tracked by one handle");
  }
  // From now on a kernel tracks the free list in its copy, which the CPU cannot lock
  // (it may be in GPU memory): a QP's RESET leaves the WQEs of the receive CQEs it discards
  // taken (docs/design.md, "Shared receive queues").
  (void)r.ops->set_srq_free_list(r.impl, nullptr);
  return fresh_handle(r);
}

}  // namespace gdaki::verbs
