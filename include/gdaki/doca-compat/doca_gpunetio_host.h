/*
 * doca_gpunetio_host.h: the host half of DOCA GPUNetIO (GPU handle, GPU-visible memory,
 * export of verbs QPs to GPU initiators, CPU proxy progress, error queries) served by
 * gdaki's control path. Follows the public DOCA GPUNetIO documentation and the open DOCA
 * GPUNetIO host header (function names, argument lists, types, enum values); written anew
 * for gdaki. C and C++. What each call does on gdaki, and what returns
 * DOCA_ERROR_NOT_SUPPORTED and why: docs/doca-compat.md.
 */
#ifndef GDAKI_DOCA_GPUNETIO_HOST_H
#define GDAKI_DOCA_GPUNETIO_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "doca_error.h"
#include "doca_gpunetio_verbs_def.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which implementation serves a handle: gdaki itself (OPEN) or NVIDIA's SDK (SDK). */
enum doca_gpu_lib_type { DOCA_GPU_LIB_TYPE_OPEN = 0, DOCA_GPU_LIB_TYPE_SDK = 1 };

struct doca_gpu_open; /* gdaki's GPU handle (opaque) */
typedef struct {
  enum doca_gpu_lib_type type;
  union {
    void *sdk;
    struct doca_gpu_open *open;
  };
} doca_gpu_t;

enum doca_gpu_mem_type {
  DOCA_GPU_MEM_TYPE_GPU = 0,     /* GPU memory; no CPU pointer */
  DOCA_GPU_MEM_TYPE_GPU_CPU = 1, /* GPU memory with a CPU mapping */
  DOCA_GPU_MEM_TYPE_CPU_GPU = 2, /* pinned host memory the GPU can reach */
  DOCA_GPU_MEM_TYPE_GPU_CPU_DATA_DIRECT = 3,
};

struct doca_gpu_dev_verbs_qp; /* the device handle: doca_gpunetio_dev_verbs_common.cuh */
struct doca_dev;
struct doca_verbs_cq_t;
struct doca_verbs_qp_t;
struct doca_gpu_verbs_qp_private; /* gdaki's export (opaque) */

/* An exported QP as the CPU sees it. */
struct doca_gpu_verbs_qp {
  doca_gpu_t *gpu_dev;
  struct doca_verbs_qp_t *qp;
  enum doca_gpu_dev_verbs_nic_handler nic_handler;
  bool cpu_proxy;                     /* a CPU thread must call doca_gpu_verbs_cpu_proxy_progress */
  struct doca_gpu_dev_verbs_qp *qp_cpu; /* the handle, CPU address */
  struct doca_gpu_dev_verbs_qp *qp_gpu; /* the handle, initiator address (the same on gdaki) */
  struct doca_verbs_cq_t *cq_sq;
  struct doca_gpu_verbs_qp_private *priv;
};

struct doca_gpu_verbs_qp_error_info {
  bool has_error;
  int syndrome;        /* mlx5 CQE syndrome of the first failed WQE (e.g. 0x13 remote access) */
  int vendor_err_synd;
  int hw_err_synd;
  int hw_synd_type;
  int wqe_counter;     /* 16-bit WQE counter of the failed WQE */
};

typedef void *doca_gpu_verbs_service_t;

/* Opens the GPU at PCIe address gpu_bus_id ("0000:81:00.0"). Without a GPU (or without
 * CUDA), gdaki hands out a host-only handle whose memory is host memory, so the same
 * program runs on CPU threads against the soft NIC; a log line says so. */
doca_error_t doca_gpu_create(const char *gpu_bus_id, doca_gpu_t **gpu_dev);
doca_error_t doca_gpu_destroy(doca_gpu_t *gpu_dev);

/* alignment 0 = malloc's; otherwise a power of two. memptr_cpu may be NULL only for
 * DOCA_GPU_MEM_TYPE_GPU. */
doca_error_t doca_gpu_mem_alloc(doca_gpu_t *gpu_dev, size_t size, size_t alignment, enum doca_gpu_mem_type mtype,
                                void **memptr_gpu, void **memptr_cpu);
doca_error_t doca_gpu_mem_free(doca_gpu_t *gpu_dev, void *memptr_gpu);
doca_error_t doca_gpu_get_dmabuf_fd(doca_gpu_t *gpu_dev, void *memptr_gpu, size_t size, int *dmabuf_fd);

doca_error_t doca_gpu_verbs_export_qp(doca_gpu_t *gpu_dev, struct doca_verbs_qp_t *qp,
                                      enum doca_gpu_dev_verbs_nic_handler nic_handler, void *gpu_qp_umem_dev_ptr,
                                      struct doca_verbs_cq_t *cq_sq,
                                      enum doca_gpu_verbs_send_dbr_mode_ext send_dbr_mode_ext,
                                      enum doca_gpu_dev_verbs_cq_type cq_type, bool enable_data_direct,
                                      struct doca_gpu_verbs_qp **qp_out);
doca_error_t doca_gpu_verbs_unexport_qp(doca_gpu_t *gpu_dev, struct doca_gpu_verbs_qp *qp);
doca_error_t doca_gpu_verbs_get_qp_dev(struct doca_gpu_verbs_qp *qp, struct doca_gpu_dev_verbs_qp **qp_gpu);
doca_error_t doca_gpu_verbs_export_multi_qps_dev(doca_gpu_t *gpu_dev, struct doca_gpu_verbs_qp **qps,
                                                 unsigned int num_qps, struct doca_gpu_dev_verbs_qp **out_qp_gpus);
doca_error_t doca_gpu_verbs_unexport_multi_qps_dev(doca_gpu_t *gpu_dev, struct doca_gpu_verbs_qp **qps,
                                                   unsigned int num_qps, struct doca_gpu_dev_verbs_qp *qp_gpus);

doca_error_t doca_gpu_verbs_can_gpu_register_uar(void *db, bool *out_can_register);
doca_error_t doca_gpu_verbs_export_uar(uint64_t *sq_db, uint64_t **uar_addr_gpu);
doca_error_t doca_gpu_verbs_unexport_uar(uint64_t *uar_addr_gpu);

/* CPU proxy handler: rings the doorbells the initiators prepared. *out_progressed (may be
 * NULL) says whether there was anything to ring. */
doca_error_t doca_gpu_verbs_cpu_proxy_progress(struct doca_gpu_verbs_qp *qp_cpu, bool *out_progressed);
/* A library thread that calls cpu_proxy_progress for every monitored QP. */
doca_error_t doca_gpu_verbs_create_service(doca_gpu_verbs_service_t *out_service);
doca_error_t doca_gpu_verbs_service_monitor_qp(doca_gpu_verbs_service_t service, struct doca_gpu_verbs_qp *qp);
doca_error_t doca_gpu_verbs_destroy_service(doca_gpu_verbs_service_t service);

doca_error_t doca_gpu_verbs_query_last_error(struct doca_gpu_verbs_qp *qp,
                                             struct doca_gpu_verbs_qp_error_info *error_info);
/* Resets the QP's counters and rings after the QP went back to RESET. */
doca_error_t doca_gpu_verbs_reset_tracking_and_memory(struct doca_gpu_verbs_qp *qp_gverbs);

/* Host code and device code of the program agree with the library's API generation. */
doca_error_t doca_gpu_verbs_check_host_version(uint32_t version);
doca_error_t doca_gpu_verbs_check_device_version(uint32_t version);

/* DOCA_GPUNETIO_LOG(level, fmt, ...): one line on stderr with the level name. */
#define DOCA_GPUNETIO_LOG_LEVEL_ERROR 0
#define DOCA_GPUNETIO_LOG_LEVEL_WARNING 1
#define DOCA_GPUNETIO_LOG_LEVEL_INFO 2
#define DOCA_GPUNETIO_LOG_LEVEL_DEBUG 3
void doca_gpunetio_log(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define DOCA_GPUNETIO_LOG(level, ...) doca_gpunetio_log(DOCA_GPUNETIO_LOG_LEVEL_##level, __FILE__, __LINE__, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* GDAKI_DOCA_GPUNETIO_HOST_H */
