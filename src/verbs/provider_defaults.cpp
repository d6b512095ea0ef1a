// The not_supported defaults that fill empty provider slots (provider.hpp with_defaults).
#include "gdaki/verbs/provider.hpp"

namespace gdaki::verbs::defaults {

namespace {
status nope(std::string* why) {
  if (why) *why = "not supported by this provider";
  return status::not_supported;
}
}  // namespace

status list_devices(std::vector<device_info>*) { return status::ok; }  // a provider with no devices
status open_device(std::string_view, provider_object**, std::string* why) { return nope(why); }
status destroy(provider_object*) { return status::not_supported; }
status query_device(provider_object*, device_attr*, std::string* why) { return nope(why); }
status query_port(provider_object*, uint32_t, port_attr*, std::string* why) { return nope(why); }
status alloc_pd(provider_object*, provider_object**, uint32_t*, std::string* why) { return nope(why); }
status reg_mr(provider_object*, void*, size_t, uint32_t, provider_object**, mr_keys*, std::string* why) {
  return nope(why);
}
status create_cq(provider_object*, const cq_init&, provider_object**, uint32_t*, uint32_t*, std::string* why) {
  return nope(why);
}
status export_cq(provider_object*, dev::cq_handle*, std::string* why) { return nope(why); }
status cq_in_error(provider_object*, bool*) { return status::not_supported; }
status create_qp(provider_object*, const qp_create_args&, provider_object**, uint32_t*, qp_caps*,
                 std::string* why) {
  return nope(why);
}
status modify_qp(provider_object*, const qp_attr&, uint32_t, std::string* why) { return nope(why); }
status query_qp(provider_object*, qp_attr*, std::string* why) { return nope(why); }
status export_qp(provider_object*, const qp_export_options&, dev::qp_handle*, std::string* why) {
  return nope(why);
}

status create_srq(provider_object*, const srq_init&, provider_object**, uint32_t*, srq_caps*, std::string* why) {
  if (why) *why = "shared receive queues are not supported by this provider";
  return status::not_supported;
}
status export_srq(provider_object*, dev::srq_handle*, std::string* why) { return nope(why); }
status set_srq_free_list(provider_object*, dev::srq_handle*) { return status::not_supported; }

}  // namespace gdaki::verbs::defaults
