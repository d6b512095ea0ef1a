// soft::local_address(): the public face of a device's wire endpoint.
#include "../../../verbs/object_ref.hpp"
#include "../soft_objects.hpp"
#include "../soft_ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/device.hpp"
#include "wire.hpp"

namespace gdaki::soft {

std::array<uint8_t, 16> local_address(const verbs::device& d) {
  const auto& r = d.ref();
  if (!r || r->ops != &ops) throw error(status::not_supported, "local_address: not an open soft device");
  auto* sd = static_cast<soft_device*>(r->impl);
  std::string why;
  if (!sd->wire->listen(&why)) throw error(status::io_error, "device " + d.name() + ": " + why);
  return sd->wire->local_address();
}

}  // namespace gdaki::soft
