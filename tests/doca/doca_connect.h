/*
 * Connection set-up for the DOCA-shaped tests and samples, written only against the DOCA
 * API (doca_verbs_*) plus gdaki's stand-ins for libibverbs (gdaki_doca_ext.h): an RC QP
 * taken RESET -> INIT -> RTR -> RTS towards a peer QP, in the way DOCA's samples do it.
 * gid == NULL connects within this process (no GRH); otherwise through the peer's address.
 */
#ifndef GDAKI_TESTS_DOCA_CONNECT_H
#define GDAKI_TESTS_DOCA_CONNECT_H

#include <stdint.h>
#include <stdio.h>

#include "doca_verbs.h"
#include "gdaki_doca_ext.h"

static inline doca_error_t doca_test_connect(doca_dev_t *dev, doca_verbs_qp_t *qp, uint32_t remote_qpn,
                                             const struct doca_verbs_gid *gid, const uint8_t *token) {
  doca_verbs_qp_attr_t *attr = NULL;
  doca_verbs_ah_attr_t *ah = NULL;
  doca_error_t e = doca_verbs_qp_attr_create(&attr);
  if (e != DOCA_SUCCESS) return e;
  e = doca_verbs_ah_attr_create(dev, &ah);
  if (e != DOCA_SUCCESS) goto out;
  if (gid != NULL) {
    doca_verbs_ah_attr_set_addr_type(ah, DOCA_VERBS_ADDR_TYPE_IPv6);
    doca_verbs_ah_attr_set_gid(ah, *gid);
  } else {
    doca_verbs_ah_attr_set_addr_type(ah, DOCA_VERBS_ADDR_TYPE_IB_NO_GRH);
  }
  if (token != NULL) gdaki_doca_ah_attr_set_token(ah, token);
  doca_verbs_ah_attr_set_hop_limit(ah, 64);

  doca_verbs_qp_attr_set_next_state(attr, DOCA_VERBS_QP_STATE_INIT);
  doca_verbs_qp_attr_set_allow_remote_write(attr, 1);
  doca_verbs_qp_attr_set_allow_remote_read(attr, 1);
  doca_verbs_qp_attr_set_allow_remote_atomic(attr, DOCA_VERBS_QP_ATOMIC_MODE_IB_SPEC);
  doca_verbs_qp_attr_set_pkey_index(attr, 0);
  doca_verbs_qp_attr_set_port_num(attr, 1);
  e = doca_verbs_qp_modify(qp, attr,
                           DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_WRITE |
                               DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_READ | DOCA_VERBS_QP_ATTR_ATOMIC_MODE |
                               DOCA_VERBS_QP_ATTR_PKEY_INDEX | DOCA_VERBS_QP_ATTR_PORT_NUM);
  if (e != DOCA_SUCCESS) goto out;

  doca_verbs_qp_attr_set_next_state(attr, DOCA_VERBS_QP_STATE_RTR);
  doca_verbs_qp_attr_set_path_mtu(attr, DOCA_VERBS_MTU_SIZE_4K_BYTES);
  doca_verbs_qp_attr_set_rq_psn(attr, 0);
  doca_verbs_qp_attr_set_dest_qp_num(attr, remote_qpn);
  doca_verbs_qp_attr_set_ah_attr(attr, ah);
  doca_verbs_qp_attr_set_min_rnr_timer(attr, 12);
  e = doca_verbs_qp_modify(qp, attr,
                           DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_PATH_MTU | DOCA_VERBS_QP_ATTR_RQ_PSN |
                               DOCA_VERBS_QP_ATTR_DEST_QP_NUM | DOCA_VERBS_QP_ATTR_AH_ATTR |
                               DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER);
  if (e != DOCA_SUCCESS) goto out;

  doca_verbs_qp_attr_set_next_state(attr, DOCA_VERBS_QP_STATE_RTS);
  doca_verbs_qp_attr_set_sq_psn(attr, 0);
  doca_verbs_qp_attr_set_ack_timeout(attr, 14);
  doca_verbs_qp_attr_set_retry_cnt(attr, 7);
  doca_verbs_qp_attr_set_rnr_retry(attr, 7);
  e = doca_verbs_qp_modify(qp, attr,
                           DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_SQ_PSN | DOCA_VERBS_QP_ATTR_ACK_TIMEOUT |
                               DOCA_VERBS_QP_ATTR_RETRY_CNT | DOCA_VERBS_QP_ATTR_RNR_RETRY);
out:
  if (ah != NULL) doca_verbs_ah_attr_destroy(ah);
  doca_verbs_qp_attr_destroy(attr);
  return e;
}

#endif /* GDAKI_TESTS_DOCA_CONNECT_H */
