// internal: what a control-path object holds. The provider object, the table that serves
// it, the references that keep its parents alive, and the destroy slot run when the last
// holder lets go, so children never outlive the provider objects they depend on.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gdaki/error.hpp"
#include "gdaki/verbs/provider.hpp"

namespace gdaki::verbs::detail {

struct object_ref {
  const provider_ops* ops = nullptr;
  provider_object* impl = nullptr;
  status (*destroy)(provider_object*) = nullptr;
  std::vector<std::shared_ptr<object_ref>> parents;  // device, pd, cqs
  std::string label;                                 // "qp 0x000102 on soft0", for errors
  // CQs only: the QP whose exported handle polls this CQ as its send CQ (the device
  // poller rebuilds WQE indexes from it, so it may serve one exported QP). Identity only,
  // never dereferenced; cleared when that QP's object goes.
  std::atomic<const object_ref*> exported_send_qp{nullptr};

  object_ref() = default;
  object_ref(const object_ref&) = delete;
  object_ref& operator=(const object_ref&) = delete;
  ~object_ref() {
    // Destruction cannot report failure; providers release what they can.
    if (impl != nullptr && destroy != nullptr) (void)destroy(impl);
    for (const auto& p : parents) {
      const object_ref* me = this;
      p->exported_send_qp.compare_exchange_strong(me, nullptr);
    }
  }
};

inline std::shared_ptr<object_ref> make_ref(const provider_ops* ops, provider_object* impl,
                                            status (*destroy)(provider_object*), std::string label) {
  auto r = std::make_shared<object_ref>();
  r->ops = ops;
  r->impl = impl;
  r->destroy = destroy;
  r->label = std::move(label);
  return r;
}

// Throws gdaki::error(st, "<label>: <what>: <why>") unless st is ok.
inline void check(status st, const std::string& label, const char* what, const std::string& why) {
  if (st == status::ok) return;
  std::string msg = label + ": " + what;
  msg += ": " + (why.empty() ? std::string(to_string(st)) : why);
  throw error(st, msg);
}

inline const object_ref& need(const std::shared_ptr<object_ref>& r, const char* kind) {
  if (!r) throw error(status::invalid, std::string("empty ") + kind + " handle used");
  return *r;
}

// Device name of a ref chain (the root's label).
inline std::string device_label(const std::shared_ptr<object_ref>& r) {
  const object_ref* p = r.get();
  while (p != nullptr && !p->parents.empty()) p = p->parents.front().get();
  return p ? p->label : std::string("?");
}

}  // namespace gdaki::verbs::detail
