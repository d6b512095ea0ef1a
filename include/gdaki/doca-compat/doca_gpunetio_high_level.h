/*
 * doca_gpunetio_high_level.h: DOCA GPUNetIO's high-level QP creation (CQ + QP + export in
 * one call, main + companion groups, flat device arrays) served by gdaki. Follows the
 * public DOCA GPUNetIO documentation and the open rebuild's high-level header (names,
 * structs, argument lists); written anew for gdaki. C and C++.
 */
#ifndef GDAKI_DOCA_GPUNETIO_HIGH_LEVEL_H
#define GDAKI_DOCA_GPUNETIO_HIGH_LEVEL_H

#include <stdbool.h>

#include "doca_gpunetio_host.h"
#include "doca_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

enum doca_gpu_verbs_mem_reg_type {
  DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_DEFAULT = 0,
  DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_CUDA_DMABUF = 1,
  DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_CUDA_PEERMEM = 2,
  DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_MAX,
};

struct doca_gpu_verbs_qp_init_attr_hl {
  doca_gpu_t *gpu_dev;
  doca_dev_t *net_dev;
  struct ibv_pd *ibpd;
  uint16_t sq_nwqe; /* send queue depth in WQEs (one 64-byte WQEBB each for the one-sided calls) */
  enum doca_gpu_dev_verbs_nic_handler nic_handler;
  enum doca_gpu_verbs_mem_reg_type mreg_type;
  enum doca_gpu_verbs_send_dbr_mode_ext send_dbr_mode_ext;
  bool cq_collapsed;
  enum doca_verbs_qp_ordering_semantic ordering_semantic;
};

struct doca_gpu_verbs_qp_hl {
  doca_gpu_t *gpu_dev;
  doca_verbs_cq_t *cq_sq;
  void *cq_sq_umem_gpu_ptr;
  doca_verbs_umem_t *cq_sq_umem;
  doca_verbs_qp_t *qp;
  void *qp_umem_gpu_ptr;
  doca_verbs_umem_t *qp_umem;
  void *qp_umem_dbr_gpu_ptr;
  doca_verbs_umem_t *qp_umem_dbr;
  doca_verbs_uar_t *external_uar;
  enum doca_gpu_dev_verbs_nic_handler nic_handler;
  enum doca_gpu_verbs_send_dbr_mode_ext send_dbr_mode_ext;
  struct doca_gpu_verbs_qp *qp_gverbs;
  doca_verbs_cq_t *cq_rq; /* gdaki: the receive CQ gdaki's QPs require */
};

struct doca_gpu_verbs_qp_group_hl {
  struct doca_gpu_verbs_qp_hl qp_main;
  struct doca_gpu_verbs_qp_hl qp_companion;
};

/* Creates the send CQ, the RC QP (in RESET) and its export for initiators. The caller
 * connects the QP (doca_verbs_qp_modify) before posting. */
doca_error_t doca_gpu_verbs_create_qp_hl(struct doca_gpu_verbs_qp_init_attr_hl *qp_init_attr,
                                         struct doca_gpu_verbs_qp_hl **qp);
doca_error_t doca_gpu_verbs_destroy_qp_hl(struct doca_gpu_verbs_qp_hl *qp);
doca_error_t doca_gpu_verbs_create_qp_group_hl(struct doca_gpu_verbs_qp_init_attr_hl *qp_init_attr,
                                               struct doca_gpu_verbs_qp_group_hl **qpg);
doca_error_t doca_gpu_verbs_destroy_qp_group_hl(struct doca_gpu_verbs_qp_group_hl *qpg);
/* An array of num_elems device handles, one per QP, for kernels that index QPs. */
doca_error_t doca_gpu_verbs_qp_flat_list_create_hl(struct doca_gpu_verbs_qp_hl **qp_list, uint32_t num_elems,
                                                   struct doca_gpu_dev_verbs_qp **qp_gpu);
doca_error_t doca_gpu_verbs_qp_flat_list_destroy_hl(struct doca_gpu_dev_verbs_qp *qp_gpu);

#ifdef __cplusplus
}
#endif

#endif /* GDAKI_DOCA_GPUNETIO_HIGH_LEVEL_H */
