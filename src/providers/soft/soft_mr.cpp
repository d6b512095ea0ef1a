// Memory regions of the soft provider: entries of the process-wide key table.
#include "soft_objects.hpp"
#include "soft_ops.hpp"
#include "soft_tables.hpp"

namespace gdaki::soft {

status reg_mr(provider_object* pd, void* addr, size_t length, uint32_t access, provider_object** out,
              verbs::mr_keys* k, std::string* why) {
  auto* p = static_cast<soft_pd*>(pd);
  uint32_t rkey = 0;
  const uint32_t key = keys().add(reinterpret_cast<uint64_t>(addr), length, access, p->pdn, &rkey);
  if (key == 0) {
    *why = "memory key table full";
    return status::no_memory;
  }
  auto* m = new soft_mr;
  m->ops = &ops;
  m->key = key;
  k->lkey = key;
  k->rkey = rkey;
  *out = m;
  return status::ok;
}

status dereg_mr(provider_object* mr) {
  auto* m = static_cast<soft_mr*>(mr);
  keys().remove(m->key);  // waits for WQEs in flight that use any key (exclusive lock)
  delete m;
  return status::ok;
}

}  // namespace gdaki::soft
