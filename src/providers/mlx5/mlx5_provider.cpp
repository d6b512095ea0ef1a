// The mlx5 provider: its one const ops table. Registered by src/verbs/builtin_providers.cpp.
// Implemented so far: device listing, open, device and port queries. PDs, MRs, CQs and QPs
// answer not_supported with a sentence saying so (docs/mlx5.md, "What is implemented").
#include "mlx5_ops.hpp"

namespace gdaki::mlx5 {

namespace {

constexpr const char* not_yet = "the mlx5 provider does not implement this yet (see docs/mlx5.md)";

status alloc_pd(provider_object*, provider_object**, uint32_t*, std::string* why) {
  *why = not_yet;
  return status::not_supported;
}
status create_cq(provider_object*, const verbs::cq_init&, provider_object**, uint32_t*, uint32_t*,
                 std::string* why) {
  *why = not_yet;
  return status::not_supported;
}

}  // namespace

// const, not constexpr: under UBSan the null checks on function pointers in with_defaults
// cannot be constant-folded (the soft provider does the same).
const verbs::provider_ops ops = verbs::with_defaults({
    .name = "mlx5",
    .list_devices = list_devices,
    .open_device = open_device,
    .close_device = close_device,
    .query_device = query_device,
    .query_port = query_port,
    .alloc_pd = alloc_pd,
    .create_cq = create_cq,
});

const verbs::provider_ops* provider_table() { return &ops; }

}  // namespace gdaki::mlx5
