/*
 * Coverage of the host API: a call to every function and a use of every type and enum of
 * doca_error.h, doca_gpunetio_host.h, doca_verbs.h and doca_gpunetio_high_level.h, built
 * as C (and as C++ from host_coverage.cpp) and linked against libgdaki_doca. Run, it calls
 * each with arguments the library must refuse (NULL handles), so every call returns an
 * error code and nothing is created: the run checks that no call crashes or succeeds.
 */
#include <stdio.h>
#include <string.h>

#include "doca_error.h"
#include "doca_gpunetio.h"
#include "doca_gpunetio_high_level.h"
#include "doca_gpunetio_host.h"
#include "doca_verbs.h"
#include "gdaki_doca_ext.h"

static int failures = 0;
#define REFUSED(call)                                                     \
  do {                                                                    \
    if ((call) == DOCA_SUCCESS) {                                         \
      fprintf(stderr, "accepted a NULL argument: %s\n", #call);           \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

int main(void) {
  doca_gpu_t *gpu = NULL;
  doca_dev_t *dev = NULL;
  doca_verbs_qp_init_attr_t *qia = NULL;
  doca_verbs_qp_attr_t *qa = NULL;
  doca_verbs_qp_t *qp = NULL;
  doca_verbs_cq_attr_t *ca = NULL;
  doca_verbs_cq_t *cq = NULL;
  doca_verbs_ah_attr_t *ah = NULL;
  doca_verbs_umem_t *umem = NULL;
  doca_verbs_uar_t *uar = NULL;
  struct doca_verbs_srq *srq = NULL;
  struct doca_verbs_srq_init_attr *sia = NULL;
  struct doca_verbs_device_attr *da = NULL;
  struct doca_gpu_verbs_qp *gqp = NULL;
  struct doca_gpu_dev_verbs_qp *dqp = NULL;
  struct doca_gpu_verbs_qp_error_info info;
  struct doca_gpu_verbs_qp_init_attr_hl hla;
  struct doca_gpu_verbs_qp_hl *hl = NULL;
  struct doca_gpu_verbs_qp_group_hl *grp = NULL;
  struct doca_verbs_gid gid;
  doca_gpu_verbs_service_t svc = NULL;
  struct ibv_pd *pd = NULL;
  struct gdaki_doca_mr *mr = NULL;
  void *p = NULL;
  uint64_t *u = NULL;
  uint32_t u32 = 0;
  size_t sz = 0;
  int fd = 0, mask = 0;
  bool b = false;
  enum doca_gpu_lib_type lt = DOCA_GPU_LIB_TYPE_OPEN;
  enum doca_gpu_mem_type mt = DOCA_GPU_MEM_TYPE_GPU_CPU_DATA_DIRECT;
  enum doca_verbs_lib_type vlt = DOCA_VERBS_SDK_LIB_TYPE_SDK;
  enum doca_verbs_mtu_size mtu = DOCA_VERBS_MTU_SIZE_RAW_ETHERNET;
  enum doca_verbs_srq_type st = DOCA_VERBS_SRQ_TYPE_CONTIGUOUS;
  enum doca_gpu_dev_verbs_exec_scope es = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP;
  enum doca_gpu_dev_verbs_sync_scope ss = DOCA_GPUNETIO_VERBS_SYNC_SCOPE_THREAD;
  enum doca_gpu_dev_verbs_mem_type dmt = DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU;
  enum doca_gpu_dev_verbs_gpu_code_opt opt = DOCA_GPUNETIO_VERBS_GPU_CODE_OPT_SKIP_DB_RINGING;
  enum doca_gpu_dev_verbs_blocking_mode bm = DOCA_GPUNETIO_VERBS_BLOCKING_MODE_ENABLED;
  enum doca_gpu_dev_verbs_mcst_mode mm = DOCA_GPUNETIO_VERBS_MCST_ENABLED;
  enum doca_gpu_dev_verbs_qp_type qt = DOCA_GPUNETIO_VERBS_QP_SQ;
  enum doca_gpu_dev_verbs_signal_op so = DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD;
  enum doca_gpu_dev_verbs_wqe_ctrl_flags cf = DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE_FENCE;
  enum doca_gpu_verbs_mem_reg_type rt = DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_DEFAULT;
  memset(&info, 0, sizeof(info));
  memset(&hla, 0, sizeof(hla));
  memset(&gid, 0, sizeof(gid));
  (void)lt; (void)mt; (void)vlt; (void)st; (void)es; (void)ss; (void)dmt; (void)opt; (void)bm; (void)mm;
  (void)qt; (void)so; (void)cf; (void)rt;

  if (strcmp(doca_error_get_name(DOCA_ERROR_AGAIN), "DOCA_ERROR_AGAIN") != 0) ++failures;
  if (doca_error_get_descr(DOCA_ERROR_AGAIN)[0] == '\0') ++failures;
  DOCA_GPUNETIO_LOG(INFO, "host coverage: every call below must refuse its NULL arguments");

  REFUSED(doca_gpu_create(NULL, &gpu));
  REFUSED(doca_gpu_destroy(gpu));
  REFUSED(doca_gpu_mem_alloc(gpu, 64, 0, DOCA_GPU_MEM_TYPE_GPU, &p, NULL));
  REFUSED(doca_gpu_mem_free(gpu, p));
  REFUSED(doca_gpu_get_dmabuf_fd(gpu, p, 64, &fd));
  REFUSED(doca_gpu_verbs_export_qp(gpu, qp, DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB, NULL, cq,
                                   DOCA_GPUNETIO_VERBS_SEND_DBR_MODE_EXT_NO_DBR_SW_EMULATED,
                                   DOCA_GPUNETIO_VERBS_CQ_64B_COLLAPSED_HOST, false, &gqp));
  REFUSED(doca_gpu_verbs_unexport_qp(gpu, gqp));
  REFUSED(doca_gpu_verbs_get_qp_dev(gqp, &dqp));
  REFUSED(doca_gpu_verbs_export_multi_qps_dev(gpu, NULL, 0, &dqp));
  REFUSED(doca_gpu_verbs_unexport_multi_qps_dev(gpu, NULL, 0, NULL));
  REFUSED(doca_gpu_verbs_can_gpu_register_uar(NULL, &b));
  REFUSED(doca_gpu_verbs_export_uar(u, &u));
  REFUSED(doca_gpu_verbs_unexport_uar(u));
  REFUSED(doca_gpu_verbs_cpu_proxy_progress(gqp, &b));
  REFUSED(doca_gpu_verbs_create_service(NULL));
  REFUSED(doca_gpu_verbs_service_monitor_qp(svc, gqp));
  REFUSED(doca_gpu_verbs_destroy_service(svc));
  REFUSED(doca_gpu_verbs_query_last_error(gqp, &info));
  REFUSED(doca_gpu_verbs_reset_tracking_and_memory(gqp));
  REFUSED(doca_gpu_verbs_check_host_version(99u << 16));
  REFUSED(doca_gpu_verbs_check_device_version(99u << 16));

  REFUSED(doca_verbs_dev_open(pd, &dev));
  REFUSED(doca_verbs_dev_close(dev));
  REFUSED(doca_verbs_query_device(dev, &da));
  REFUSED(doca_verbs_device_attr_free(da));
  REFUSED(doca_verbs_ah_attr_create(dev, &ah));
  REFUSED(doca_verbs_ah_attr_destroy(ah));
  REFUSED(doca_verbs_ah_attr_set_gid(ah, gid));
  REFUSED(doca_verbs_ah_attr_set_addr_type(ah, DOCA_VERBS_ADDR_TYPE_IPv4));
  REFUSED(doca_verbs_ah_attr_set_dlid(ah, 1));
  REFUSED(doca_verbs_ah_attr_set_sl(ah, 0));
  REFUSED(doca_verbs_ah_attr_set_sgid_index(ah, 0));
  REFUSED(doca_verbs_ah_attr_set_hop_limit(ah, 64));
  REFUSED(doca_verbs_ah_attr_set_traffic_class(ah, 0));
  REFUSED(doca_verbs_qp_init_attr_create(NULL));
  REFUSED(doca_verbs_qp_init_attr_destroy(qia));
  REFUSED(doca_verbs_qp_init_attr_set_pd(qia, dev));
  REFUSED(doca_verbs_qp_init_attr_set_send_cq(qia, cq));
  REFUSED(doca_verbs_qp_init_attr_set_receive_cq(qia, cq));
  REFUSED(doca_verbs_qp_init_attr_set_sq_sig_all(qia, 1));
  REFUSED(doca_verbs_qp_init_attr_set_sq_wr(qia, 64));
  REFUSED(doca_verbs_qp_init_attr_set_rq_wr(qia, 64));
  REFUSED(doca_verbs_qp_init_attr_set_send_max_sges(qia, 1));
  REFUSED(doca_verbs_qp_init_attr_set_receive_max_sges(qia, 1));
  REFUSED(doca_verbs_qp_init_attr_set_max_inline_data(qia, 32));
  REFUSED(doca_verbs_qp_init_attr_set_qp_type(qia, DOCA_VERBS_QP_TYPE_RC));
  REFUSED(doca_verbs_qp_init_attr_set_user_index(qia, 0));
  REFUSED(doca_verbs_qp_init_attr_set_external_umem(qia, umem, 0));
  REFUSED(doca_verbs_qp_init_attr_set_external_dbr_umem(qia, umem, 0));
  REFUSED(doca_verbs_qp_init_attr_set_external_uar(qia, uar));
  REFUSED(doca_verbs_qp_init_attr_set_core_direct_master(qia, 1));
  REFUSED(doca_verbs_qp_init_attr_set_send_dbr_mode(qia, DOCA_VERBS_QP_SEND_DBR_MODE_NO_DBR_EXT));
  REFUSED(doca_verbs_qp_init_attr_set_ordering_semantic(qia, DOCA_VERBS_QP_ORDERING_SEMANTIC_OOO_ALL));
  REFUSED(doca_verbs_qp_attr_create(NULL));
  REFUSED(doca_verbs_qp_attr_destroy(qa));
  REFUSED(doca_verbs_qp_attr_set_next_state(qa, DOCA_VERBS_QP_STATE_ERR));
  REFUSED(doca_verbs_qp_attr_set_current_state(qa, DOCA_VERBS_QP_STATE_RST));
  REFUSED(doca_verbs_qp_attr_set_path_mtu(qa, mtu));
  REFUSED(doca_verbs_qp_attr_set_rq_psn(qa, 0));
  REFUSED(doca_verbs_qp_attr_set_sq_psn(qa, 0));
  REFUSED(doca_verbs_qp_attr_set_dest_qp_num(qa, 0));
  REFUSED(doca_verbs_qp_attr_set_allow_remote_write(qa, 1));
  REFUSED(doca_verbs_qp_attr_set_allow_remote_read(qa, 1));
  REFUSED(doca_verbs_qp_attr_set_allow_remote_atomic(qa, DOCA_VERBS_QP_ATOMIC_MODE_UP_TO_8BYTES));
  REFUSED(doca_verbs_qp_attr_set_ah_attr(qa, ah));
  REFUSED(doca_verbs_qp_attr_set_pkey_index(qa, 0));
  REFUSED(doca_verbs_qp_attr_set_port_num(qa, 1));
  REFUSED(doca_verbs_qp_attr_set_ack_timeout(qa, 14));
  REFUSED(doca_verbs_qp_attr_set_retry_cnt(qa, 7));
  REFUSED(doca_verbs_qp_attr_set_rnr_retry(qa, 7));
  REFUSED(doca_verbs_qp_attr_set_min_rnr_timer(qa, 12));
  REFUSED(doca_verbs_qp_attr_set_max_rd_atomic(qa, 16));
  REFUSED(doca_verbs_qp_attr_set_max_dest_rd_atomic(qa, 16));
  REFUSED(doca_verbs_qp_create(dev, qia, &qp));
  REFUSED(doca_verbs_qp_destroy(qp));
  REFUSED(doca_verbs_qp_modify(qp, qa, DOCA_VERBS_QP_ATTR_NEXT_STATE));
  REFUSED(doca_verbs_qp_query(qp, qa, qia, &mask));
  REFUSED(doca_verbs_qp_get_wq(qp, &p, &u32, &p, &u32, &u32));
  REFUSED(doca_verbs_qp_get_dbr_addr(qp, &p));
  REFUSED(doca_verbs_qp_get_uar_addr(qp, &p));
  REFUSED(doca_verbs_cq_attr_create(NULL));
  REFUSED(doca_verbs_cq_attr_destroy(ca));
  REFUSED(doca_verbs_cq_attr_set_cq_size(ca, 64));
  REFUSED(doca_verbs_cq_attr_set_cq_overrun(ca, DOCA_VERBS_CQ_DISABLE_OVERRUN));
  REFUSED(doca_verbs_cq_attr_set_cq_collapsed(ca, 1));
  REFUSED(doca_verbs_cq_attr_set_external_umem(ca, umem, 0));
  REFUSED(doca_verbs_cq_attr_set_external_uar(ca, uar));
  REFUSED(doca_verbs_cq_create(dev, ca, &cq));
  REFUSED(doca_verbs_cq_destroy(cq));
  REFUSED(doca_verbs_srq_init_attr_create(&sia));
  REFUSED(doca_verbs_srq_init_attr_destroy(sia));
  REFUSED(doca_verbs_srq_create(dev, sia, &srq));
  REFUSED(doca_verbs_srq_destroy(srq));
  REFUSED(doca_verbs_uar_create(dev, DOCA_VERBS_UAR_ALLOCATION_TYPE_NONCACHE_DEDICATED, &uar));
  REFUSED(doca_verbs_uar_destroy(uar));
  REFUSED(doca_verbs_uar_id_get(uar, &u32));
  REFUSED(doca_verbs_uar_reg_addr_get(uar, &p));
  REFUSED(doca_verbs_umem_create(dev, p, 64, 0, -1, 0, &umem));
  REFUSED(doca_verbs_umem_destroy(umem));
  REFUSED(doca_verbs_umem_get_id(umem, &u32));
  REFUSED(doca_verbs_umem_get_size(umem, &sz));
  REFUSED(doca_verbs_umem_get_address(umem, &p));

  REFUSED(doca_gpu_verbs_create_qp_hl(&hla, &hl));
  REFUSED(doca_gpu_verbs_destroy_qp_hl(hl));
  REFUSED(doca_gpu_verbs_create_qp_group_hl(NULL, &grp));
  REFUSED(doca_gpu_verbs_destroy_qp_group_hl(grp));
  REFUSED(doca_gpu_verbs_qp_flat_list_create_hl(NULL, 0, &dqp));
  REFUSED(doca_gpu_verbs_qp_flat_list_destroy_hl(NULL));

  REFUSED(gdaki_doca_pd_close(pd));
  REFUSED(gdaki_doca_mr_register(pd, p, 64, GDAKI_DOCA_ACCESS_LOCAL_WRITE, &mr, &u32, &u32));
  REFUSED(gdaki_doca_mr_deregister(mr));
  REFUSED(gdaki_doca_query_gid(pd, &gid));
  REFUSED(gdaki_doca_ah_attr_set_token(ah, gid.raw));
  /* Getters take valid objects only (DOCA's contract); they are referenced, not called. */
  {
    uint32_t (*g1)(const doca_verbs_qp_t *) = doca_verbs_qp_get_qpn;
    uint32_t (*g2)(const doca_verbs_cq_t *) = doca_verbs_cq_get_cqn;
    enum doca_verbs_qp_state (*g3)(const doca_verbs_qp_attr_t *) = doca_verbs_qp_attr_get_next_state;
    enum doca_verbs_qp_state (*g4)(const doca_verbs_qp_attr_t *) = doca_verbs_qp_attr_get_current_state;
    uint32_t (*g5)(const doca_verbs_qp_attr_t *) = doca_verbs_qp_attr_get_dest_qp_num;
    uint32_t (*g6[6])(const struct doca_verbs_device_attr *) = {
        doca_verbs_device_attr_get_max_qp, doca_verbs_device_attr_get_max_qp_wr, doca_verbs_device_attr_get_max_cq,
        doca_verbs_device_attr_get_max_cqe, doca_verbs_device_attr_get_max_mr, doca_verbs_device_attr_get_max_sge};
    doca_error_t (*g7)(const char *, struct ibv_pd **) = gdaki_doca_pd_open;
    if (g1 == NULL || g2 == NULL || g3 == NULL || g4 == NULL || g5 == NULL || g6[5] == NULL || g7 == NULL) ++failures;
  }
  printf("host coverage: %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
