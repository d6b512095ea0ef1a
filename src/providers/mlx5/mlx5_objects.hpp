// internal: the mlx5 provider's objects (device, PD, MR, CQ, SRQ, QP) and the memory they own.
// Every rdma-core call goes through the device's ibverbs_api / mlx5dv_api tables, so tests
// can hand a device fake tables (make_device_for_test) and watch the command mailboxes.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "gdaki/verbs/provider.hpp"
#include "mlx5_loader.hpp"
#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5 {

using verbs::provider_object;

struct device_obj : provider_object {
  std::string name;
  const ibverbs_api* ibv = nullptr;
  const mlx5dv_api* dv = nullptr;
  ibv_context* ctx = nullptr;
  bool devx = false;  // opened with MLX5DV_CONTEXT_FLAGS_DEVX: DEVX objects and umems work
  // Shared by this device's CQs (their uar_page is only used for arming), created on the
  // first CQ and freed with the device; the completion EQ number, queried once.
  std::mutex mu;
  mlx5dv_devx_uar* cq_uar = nullptr;
  bool have_eqn = false;
  uint32_t eqn = 0;
};

// Memory for a ring or a doorbell record: provider-allocated (host: page-aligned
// malloc; host_pinned: cuMemHostAlloc; device: cuMemAlloc) or the caller's buffer.
class dev_memory {
 public:
  dev_memory() = default;
  dev_memory(const dev_memory&) = delete;
  dev_memory& operator=(const dev_memory&) = delete;
  ~dev_memory() { release(); }

  // Uses p.buffer when set (checked: size, 4096-byte alignment), else allocates `bytes` of
  // p.kind. Returns ok, invalid, not_supported (no CUDA driver for GPU kinds) or no_memory.
  status place(const verbs::placement& p, size_t bytes, const char* what, std::string* why);
  status allocate(verbs::memory_kind kind, size_t bytes, const char* what, std::string* why);
  // Sets every byte to `value`: memset for host kinds, cuMemsetD8 for GPU memory (no CPU
  // store ever reaches GPU memory).
  status fill(uint8_t value, std::string* why);
  void release();

  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  // Bytes usable at data(): the page-rounded allocation, or the caller's buffer size.
  size_t capacity() const { return cap_; }
  verbs::memory_kind kind() const { return kind_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
  size_t cap_ = 0;
  verbs::memory_kind kind_ = verbs::memory_kind::host;
  bool owned_ = false;
};

// Registers `m` as a DEVX umem. GPU memory: through a dma-buf fd
// (cuMemGetHandleForAddressRange + mlx5dv_devx_umem_reg_ex) when both exist, else by
// virtual address (needs nvidia-peermem). Returns ok or io_error / not_supported, naming
// `what` and the cause.
status register_umem(device_obj* d, const dev_memory& m, const char* what, mlx5dv_devx_umem** out, std::string* why);

// Runs a DEVX create / modify / query and turns a failure into "<OPCODE> failed: status
// ..., syndrome ... (<call>: <errno text>)". `rc` is the call's result (0, or errno).
status check_cmd(uint16_t opcode, int rc, const void* out, size_t outlen, const char* call, std::string* why);

// QUERY_HCA_CAP (atomic caps, current values) through mlx5dv_devx_general_cmd.
status query_atomic_caps(device_obj* d, prm_cmd::atomic_caps* out);

// The UAR page of the device's CQs and its EQ number (created on first use).
status cq_resources(device_obj* d, uint32_t* uar_page, uint32_t* eqn, std::string* why);
// A non-cached UAR when the device allows one, else a BlueFlame-type UAR.
mlx5dv_devx_uar* alloc_uar(device_obj* d, std::string* why);

struct pd_obj : provider_object {
  device_obj* dev = nullptr;
  ibv_pd* pd = nullptr;
  uint32_t pdn = 0;
};

struct mr_obj : provider_object {
  device_obj* dev = nullptr;
  ibv_mr* mr = nullptr;
};

struct cq_obj : provider_object {
  device_obj* dev = nullptr;
  dev_memory ring, dbr;
  mlx5dv_devx_umem* ring_umem = nullptr;
  mlx5dv_devx_umem* dbr_umem = nullptr;
  mlx5dv_devx_obj* obj = nullptr;
  uint32_t cqn = 0;
  uint32_t log_n = 0;
};

// Drops the CQEs of QP `qpn` that no poller consumed yet from `c` and advances its
// consumer index past them (core/cq_clean.hpp), as a QP's RESET and destroy must; the
// receive CQEs of a QP on an SRQ give their WQEs back to `srq` (the free list the CPU
// tracks, or null: core/cq_clean.hpp srq_wqe_returner). The ring must be CPU-reachable
// (host or host-pinned): not_supported, naming the CQ, for a ring in GPU memory.
status discard_qp_completions(cq_obj* c, uint32_t qpn, dev::srq_handle* srq, std::string* why);

// A shared receive queue: an RMP whose linked-list WQ (ring + doorbell record) lives in
// memory gdaki places, as a QP's work queue does (mlx5_srq.cpp).
struct srq_obj : provider_object {
  pd_obj* pd = nullptr;
  dev_memory ring, dbr;
  mlx5dv_devx_umem* ring_umem = nullptr;
  mlx5dv_devx_umem* dbr_umem = nullptr;
  mlx5dv_devx_obj* obj = nullptr;
  uint32_t srqn = 0;  // the RMP number, which QPs name in srqn_rmpn_xrqn
  uint32_t log_n = 0, log_stride = 0, max_sge = 0;
  std::atomic<uint32_t> qps{0};  // QPs created on it and not yet destroyed
  // The CPU's free list (set_srq_free_list): a QP's RESET returns discarded receives to it.
  std::atomic<dev::srq_handle*> free_list{nullptr};
};

struct qp_obj : provider_object {
  pd_obj* pd = nullptr;
  cq_obj* scq = nullptr;
  cq_obj* rcq = nullptr;
  srq_obj* srq = nullptr;  // receives come from here (the work queue then holds the SQ only)
  dev_memory wq, dbr;  // wq: RQ at offset 0, SQ at rq_bytes (0 on an SRQ)
  size_t rq_bytes = 0;
  mlx5dv_devx_umem* wq_umem = nullptr;
  mlx5dv_devx_umem* dbr_umem = nullptr;
  mlx5dv_devx_uar* uar = nullptr;
  void* uar_registered = nullptr;  // UAR page registered with cuMemHostRegister(IOMEMORY)
  uint64_t uar_gpu_db = 0;         // GPU address of the doorbell register, once registered
  mlx5dv_devx_obj* obj = nullptr;
  uint32_t qpn = 0;
  uint32_t log_sq = 0, log_rq = 0, log_rq_stride = 0;
  uint32_t max_inline = 0, max_send_wqebbs = 0;
  verbs::qp_attr attr;  // attributes as last applied (state: last transition that succeeded)
};

}  // namespace gdaki::mlx5
