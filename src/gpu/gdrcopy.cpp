#include "gdrcopy.hpp"

#include <mutex>

namespace gdaki::gpu {

const detail::library_spec& gdrcopy_spec() {
  static const detail::library_spec spec{
      "libgdrapi.so.2", "GDAKI_LIBGDRAPI",
      "GDRCopy mappings are unavailable: the CPU cannot read GPU-resident rings or doorbell "
      "records directly, so CPU-assisted doorbells keep their doorbell records in host-pinned "
      "memory",
      "install GDRCopy (libgdrapi and the gdrdrv kernel module, github.com/NVIDIA/gdrcopy)"};
  return spec;
}

status load_gdrcopy(gdrcopy_api& out, std::string& message) {
  const auto& spec = gdrcopy_spec();
  detail::dynlib lib;
  if (status s = detail::dynlib::open(spec, lib, message); s != status::ok) return s;

  gdrcopy_api api{};
  std::vector<std::string> missing_required;
  const char* core = "GDRCopy cannot be used";
  using detail::resolve;
  resolve(spec, lib, api.open, "gdr_open", missing_required, core);
  resolve(spec, lib, api.close, "gdr_close", missing_required, core);
  resolve(spec, lib, api.pin_buffer, "gdr_pin_buffer", missing_required, core);
  resolve(spec, lib, api.unpin_buffer, "gdr_unpin_buffer", missing_required, core);
  resolve(spec, lib, api.map, "gdr_map", missing_required, core);
  resolve(spec, lib, api.unmap, "gdr_unmap", missing_required, core);
  if (!missing_required.empty()) {
    message = missing_required.front() + "; " + spec.disables + "; " + spec.remedy;
    return status::not_supported;
  }
  resolve(spec, lib, api.runtime_get_version, "gdr_runtime_get_version", api.missing,
          "the GDRCopy version cannot be reported (GDRCopy older than 2.1)");
  api.path = lib.path();
  out = std::move(api);
  message.clear();
  return status::ok;
}

const gdrcopy_api* gdrcopy(std::string* message) {
  static std::once_flag once;
  static gdrcopy_api api;
  static std::string why;
  static bool ok = false;
  std::call_once(once, [] { ok = load_gdrcopy(api, why) == status::ok; });
  if (!ok && message != nullptr) *message = why;
  return ok ? &api : nullptr;
}

}  // namespace gdaki::gpu
