// Completion queues.
#include "gdaki/verbs/cq.hpp"

#include "object_ref.hpp"

namespace gdaki::verbs {

cq::cq(const device& dev, const cq_init& init) {
  const auto& d = detail::need(dev.ref(), "device");
  if (init.depth == 0) throw error(status::invalid, "device " + d.label + ": create cq: depth 0");
  provider_object* impl = nullptr;
  std::string why;
  detail::check(d.ops->create_cq(d.impl, init, &impl, &cqn_, &depth_, &why), "device " + d.label, "create cq", why);
  ref_ = detail::make_ref(d.ops, impl, d.ops->destroy_cq, "cq " + std::to_string(cqn_) + " on " + d.label);
  ref_->parents.push_back(dev.ref());
}

dev::cq_handle cq::export_handle() const {
  const auto& r = detail::need(ref_, "cq");
  dev::cq_handle h{};
  std::string why;
  detail::check(r.ops->export_cq(r.impl, &h, &why), r.label, "export", why);
  return h;
}

bool cq::in_error() const {
  const auto& r = detail::need(ref_, "cq");
  bool e = false;
  detail::check(r.ops->cq_in_error(r.impl, &e), r.label, "query error state", "");
  return e;
}

}  // namespace gdaki::verbs
