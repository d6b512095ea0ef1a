// Memory registration. Flag rules that hold for every provider are checked here, so each
// provider sees only well-formed requests.
#include "gdaki/verbs/mr.hpp"

#include <cstdio>

#include "object_ref.hpp"

namespace gdaki::verbs {

mr::mr(const pd& p, void* addr, size_t length, uint32_t access_flags) {
  const auto& r = detail::need(p.ref(), "pd");
  char range[96];
  std::snprintf(range, sizeof range, "register [%p, +%zu) access 0x%x", addr, length, access_flags);
  if (addr == nullptr || length == 0) throw error(status::invalid, r.label + ": " + range + ": empty range");
  if ((access_flags & ~access::all) != 0) throw error(status::invalid, r.label + ": " + range + ": unknown access flags");
  if ((access_flags & (access::remote_write | access::remote_atomic)) != 0 && !(access_flags & access::local_write)) {
    throw error(status::invalid,
                r.label + ": " + range + ": remote write or remote atomic access needs local write (ibv_reg_mr(3))");
  }
  provider_object* impl = nullptr;
  mr_keys keys;
  std::string why;
  detail::check(r.ops->reg_mr(r.impl, addr, length, access_flags, &impl, &keys, &why), r.label, range, why);
  char label[64];
  std::snprintf(label, sizeof label, "mr lkey 0x%08x", keys.lkey);
  ref_ = detail::make_ref(r.ops, impl, r.ops->dereg_mr, std::string(label) + " on " + detail::device_label(p.ref()));
  ref_->parents.push_back(p.ref());
  lkey_ = keys.lkey;
  rkey_ = keys.rkey;
  access_ = access_flags;
  addr_ = addr;
  length_ = length;
}

}  // namespace gdaki::verbs
