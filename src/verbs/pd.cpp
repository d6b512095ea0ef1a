// Protection domains.
#include "gdaki/verbs/pd.hpp"

#include "object_ref.hpp"

namespace gdaki::verbs {

pd::pd(const device& dev) {
  const auto& d = detail::need(dev.ref(), "device");
  provider_object* impl = nullptr;
  std::string why;
  detail::check(d.ops->alloc_pd(d.impl, &impl, &pdn_, &why), "device " + d.label, "alloc pd", why);
  ref_ = detail::make_ref(d.ops, impl, d.ops->dealloc_pd, "pd " + std::to_string(pdn_) + " on " + d.label);
  ref_->parents.push_back(dev.ref());
}

}  // namespace gdaki::verbs
