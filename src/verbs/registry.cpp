// The provider registry: built-in providers first (explicit list), then any registered at
// run time. Lookups take a lock; they happen only on the control path.
#include <algorithm>
#include <mutex>

#include "builtin_providers.hpp"
#include "gdaki/verbs/provider.hpp"

namespace gdaki::verbs {

namespace {
struct registry {
  std::mutex mu;
  std::vector<const provider_ops*> list;
  registry() : list(detail::builtin_providers()) {}
};
registry& reg() {
  static registry r;
  return r;
}
}  // namespace

status register_provider(const provider_ops* ops) {
  if (ops == nullptr || ops->name == nullptr) return status::invalid;
  auto& r = reg();
  std::lock_guard lk(r.mu);
  if (std::find(r.list.begin(), r.list.end(), ops) == r.list.end()) r.list.push_back(ops);
  return status::ok;
}

std::vector<const provider_ops*> providers() {
  auto& r = reg();
  std::lock_guard lk(r.mu);
  return r.list;
}

std::optional<provider_caps> caps_of(std::string_view provider_name) {
  for (const provider_ops* p : providers()) {
    if (provider_name == p->name) return p->caps;
  }
  return std::nullopt;
}

}  // namespace gdaki::verbs
