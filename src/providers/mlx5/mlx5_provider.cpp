// The mlx5 provider: its one const ops table. Registered by src/verbs/builtin_providers.cpp.
// Devices (list, open, query), PDs and MRs through libibverbs, CQs, SRQs (RMPs) and RC QPs
// as DEVX objects with their export to the data path (docs/mlx5.md, "What is implemented").
#include "mlx5_ops.hpp"

namespace gdaki::mlx5 {

// const, not constexpr: under UBSan the null checks on function pointers in with_defaults
// cannot be constant-folded (the soft provider does the same).
const verbs::provider_ops ops = verbs::with_defaults({
    .name = "mlx5",
    .caps = {.executes_wqes = true, .nic_on_cpu_threads = false, .mmio_doorbell = true, .doorbell_runs_nic = false,
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

}  // namespace gdaki::mlx5
