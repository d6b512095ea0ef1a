// Devices: listing across providers, opening by name, attributes.
#include "gdaki/verbs/device.hpp"

#include "gdaki/error.hpp"
#include "gdaki/verbs/provider.hpp"
#include "object_ref.hpp"

namespace gdaki::verbs {

std::vector<device_info> device::list() {
  std::vector<device_info> all;
  for (const provider_ops* p : providers()) {
    std::vector<device_info> mine;
    if (p->list_devices(&mine) != status::ok) continue;  // a provider that fails lists nothing
    for (auto& d : mine) all.push_back(std::move(d));
  }
  return all;
}

device device::open(std::string_view name) {
  for (const provider_ops* p : providers()) {
    std::vector<device_info> mine;
    if (p->list_devices(&mine) != status::ok) continue;
    for (const auto& d : mine) {
      if (d.name != name) continue;
      provider_object* impl = nullptr;
      std::string why;
      detail::check(p->open_device(name, &impl, &why), "device " + std::string(name), "open", why);
      device dev;
      dev.ref_ = detail::make_ref(p, impl, p->close_device, std::string(name));
      return dev;
    }
  }
  throw error(status::not_found, "device " + std::string(name) + ": open: no provider has a device of that name");
}

const std::string& device::name() const { return detail::need(ref_, "device").label; }

std::string device::provider_name() const { return detail::need(ref_, "device").ops->name; }

provider_caps device::caps() const { return detail::need(ref_, "device").ops->caps; }

device_attr device::query() const {
  const auto& r = detail::need(ref_, "device");
  device_attr a;
  std::string why;
  detail::check(r.ops->query_device(r.impl, &a, &why), "device " + r.label, "query", why);
  return a;
}

port_attr device::query_port(uint32_t port) const {
  const auto& r = detail::need(ref_, "device");
  port_attr a;
  std::string why;
  detail::check(r.ops->query_port(r.impl, port, &a, &why), "device " + r.label,
                ("query port " + std::to_string(port)).c_str(), why);
  return a;
}

}  // namespace gdaki::verbs
