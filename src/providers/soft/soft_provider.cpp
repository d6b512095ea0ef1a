// The soft provider: its one const ops table. Registered by src/verbs/builtin_providers.cpp.
#include "soft_ops.hpp"

namespace gdaki::soft {

// Not constexpr: sanitizer builds cannot fold null checks of function pointers; it is
// initialised before main and only read after.
const verbs::provider_ops ops = verbs::with_defaults({
    .name = "soft",
    .caps = {.executes_wqes = true, .nic_on_cpu_threads = true, .mmio_doorbell = false, .doorbell_runs_nic = true,
             .traffic_class = true},
    .list_devices = list_devices,
    .open_device = open_device,
    .close_device = close_device,
    .query_device = query_device,
    .query_port = query_port,
    .alloc_pd = alloc_pd,
    .dealloc_pd = dealloc_pd,
    .reg_mr = reg_mr,
    .dereg_mr = dereg_mr,
    .create_cq = create_cq,
    .destroy_cq = destroy_cq,
    .export_cq = export_cq,
    .cq_in_error = cq_in_error,
    .create_qp = create_qp,
    .modify_qp = modify_qp,
    .query_qp = query_qp,
    .destroy_qp = destroy_qp,
    .export_qp = export_qp,
    .create_srq = create_srq,
    .destroy_srq = destroy_srq,
    .export_srq = export_srq,
    .set_srq_free_list = set_srq_free_list,
});

const verbs::provider_ops* provider_table() { return &ops; }

}  // namespace gdaki::soft
