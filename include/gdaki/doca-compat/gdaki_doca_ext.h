/*
 * gdaki_doca_ext.h: what a DOCA program gets from libibverbs (a protection domain, memory
 * registration, the port's GID) made available on gdaki's soft device without libibverbs.
 * Not part of DOCA's API: gdaki's own, under gdaki_ names. Once gdaki's ibverbs device
 * exists, an ibv_pd from it serves the same role. C and C++.
 */
#ifndef GDAKI_DOCA_EXT_H
#define GDAKI_DOCA_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "doca_error.h"
#include "doca_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Access bits of gdaki_doca_mr_register (the values of libibverbs' IBV_ACCESS_*). */
#define GDAKI_DOCA_ACCESS_LOCAL_WRITE 1
#define GDAKI_DOCA_ACCESS_REMOTE_WRITE 2
#define GDAKI_DOCA_ACCESS_REMOTE_READ 4
#define GDAKI_DOCA_ACCESS_REMOTE_ATOMIC 8

struct gdaki_doca_mr;

/* Opens gdaki device device_name ("soft0"; NULL = the first listed) and a PD on it. The
 * returned pointer is gdaki's object under libibverbs' type name, accepted wherever the
 * DOCA API takes a struct ibv_pd *. */
doca_error_t gdaki_doca_pd_open(const char *device_name, struct ibv_pd **pd);
doca_error_t gdaki_doca_pd_close(struct ibv_pd *pd);
/* Registers [addr, addr + length) with the GDAKI_DOCA_ACCESS_* bits. lkey/rkey are host
 * order; the device API's doca_gpu_dev_verbs_addr.key takes them big-endian (htobe32). */
doca_error_t gdaki_doca_mr_register(struct ibv_pd *pd, void *addr, size_t length, uint32_t access,
                                    struct gdaki_doca_mr **mr, uint32_t *lkey, uint32_t *rkey);
doca_error_t gdaki_doca_mr_deregister(struct gdaki_doca_mr *mr);
/* The device's address for the peer's AH (what a GID is to RoCE; on the soft device its
 * wire address). */
doca_error_t gdaki_doca_query_gid(struct ibv_pd *pd, struct doca_verbs_gid *gid);
/* The connection token (16 bytes) both sides agreed out of band; optional: without it the
 * QP connects with an all-zero token, and the wire still requires the job's secret. */
doca_error_t gdaki_doca_ah_attr_set_token(doca_verbs_ah_attr_t *verbs_ah, const uint8_t token[16]);

#ifdef __cplusplus
}
#endif

#endif /* GDAKI_DOCA_EXT_H */
