// The libfabric poster when gdaki was built without libfabric's headers: open() says so.
// Every other member is unreachable (no poster can be constructed).
#include "gdaki/proxy/libfabric_poster.hpp"

namespace gdaki::proxy {

struct libfabric_poster::impl {};

libfabric_poster::libfabric_poster(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
libfabric_poster::~libfabric_poster() = default;

status libfabric_poster::open(const libfabric_options&, std::unique_ptr<libfabric_poster>*, std::string* why) {
  if (why != nullptr) *why = "gdaki was built without libfabric headers (install libfabric-dev and rebuild)";
  return status::not_supported;
}
status libfabric_poster::register_memory(void*, size_t, uint32_t*) { return status::not_supported; }
status libfabric_poster::export_region(uint32_t, region_export*) const { return status::not_supported; }
std::vector<uint8_t> libfabric_poster::address() const { return {}; }
status libfabric_poster::add_peer(const std::vector<uint8_t>&, uint16_t*) { return status::not_supported; }
status libfabric_poster::add_remote_region(uint16_t, const region_export&, uint32_t*) { return status::not_supported; }
status libfabric_poster::post(const descriptor&, uint64_t) { return status::not_supported; }
size_t libfabric_poster::poll(completion*, size_t) { return 0; }
const char* libfabric_poster::name() const { return "libfabric:unavailable"; }
const std::string& libfabric_poster::provider() const {
  static const std::string none;
  return none;
}
uint64_t libfabric_poster::mr_mode() const { return 0; }

}  // namespace gdaki::proxy
