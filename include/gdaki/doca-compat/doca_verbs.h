/*
 * doca_verbs.h: DOCA Verbs (devices, CQs, RC QPs, their attributes and state changes)
 * served by gdaki's control path (gdaki/verbs/). Follows the public DOCA Verbs
 * documentation and the open DOCA GPUNetIO rebuild's doca_verbs.h (names, argument lists,
 * enum values, attribute masks); written anew for gdaki. C and C++.
 * Objects gdaki cannot make (SRQ, UMEM, UAR, external rings) return DOCA_ERROR_NOT_SUPPORTED
 * with a log line giving the reason; docs/doca-compat.md lists every call.
 */
#ifndef GDAKI_DOCA_VERBS_H
#define GDAKI_DOCA_VERBS_H

#include <stdint.h>

#include "doca_error.h"
#include "doca_gpunetio_host.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_pd; /* a protection domain; on gdaki: gdaki_doca_pd_open (gdaki_doca_ext.h) */

enum doca_verbs_lib_type { DOCA_VERBS_SDK_LIB_TYPE_OPEN = 0, DOCA_VERBS_SDK_LIB_TYPE_SDK = 1 };

enum doca_verbs_uar_allocation_type {
  DOCA_VERBS_UAR_ALLOCATION_TYPE_BLUEFLAME = 0,
  DOCA_VERBS_UAR_ALLOCATION_TYPE_NONCACHE = 1,
  DOCA_VERBS_UAR_ALLOCATION_TYPE_NONCACHE_DEDICATED = 2,
};

enum doca_verbs_qp_ordering_semantic {
  DOCA_VERBS_QP_ORDERING_SEMANTIC_IBTA = 0x0,
  DOCA_VERBS_QP_ORDERING_SEMANTIC_OOO_RW = 0x1,
  DOCA_VERBS_QP_ORDERING_SEMANTIC_OOO_ALL = 0x2,
};

/* Handles: a library type and the implementation's object. */
#define GDAKI_DOCA_HANDLE(name)       \
  struct name##_open;                 \
  typedef struct name##_t {           \
    enum doca_verbs_lib_type type;    \
    union {                           \
      void *sdk;                      \
      struct name##_open *open;       \
    };                                \
  } name##_t;
struct doca_dev_open;
typedef struct doca_dev_t {
  enum doca_verbs_lib_type type;
  union {
    void *sdk;
    struct doca_dev_open *open;
  };
} doca_dev_t;
GDAKI_DOCA_HANDLE(doca_verbs_qp_init_attr)
GDAKI_DOCA_HANDLE(doca_verbs_qp_attr)
GDAKI_DOCA_HANDLE(doca_verbs_qp)
GDAKI_DOCA_HANDLE(doca_verbs_cq_attr)
GDAKI_DOCA_HANDLE(doca_verbs_cq)
GDAKI_DOCA_HANDLE(doca_verbs_ah_attr)
GDAKI_DOCA_HANDLE(doca_verbs_umem)
#undef GDAKI_DOCA_HANDLE
struct doca_verbs_uar_open;
typedef struct doca_verbs_uar_t {
  enum doca_verbs_lib_type type;
  enum doca_verbs_uar_allocation_type allocation_type;
  union {
    void *sdk;
    struct doca_verbs_uar_open *open;
  };
} doca_verbs_uar_t;
struct doca_verbs_srq;
struct doca_verbs_srq_init_attr;
struct doca_verbs_device_attr;

#define DOCA_VERBS_QP_TYPE_RC 0x0

enum doca_verbs_qp_state {
  DOCA_VERBS_QP_STATE_RST = 0x0,
  DOCA_VERBS_QP_STATE_INIT = 0x1,
  DOCA_VERBS_QP_STATE_RTR = 0x2,
  DOCA_VERBS_QP_STATE_RTS = 0x3,
  DOCA_VERBS_QP_STATE_ERR = 0x4,
};

enum doca_verbs_addr_type {
  DOCA_VERBS_ADDR_TYPE_IPv4,
  DOCA_VERBS_ADDR_TYPE_IPv6,
  DOCA_VERBS_ADDR_TYPE_IB_GRH,
  DOCA_VERBS_ADDR_TYPE_IB_NO_GRH,
};

enum doca_verbs_mtu_size {
  DOCA_VERBS_MTU_SIZE_256_BYTES = 0x0,
  DOCA_VERBS_MTU_SIZE_512_BYTES = 0x1,
  DOCA_VERBS_MTU_SIZE_1K_BYTES = 0x2,
  DOCA_VERBS_MTU_SIZE_2K_BYTES = 0x3,
  DOCA_VERBS_MTU_SIZE_4K_BYTES = 0x4,
  DOCA_VERBS_MTU_SIZE_RAW_ETHERNET = 0x5,
};

enum doca_verbs_cq_overrun { DOCA_VERBS_CQ_DISABLE_OVERRUN = 0, DOCA_VERBS_CQ_ENABLE_OVERRUN = 1 };
enum doca_verbs_srq_type { DOCA_VERBS_SRQ_TYPE_LINKED_LIST, DOCA_VERBS_SRQ_TYPE_CONTIGUOUS };
enum doca_verbs_qp_atomic_mode {
  DOCA_VERBS_QP_ATOMIC_MODE_NONE = 0x0,
  DOCA_VERBS_QP_ATOMIC_MODE_IB_SPEC = 0x1,
  DOCA_VERBS_QP_ATOMIC_MODE_ONLY_8BYTES = 0x2,
  DOCA_VERBS_QP_ATOMIC_MODE_UP_TO_8BYTES = 0x3,
};
enum doca_verbs_qp_send_dbr_mode {
  DOCA_VERBS_QP_SEND_DBR_MODE_DBR_VALID = 0x0,
  DOCA_VERBS_QP_SEND_DBR_MODE_NO_DBR_EXT = 0x1,
};

/* Attribute mask bits for doca_verbs_qp_modify / doca_verbs_qp_query. */
#define DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_WRITE (1 << 0)
#define DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_READ (1 << 1)
#define DOCA_VERBS_QP_ATTR_PKEY_INDEX (1 << 2)
#define DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER (1 << 3)
#define DOCA_VERBS_QP_ATTR_PORT_NUM (1 << 4)
#define DOCA_VERBS_QP_ATTR_NEXT_STATE (1 << 5)
#define DOCA_VERBS_QP_ATTR_CURRENT_STATE (1 << 6)
#define DOCA_VERBS_QP_ATTR_PATH_MTU (1 << 7)
#define DOCA_VERBS_QP_ATTR_RQ_PSN (1 << 8)
#define DOCA_VERBS_QP_ATTR_SQ_PSN (1 << 9)
#define DOCA_VERBS_QP_ATTR_DEST_QP_NUM (1 << 10)
#define DOCA_VERBS_QP_ATTR_ACK_TIMEOUT (1 << 11)
#define DOCA_VERBS_QP_ATTR_RETRY_CNT (1 << 12)
#define DOCA_VERBS_QP_ATTR_RNR_RETRY (1 << 13)
#define DOCA_VERBS_QP_ATTR_AH_ATTR (1 << 14)
#define DOCA_VERBS_QP_ATTR_ATOMIC_MODE (1 << 15)
#define DOCA_VERBS_QP_ATTR_MAX_QP_RD_ATOMIC (1 << 16)
#define DOCA_VERBS_QP_ATTR_MAX_DEST_RD_ATOMIC (1 << 17)
/* gdaki: an allow-atomic bit (mlx5 QPs take atomics through ATOMIC_MODE) */
#define DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_ATOMIC (1 << 18)

#define DOCA_VERBS_GID_BYTE_LENGTH 16
#define DOCA_VERBS_DMABUF_INVALID_FD 0xFFFFFFFF
struct doca_verbs_gid {
  uint8_t raw[DOCA_VERBS_GID_BYTE_LENGTH];
};

/* --- devices ---------------------------------------------------------------------------- */
doca_error_t doca_verbs_dev_open(struct ibv_pd *verbs_pd, doca_dev_t **net_dev);
doca_error_t doca_verbs_dev_close(doca_dev_t *net_dev);
doca_error_t doca_verbs_query_device(doca_dev_t *net_dev, struct doca_verbs_device_attr **verbs_device_attr);
doca_error_t doca_verbs_device_attr_free(struct doca_verbs_device_attr *verbs_device_attr);
uint32_t doca_verbs_device_attr_get_max_qp(const struct doca_verbs_device_attr *verbs_device_attr);
uint32_t doca_verbs_device_attr_get_max_qp_wr(const struct doca_verbs_device_attr *verbs_device_attr);
uint32_t doca_verbs_device_attr_get_max_cq(const struct doca_verbs_device_attr *verbs_device_attr);
uint32_t doca_verbs_device_attr_get_max_cqe(const struct doca_verbs_device_attr *verbs_device_attr);
uint32_t doca_verbs_device_attr_get_max_mr(const struct doca_verbs_device_attr *verbs_device_attr);
uint32_t doca_verbs_device_attr_get_max_sge(const struct doca_verbs_device_attr *verbs_device_attr);

/* --- address handle attributes --------------------------------------------------------- */
doca_error_t doca_verbs_ah_attr_create(doca_dev_t *net_dev, doca_verbs_ah_attr_t **verbs_ah);
doca_error_t doca_verbs_ah_attr_destroy(doca_verbs_ah_attr_t *verbs_ah);
doca_error_t doca_verbs_ah_attr_set_gid(doca_verbs_ah_attr_t *verbs_ah, struct doca_verbs_gid gid);
doca_error_t doca_verbs_ah_attr_set_addr_type(doca_verbs_ah_attr_t *verbs_ah, enum doca_verbs_addr_type addr_type);
doca_error_t doca_verbs_ah_attr_set_dlid(doca_verbs_ah_attr_t *verbs_ah, uint32_t dlid);
doca_error_t doca_verbs_ah_attr_set_sl(doca_verbs_ah_attr_t *verbs_ah, uint8_t sl);
doca_error_t doca_verbs_ah_attr_set_sgid_index(doca_verbs_ah_attr_t *verbs_ah, uint8_t sgid_index);
doca_error_t doca_verbs_ah_attr_set_hop_limit(doca_verbs_ah_attr_t *verbs_ah, uint8_t hop_limit);
doca_error_t doca_verbs_ah_attr_set_traffic_class(doca_verbs_ah_attr_t *verbs_ah, uint8_t traffic_class);

/* --- QP init attributes ---------------------------------------------------------------- */
doca_error_t doca_verbs_qp_init_attr_create(doca_verbs_qp_init_attr_t **verbs_qp_init_attr);
doca_error_t doca_verbs_qp_init_attr_destroy(doca_verbs_qp_init_attr_t *qp_init_attr);
doca_error_t doca_verbs_qp_init_attr_set_pd(doca_verbs_qp_init_attr_t *qp_init_attr, doca_dev_t *net_dev);
doca_error_t doca_verbs_qp_init_attr_set_send_cq(doca_verbs_qp_init_attr_t *qp_init_attr, doca_verbs_cq_t *send_cq);
doca_error_t doca_verbs_qp_init_attr_set_receive_cq(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                    doca_verbs_cq_t *receive_cq);
doca_error_t doca_verbs_qp_init_attr_set_sq_sig_all(doca_verbs_qp_init_attr_t *qp_init_attr, int sq_sig_all);
doca_error_t doca_verbs_qp_init_attr_set_sq_wr(doca_verbs_qp_init_attr_t *qp_init_attr, uint32_t sq_wr);
doca_error_t doca_verbs_qp_init_attr_set_rq_wr(doca_verbs_qp_init_attr_t *qp_init_attr, uint32_t rq_wr);
doca_error_t doca_verbs_qp_init_attr_set_send_max_sges(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                       uint32_t send_max_sges);
doca_error_t doca_verbs_qp_init_attr_set_receive_max_sges(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                          uint32_t receive_max_sges);
doca_error_t doca_verbs_qp_init_attr_set_max_inline_data(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                         uint32_t max_inline_data);
doca_error_t doca_verbs_qp_init_attr_set_qp_type(doca_verbs_qp_init_attr_t *qp_init_attr, uint32_t qp_type);
doca_error_t doca_verbs_qp_init_attr_set_user_index(doca_verbs_qp_init_attr_t *qp_init_attr, uint32_t user_index);
doca_error_t doca_verbs_qp_init_attr_set_external_umem(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                       doca_verbs_umem_t *external_umem, uint64_t external_umem_offset);
doca_error_t doca_verbs_qp_init_attr_set_external_dbr_umem(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                           doca_verbs_umem_t *external_umem,
                                                           uint64_t external_umem_offset);
doca_error_t doca_verbs_qp_init_attr_set_external_uar(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                      doca_verbs_uar_t *external_uar);
doca_error_t doca_verbs_qp_init_attr_set_core_direct_master(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                            uint8_t core_direct_master);
doca_error_t doca_verbs_qp_init_attr_set_send_dbr_mode(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                       enum doca_verbs_qp_send_dbr_mode send_dbr_mode);
doca_error_t doca_verbs_qp_init_attr_set_ordering_semantic(doca_verbs_qp_init_attr_t *qp_init_attr,
                                                           enum doca_verbs_qp_ordering_semantic ordering_semantic);

/* --- QP attributes --------------------------------------------------------------------- */
doca_error_t doca_verbs_qp_attr_create(doca_verbs_qp_attr_t **verbs_qp_attr);
doca_error_t doca_verbs_qp_attr_destroy(doca_verbs_qp_attr_t *verbs_qp_attr);
doca_error_t doca_verbs_qp_attr_set_next_state(doca_verbs_qp_attr_t *qp_attr, enum doca_verbs_qp_state next_state);
doca_error_t doca_verbs_qp_attr_set_current_state(doca_verbs_qp_attr_t *qp_attr,
                                                  enum doca_verbs_qp_state current_state);
doca_error_t doca_verbs_qp_attr_set_path_mtu(doca_verbs_qp_attr_t *qp_attr, enum doca_verbs_mtu_size path_mtu);
doca_error_t doca_verbs_qp_attr_set_rq_psn(doca_verbs_qp_attr_t *qp_attr, uint32_t rq_psn);
doca_error_t doca_verbs_qp_attr_set_sq_psn(doca_verbs_qp_attr_t *qp_attr, uint32_t sq_psn);
doca_error_t doca_verbs_qp_attr_set_dest_qp_num(doca_verbs_qp_attr_t *qp_attr, uint32_t dest_qp_num);
doca_error_t doca_verbs_qp_attr_set_allow_remote_write(doca_verbs_qp_attr_t *qp_attr, int allow_remote_write);
doca_error_t doca_verbs_qp_attr_set_allow_remote_read(doca_verbs_qp_attr_t *qp_attr, int allow_remote_read);
doca_error_t doca_verbs_qp_attr_set_allow_remote_atomic(doca_verbs_qp_attr_t *qp_attr,
                                                        enum doca_verbs_qp_atomic_mode allow_remote_atomic);
doca_error_t doca_verbs_qp_attr_set_ah_attr(doca_verbs_qp_attr_t *qp_attr, doca_verbs_ah_attr_t *ah_attr);
doca_error_t doca_verbs_qp_attr_set_pkey_index(doca_verbs_qp_attr_t *qp_attr, uint16_t pkey_index);
doca_error_t doca_verbs_qp_attr_set_port_num(doca_verbs_qp_attr_t *qp_attr, uint16_t port_num);
doca_error_t doca_verbs_qp_attr_set_ack_timeout(doca_verbs_qp_attr_t *qp_attr, uint16_t ack_timeout);
doca_error_t doca_verbs_qp_attr_set_retry_cnt(doca_verbs_qp_attr_t *qp_attr, uint16_t retry_cnt);
doca_error_t doca_verbs_qp_attr_set_rnr_retry(doca_verbs_qp_attr_t *qp_attr, uint16_t rnr_retry);
doca_error_t doca_verbs_qp_attr_set_min_rnr_timer(doca_verbs_qp_attr_t *qp_attr, uint16_t min_rnr_timer);
doca_error_t doca_verbs_qp_attr_set_max_rd_atomic(doca_verbs_qp_attr_t *qp_attr, uint8_t max_rd_atomic);
doca_error_t doca_verbs_qp_attr_set_max_dest_rd_atomic(doca_verbs_qp_attr_t *qp_attr, uint8_t max_dest_rd_atomic);
enum doca_verbs_qp_state doca_verbs_qp_attr_get_next_state(const doca_verbs_qp_attr_t *qp_attr);
enum doca_verbs_qp_state doca_verbs_qp_attr_get_current_state(const doca_verbs_qp_attr_t *qp_attr);
uint32_t doca_verbs_qp_attr_get_dest_qp_num(const doca_verbs_qp_attr_t *qp_attr);

/* --- QPs ------------------------------------------------------------------------------- */
doca_error_t doca_verbs_qp_create(doca_dev_t *net_dev, doca_verbs_qp_init_attr_t *qp_init_attr,
                                  doca_verbs_qp_t **verbs_qp);
doca_error_t doca_verbs_qp_destroy(doca_verbs_qp_t *verbs_qp);
/* attr_mask: DOCA_VERBS_QP_ATTR_* bits naming the attributes to apply. */
doca_error_t doca_verbs_qp_modify(doca_verbs_qp_t *verbs_qp, doca_verbs_qp_attr_t *qp_attr, int attr_mask);
doca_error_t doca_verbs_qp_query(doca_verbs_qp_t *verbs_qp, doca_verbs_qp_attr_t *qp_attr,
                                 doca_verbs_qp_init_attr_t *qp_init_attr, int *attr_mask);
uint32_t doca_verbs_qp_get_qpn(const doca_verbs_qp_t *verbs_qp);
doca_error_t doca_verbs_qp_get_wq(const doca_verbs_qp_t *verbs_qp, void **sq_buf, uint32_t *sq_num_entries,
                                  void **rq_buf, uint32_t *rq_num_entries, uint32_t *rwqe_size_bytes);
doca_error_t doca_verbs_qp_get_dbr_addr(const doca_verbs_qp_t *verbs_qp, void **dbr_addr);
doca_error_t doca_verbs_qp_get_uar_addr(const doca_verbs_qp_t *verbs_qp, void **uar_addr);

/* --- CQs ------------------------------------------------------------------------------- */
doca_error_t doca_verbs_cq_attr_create(doca_verbs_cq_attr_t **verbs_cq_attr);
doca_error_t doca_verbs_cq_attr_destroy(doca_verbs_cq_attr_t *verbs_cq_attr);
doca_error_t doca_verbs_cq_attr_set_cq_size(doca_verbs_cq_attr_t *cq_attr, uint32_t cq_size);
doca_error_t doca_verbs_cq_attr_set_cq_overrun(doca_verbs_cq_attr_t *cq_attr, enum doca_verbs_cq_overrun overrun);
doca_error_t doca_verbs_cq_attr_set_cq_collapsed(doca_verbs_cq_attr_t *cq_attr, uint8_t cq_collapsed);
doca_error_t doca_verbs_cq_attr_set_external_umem(doca_verbs_cq_attr_t *cq_attr, doca_verbs_umem_t *external_umem,
                                                  uint64_t external_umem_offset);
doca_error_t doca_verbs_cq_attr_set_external_uar(doca_verbs_cq_attr_t *cq_attr, doca_verbs_uar_t *external_uar);
doca_error_t doca_verbs_cq_create(doca_dev_t *net_dev, doca_verbs_cq_attr_t *cq_attr, doca_verbs_cq_t **verbs_cq);
doca_error_t doca_verbs_cq_destroy(doca_verbs_cq_t *verbs_cq);
uint32_t doca_verbs_cq_get_cqn(const doca_verbs_cq_t *verbs_cq);

/* --- SRQ, UAR, UMEM: not made by gdaki (NOT_SUPPORTED, docs/doca-compat.md) ------------- */
doca_error_t doca_verbs_srq_init_attr_create(struct doca_verbs_srq_init_attr **verbs_srq_init_attr);
doca_error_t doca_verbs_srq_init_attr_destroy(struct doca_verbs_srq_init_attr *verbs_srq_init_attr);
doca_error_t doca_verbs_srq_create(doca_dev_t *net_dev, struct doca_verbs_srq_init_attr *srq_init_attr,
                                   struct doca_verbs_srq **verbs_srq);
doca_error_t doca_verbs_srq_destroy(struct doca_verbs_srq *verbs_srq);
doca_error_t doca_verbs_uar_create(doca_dev_t *net_dev, enum doca_verbs_uar_allocation_type allocation_type,
                                   doca_verbs_uar_t **uar_obj);
doca_error_t doca_verbs_uar_destroy(doca_verbs_uar_t *uar_obj);
doca_error_t doca_verbs_uar_id_get(const doca_verbs_uar_t *uar_obj, uint32_t *uar_id);
doca_error_t doca_verbs_uar_reg_addr_get(const doca_verbs_uar_t *uar_obj, void **reg_addr);
doca_error_t doca_verbs_umem_create(doca_dev_t *net_dev, void *address, size_t size, uint32_t access_flags,
                                    int dmabuf_fd, size_t dmabuf_offset, doca_verbs_umem_t **umem_obj);
doca_error_t doca_verbs_umem_destroy(doca_verbs_umem_t *umem_obj);
doca_error_t doca_verbs_umem_get_id(const doca_verbs_umem_t *umem_obj, uint32_t *umem_id);
doca_error_t doca_verbs_umem_get_size(const doca_verbs_umem_t *umem_obj, size_t *umem_size);
doca_error_t doca_verbs_umem_get_address(const doca_verbs_umem_t *umem_obj, void **umem_address);

#ifdef __cplusplus
}
#endif

#endif /* GDAKI_DOCA_VERBS_H */
