/*
 * doca_gpunetio_dev_verbs_common.cuh: the types every DOCA GPUNetIO device function takes
 * (device QP and CQ handles, addresses, tickets) and the small helpers (lane id, global
 * timer, memory fences), implemented over gdaki's data path (gdaki/device/). Follows the
 * public DOCA GPUNetIO documentation and the open rebuild's device headers (names,
 * template parameters, semantics); written anew for gdaki.
 *
 * Compiles three ways, like the rest of gdaki's data path: nvcc device code (sm_90), nvcc
 * host code and g++ (C++20). Under g++ the CUDA keywords __device__, __host__, __global__
 * and __forceinline__ are defined away here, so a DOCA kernel compiles as an ordinary
 * function that gdaki::dev::host::launch runs on CPU threads (gdaki/device/host_grid.hpp).
 */
#ifndef GDAKI_DOCA_GPUNETIO_DEV_VERBS_COMMON_CUH
#define GDAKI_DOCA_GPUNETIO_DEV_VERBS_COMMON_CUH

#include <errno.h>
#include <stdint.h>

#include "doca_gpunetio_verbs_def.h"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/device/ops.hpp"

#if !defined(__CUDACC__)
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#endif

/* Every device function of this API: a __device__ function under nvcc that CPU threads
 * may also call (host grid launcher); a plain inline function under g++. */
#define GDAKI_DOCA_DEV GDAKI_HD

typedef uint64_t doca_gpu_dev_verbs_ticket_t;

/* A buffer for a one-sided call: virtual address and memory key. As in DOCA (keys
 * "already swapped by the application"), key is BIG-ENDIAN: htobe32(lkey or rkey). */
struct doca_gpu_dev_verbs_addr {
  uint64_t addr;
  uint32_t key;
};

/* One 64-byte send WQE slot (WQEBB), as returned by doca_gpu_dev_verbs_get_wqe_ptr. */
struct doca_gpu_dev_verbs_wqe {
  uint8_t bytes[64];
};

/* A QP's send CQ. gdaki polls the send CQ through the QP it serves (the poller rebuilds
 * WQE indexes from the QP's ring), so the CQ handle names that QP. */
struct doca_gpu_dev_verbs_cq {
  gdaki::dev::qp_handle *qp;
  gdaki::dev::cq_handle *cq;
};

/* The device QP handle: plain data, copied freely (flat lists); every copy points at the
 * one gdaki handle that holds the QP's counters. */
struct doca_gpu_dev_verbs_qp {
  gdaki::dev::qp_handle *qp;
  struct doca_gpu_dev_verbs_cq cq_sq;
  enum doca_gpu_dev_verbs_nic_handler nic_handler; /* fixed at export */
  uint32_t sq_wqe_num;                             /* WQEBBs in the send ring */
};

namespace gdaki_doca_detail {

// DOCA's sharing mode and execution scope as gdaki's template parameters.
template <enum doca_gpu_dev_verbs_resource_sharing_mode M>
inline constexpr gdaki::dev::sharing sharing_of = M == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE
                                                      ? gdaki::dev::sharing::exclusive
                                                  : M == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA
                                                      ? gdaki::dev::sharing::block
                                                      : gdaki::dev::sharing::grid;
template <enum doca_gpu_dev_verbs_exec_scope S>
struct scope_of {
  using type = gdaki::dev::scope_thread;
};
template <>
struct scope_of<DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP> {
  using type = gdaki::dev::scope_warp;
};

GDAKI_HD constexpr uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
// DOCA addresses carry big-endian keys; gdaki's WQE builders take host-order keys.
GDAKI_HD inline gdaki::dev::remote_ptr remote(doca_gpu_dev_verbs_addr a) { return {a.addr, bswap32(a.key)}; }
GDAKI_HD inline gdaki::dev::local_ptr local(doca_gpu_dev_verbs_addr a) { return {a.addr, bswap32(a.key)}; }

// gdaki's ticket is the WQEBB count just past the caller's last WQE; DOCA's is the index of
// that last WQEBB. 0 stays 0 (nothing posted yet: there is no index -1 to name).
GDAKI_HD constexpr uint64_t doca_ticket(uint64_t gdaki_ticket) { return gdaki_ticket == 0 ? 0 : gdaki_ticket - 1; }
GDAKI_HD constexpr uint64_t gdaki_ticket(uint64_t doca_ticket) { return doca_ticket + 1; }

// DOCA's settling results: 0 done, EBUSY not yet, a negative errno for an error CQE.
GDAKI_HD constexpr int poll_result(gdaki::status st) {
  return st == gdaki::status::ok ? 0 : st == gdaki::status::again ? EBUSY : st == gdaki::status::timeout ? -ETIMEDOUT : -EIO;
}

// After a non-blocking poll. On CPU threads (the host grid launcher), a caller that spins
// on EBUSY without pause holds its core, and on a machine with fewer cores than spinning
// threads the CPU thread that completes the operation (the program's CPU proxy progress
// thread, the soft NIC's engine) waits for a scheduler slice per operation, milliseconds
// (docs/doca-compat.md, Known problems). So from the 64th EBUSY in a row on this thread,
// each further one yields the core (arch::spin_pause). On the GPU: nothing.
GDAKI_HD inline void after_poll(bool busy) {
#if GDAKI_DEVICE_PASS
  (void)busy;
#else
  thread_local uint32_t busy_in_a_row = 0;
  if (!busy) {
    busy_in_a_row = 0;
    return;
  }
  gdaki::dev::arch::spin_pause(++busy_in_a_row);
#endif
}

}  // namespace gdaki_doca_detail

/* ---- lane helpers, timer, fences ------------------------------------------------------- */
GDAKI_DOCA_DEV inline uint32_t doca_gpu_dev_verbs_get_lane_id() { return gdaki::dev::arch::lane_id(); }
/* Nanoseconds from a free-running clock (%globaltimer on the GPU, CLOCK_MONOTONIC on CPUs). */
GDAKI_DOCA_DEV inline uint64_t doca_gpu_dev_verbs_query_globaltimer() { return gdaki::dev::arch::clock_ns(); }

template <enum doca_gpu_dev_verbs_sync_scope scope = DOCA_GPUNETIO_VERBS_SYNC_SCOPE_GPU>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_fence_release() {
  gdaki::dev::arch::fence_full();  // gdaki has one full fence; it is at least as strong as each scope's release
}
template <enum doca_gpu_dev_verbs_sync_scope scope = DOCA_GPUNETIO_VERBS_SYNC_SCOPE_GPU>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_fence_acquire() {
  gdaki::dev::arch::fence_full();
}

/* gdaki extensions for kernels that must also build with g++ (no threadIdx there). */
GDAKI_DOCA_DEV inline uint32_t gdaki_doca_thread_index() { return gdaki::dev::arch::thread_rank_in_block(); }
GDAKI_DOCA_DEV inline uint32_t gdaki_doca_block_index() { return gdaki::dev::arch::block_rank_in_grid(); }
GDAKI_DOCA_DEV inline uint32_t gdaki_doca_threads_per_block() { return gdaki::dev::arch::threads_in_block(); }
GDAKI_DOCA_DEV inline uint32_t gdaki_doca_blocks() { return gdaki::dev::arch::blocks_in_grid(); }

#endif /* GDAKI_DOCA_GPUNETIO_DEV_VERBS_COMMON_CUH */
