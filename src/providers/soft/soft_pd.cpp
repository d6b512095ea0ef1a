// Protection domains of the soft provider: just a number that MRs and QPs carry.
#include "soft_objects.hpp"
#include "soft_ops.hpp"
#include "soft_tables.hpp"

namespace gdaki::soft {

status alloc_pd(provider_object* dev, provider_object** out, uint32_t* pdn, std::string*) {
  auto* p = new soft_pd;
  p->ops = &ops;
  p->dev = static_cast<soft_device*>(dev);
  p->pdn = next_pdn();
  *pdn = p->pdn;
  *out = p;
  return status::ok;
}

status dealloc_pd(provider_object* pd) {
  delete static_cast<soft_pd*>(pd);
  return status::ok;
}

}  // namespace gdaki::soft
