// internal: the mlx5 provider's slot implementations, one file per object.
#pragma once

#include "gdaki/verbs/provider.hpp"

namespace gdaki::mlx5 {

using verbs::provider_object;

extern const verbs::provider_ops ops;

// mlx5_device.cpp
status list_devices(std::vector<verbs::device_info>* out);
status open_device(std::string_view name, provider_object** out, std::string* why);
status close_device(provider_object* dev);
status query_device(provider_object* dev, verbs::device_attr* out, std::string* why);
status query_port(provider_object* dev, uint32_t port, verbs::port_attr* out, std::string* why);

// Why the provider serves no device on this machine (rdma-core missing, no RDMA device,
// none of them mlx5), or an empty string when it serves at least one. For `gdaki doctor`
// and error messages: the registry only sees an empty device list.
std::string unavailable_reason();

}  // namespace gdaki::mlx5
