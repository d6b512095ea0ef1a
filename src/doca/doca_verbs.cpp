// doca_verbs_*: devices, address handles, QP and CQ attributes, QPs and CQs, served by
// gdaki's control path (gdaki/verbs/). Every refusal names the call, the object and the
// cause. SRQ, UAR and UMEM objects are not made by gdaki: NOT_SUPPORTED with the reason.
#include <cstring>
#include <string>

#include "doca/doca_objects.hpp"
#include "doca_verbs.h"
#include "gdaki_doca_ext.h"

struct doca_verbs_device_attr {
  gdaki::verbs::device_attr attr;
};

namespace {

using gdaki::doca::fail;
using gdaki::doca::guarded;
using gdaki::doca::open_of;
namespace verbs = gdaki::verbs;

using gdaki::doca::invalid;

template <typename Handle, typename Open>
Handle* make_handle(Open* o) {
  auto* h = new Handle{};
  h->type = DOCA_VERBS_SDK_LIB_TYPE_OPEN;
  h->open = o;
  return h;
}

// doca_verbs_*_attr_create: a new attribute object of gdaki's (`Open`, defaults as DOCA's)
// behind the DOCA handle, or an error naming `call` and the NULL out-pointer `what`.
template <typename Handle, typename Open>
doca_error_t create_attr(Handle** out, const char* call, const char* what) {
  if (out == nullptr) return fail(invalid, call, std::string(what) + " is NULL");
  return guarded(call, [&] {
    *out = make_handle<Handle>(new Open{});
    return DOCA_SUCCESS;
  });
}

// doca_verbs_*_attr_destroy: frees what create_attr made; refuses NULL or a foreign handle.
template <typename Handle>
doca_error_t destroy_attr(Handle* h, const char* call, const char* what) {
  auto* o = open_of(h);
  if (o == nullptr) return fail(invalid, call, std::string(what) + " is NULL or not gdaki's");
  delete o;
  delete h;
  return DOCA_SUCCESS;
}

verbs::qp_state to_gdaki(enum doca_verbs_qp_state s) {
  switch (s) {
    case DOCA_VERBS_QP_STATE_RST: return verbs::qp_state::reset;
    case DOCA_VERBS_QP_STATE_INIT: return verbs::qp_state::init;
    case DOCA_VERBS_QP_STATE_RTR: return verbs::qp_state::rtr;
    case DOCA_VERBS_QP_STATE_RTS: return verbs::qp_state::rts;
    case DOCA_VERBS_QP_STATE_ERR: return verbs::qp_state::err;
  }
  return verbs::qp_state::err;
}

enum doca_verbs_qp_state to_doca(verbs::qp_state s) {
  switch (s) {
    case verbs::qp_state::reset: return DOCA_VERBS_QP_STATE_RST;
    case verbs::qp_state::init: return DOCA_VERBS_QP_STATE_INIT;
    case verbs::qp_state::rtr: return DOCA_VERBS_QP_STATE_RTR;
    case verbs::qp_state::rts: return DOCA_VERBS_QP_STATE_RTS;
    default: return DOCA_VERBS_QP_STATE_ERR;
  }
}

// The DOCA attributes a transition requires (doca_verbs.h's table, RC QPs), by target state.
int required_doca_mask(enum doca_verbs_qp_state next) {
  switch (next) {
    case DOCA_VERBS_QP_STATE_INIT:
      return DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_PKEY_INDEX | DOCA_VERBS_QP_ATTR_PORT_NUM;
    case DOCA_VERBS_QP_STATE_RTR:
      return DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_RQ_PSN | DOCA_VERBS_QP_ATTR_DEST_QP_NUM |
             DOCA_VERBS_QP_ATTR_PATH_MTU | DOCA_VERBS_QP_ATTR_AH_ATTR | DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER;
    case DOCA_VERBS_QP_STATE_RTS:
      return DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_SQ_PSN | DOCA_VERBS_QP_ATTR_ACK_TIMEOUT |
             DOCA_VERBS_QP_ATTR_RETRY_CNT | DOCA_VERBS_QP_ATTR_RNR_RETRY;
    default:
      return DOCA_VERBS_QP_ATTR_NEXT_STATE;
  }
}

const char* mask_bit_name(int bit) {
  switch (bit) {
    case DOCA_VERBS_QP_ATTR_NEXT_STATE: return "NEXT_STATE";
    case DOCA_VERBS_QP_ATTR_PKEY_INDEX: return "PKEY_INDEX";
    case DOCA_VERBS_QP_ATTR_PORT_NUM: return "PORT_NUM";
    case DOCA_VERBS_QP_ATTR_RQ_PSN: return "RQ_PSN";
    case DOCA_VERBS_QP_ATTR_SQ_PSN: return "SQ_PSN";
    case DOCA_VERBS_QP_ATTR_DEST_QP_NUM: return "DEST_QP_NUM";
    case DOCA_VERBS_QP_ATTR_PATH_MTU: return "PATH_MTU";
    case DOCA_VERBS_QP_ATTR_AH_ATTR: return "AH_ATTR";
    case DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER: return "MIN_RNR_TIMER";
    case DOCA_VERBS_QP_ATTR_ACK_TIMEOUT: return "ACK_TIMEOUT";
    case DOCA_VERBS_QP_ATTR_RETRY_CNT: return "RETRY_CNT";
    case DOCA_VERBS_QP_ATTR_RNR_RETRY: return "RNR_RETRY";
    default: return "?";
  }
}

// gdaki's attribute mask for a DOCA mask. gdaki's transitions also require the rd_atomic
// depths (and INIT the access flags), which DOCA leaves optional: they are added with
// their defaults (16 each; no remote access unless allowed).
uint32_t to_gdaki_mask(int mask, enum doca_verbs_qp_state next) {
  namespace m = verbs::qp_attr_mask;
  uint32_t g = 0;
  if (mask & DOCA_VERBS_QP_ATTR_NEXT_STATE) g |= m::state;
  if (mask & (DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_WRITE | DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_READ |
              DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_ATOMIC | DOCA_VERBS_QP_ATTR_ATOMIC_MODE))
    g |= m::access_flags;
  if (mask & DOCA_VERBS_QP_ATTR_PKEY_INDEX) g |= m::pkey_index;
  if (mask & DOCA_VERBS_QP_ATTR_PORT_NUM) g |= m::port;
  if (mask & DOCA_VERBS_QP_ATTR_AH_ATTR) g |= m::av;
  if (mask & DOCA_VERBS_QP_ATTR_PATH_MTU) g |= m::path_mtu;
  if (mask & DOCA_VERBS_QP_ATTR_ACK_TIMEOUT) g |= m::timeout;
  if (mask & DOCA_VERBS_QP_ATTR_RETRY_CNT) g |= m::retry_cnt;
  if (mask & DOCA_VERBS_QP_ATTR_RNR_RETRY) g |= m::rnr_retry;
  if (mask & DOCA_VERBS_QP_ATTR_RQ_PSN) g |= m::rq_psn;
  if (mask & DOCA_VERBS_QP_ATTR_SQ_PSN) g |= m::sq_psn;
  if (mask & DOCA_VERBS_QP_ATTR_DEST_QP_NUM) g |= m::dest_qpn;
  if (mask & DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER) g |= m::min_rnr_timer;
  if (mask & DOCA_VERBS_QP_ATTR_MAX_QP_RD_ATOMIC) g |= m::max_qp_rd_atomic;
  if (mask & DOCA_VERBS_QP_ATTR_MAX_DEST_RD_ATOMIC) g |= m::max_dest_rd_atomic;
  if (next == DOCA_VERBS_QP_STATE_INIT) g |= m::access_flags;
  if (next == DOCA_VERBS_QP_STATE_RTR) g |= m::max_dest_rd_atomic;
  if (next == DOCA_VERBS_QP_STATE_RTS) g |= m::max_qp_rd_atomic;
  return g;
}

}  // namespace

/* ---- devices ------------------------------------------------------------------------------ */
extern "C" doca_error_t doca_verbs_dev_open(struct ibv_pd* verbs_pd, doca_dev_t** net_dev) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_dev_open, verbs_pd, net_dev);
  gdaki::doca::pd_object* pd = gdaki::doca::pd_of(verbs_pd);
  if (pd == nullptr) {
    return fail(invalid, "doca_verbs_dev_open",
                "verbs_pd is NULL or not a gdaki PD (open one with gdaki_doca_pd_open; libibverbs PDs are not "
                "accepted yet)");
  }
  if (net_dev == nullptr) return fail(invalid, "doca_verbs_dev_open", "net_dev is NULL");
  return guarded("doca_verbs_dev_open", [&] {
    auto* o = new doca_dev_open{};
    o->pd = pd;
    auto* d = new doca_dev_t{};
    d->type = DOCA_VERBS_SDK_LIB_TYPE_OPEN;
    d->open = o;
    *net_dev = d;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_verbs_dev_close(doca_dev_t* net_dev) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_dev_close, net_dev);
  doca_dev_open* o = open_of(net_dev);
  if (o == nullptr) return fail(invalid, "doca_verbs_dev_close", "net_dev is NULL or not gdaki's");
  delete o;
  delete net_dev;
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_verbs_query_device(doca_dev_t* net_dev, struct doca_verbs_device_attr** attr) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_query_device, net_dev, attr);
  doca_dev_open* o = open_of(net_dev);
  if (o == nullptr || attr == nullptr) {
    return fail(invalid, "doca_verbs_query_device", "net_dev (gdaki's) and verbs_device_attr must not be NULL");
  }
  return guarded("doca_verbs_query_device", [&] {
    *attr = new doca_verbs_device_attr{o->pd->device.query()};
    return DOCA_SUCCESS;
  });
}
extern "C" doca_error_t doca_verbs_device_attr_free(struct doca_verbs_device_attr* attr) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_device_attr_free, attr);
  if (attr == nullptr) return fail(invalid, "doca_verbs_device_attr_free", "verbs_device_attr is NULL");
  delete attr;
  return DOCA_SUCCESS;
}
extern "C" uint32_t doca_verbs_device_attr_get_max_qp(const struct doca_verbs_device_attr* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_device_attr_get_max_qp, a);
  return a->attr.max_qp;
}
extern "C" uint32_t doca_verbs_device_attr_get_max_qp_wr(const struct doca_verbs_device_attr* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_device_attr_get_max_qp_wr, a);
  return a->attr.max_qp_wr;
}
extern "C" uint32_t doca_verbs_device_attr_get_max_cq(const struct doca_verbs_device_attr* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_device_attr_get_max_cq, a);
  return a->attr.max_cq;
}
extern "C" uint32_t doca_verbs_device_attr_get_max_cqe(const struct doca_verbs_device_attr* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_device_attr_get_max_cqe, a);
  return a->attr.max_cqe;
}
extern "C" uint32_t doca_verbs_device_attr_get_max_mr(const struct doca_verbs_device_attr* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_device_attr_get_max_mr, a);
  return a->attr.max_mr;
}
extern "C" uint32_t doca_verbs_device_attr_get_max_sge(const struct doca_verbs_device_attr* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_device_attr_get_max_sge, a);
  return a->attr.max_sge;
}

/* ---- address handle attributes ------------------------------------------------------------- */
extern "C" doca_error_t doca_verbs_ah_attr_create(doca_dev_t* net_dev, doca_verbs_ah_attr_t** verbs_ah) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_ah_attr_create, net_dev, verbs_ah);
  if (open_of(net_dev) == nullptr || verbs_ah == nullptr) {
    return fail(invalid, "doca_verbs_ah_attr_create", "net_dev (gdaki's) and verbs_ah must not be NULL");
  }
  return create_attr<doca_verbs_ah_attr_t, doca_verbs_ah_attr_open>(verbs_ah, "doca_verbs_ah_attr_create", "verbs_ah");
}
extern "C" doca_error_t doca_verbs_ah_attr_destroy(doca_verbs_ah_attr_t* verbs_ah) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_ah_attr_destroy, verbs_ah);
  return destroy_attr(verbs_ah, "doca_verbs_ah_attr_destroy", "verbs_ah");
}

#define GDAKI_DOCA_SETTER(call, handle_type, arg_type, arg, statement)                     \
  extern "C" doca_error_t call(handle_type* h, arg_type arg) {                              \
    GDAKI_DOCA_SDK_FORWARD(call, h, arg);                                                   \
    auto* o = open_of(h);                                                                   \
    if (o == nullptr) return fail(invalid, #call, "the attribute object is NULL or not gdaki's"); \
    statement;                                                                              \
    return DOCA_SUCCESS;                                                                    \
  }

GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_gid, doca_verbs_ah_attr_t, struct doca_verbs_gid, gid,
                  (std::memcpy(o->av.dgid, gid.raw, 16), o->av.is_global = true))
GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_addr_type, doca_verbs_ah_attr_t, enum doca_verbs_addr_type, addr_type,
                  o->av.is_global = addr_type != DOCA_VERBS_ADDR_TYPE_IB_NO_GRH)
GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_dlid, doca_verbs_ah_attr_t, uint32_t, dlid,
                  o->av.dlid = static_cast<uint16_t>(dlid))
GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_sl, doca_verbs_ah_attr_t, uint8_t, sl, o->av.sl = sl)
GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_sgid_index, doca_verbs_ah_attr_t, uint8_t, sgid_index,
                  o->av.sgid_index = sgid_index)
GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_hop_limit, doca_verbs_ah_attr_t, uint8_t, hop_limit,
                  o->av.hop_limit = hop_limit)
GDAKI_DOCA_SETTER(doca_verbs_ah_attr_set_traffic_class, doca_verbs_ah_attr_t, uint8_t, traffic_class,
                  o->av.traffic_class = traffic_class)

extern "C" doca_error_t gdaki_doca_ah_attr_set_token(doca_verbs_ah_attr_t* verbs_ah, const uint8_t token[16]) {
  doca_verbs_ah_attr_open* o = open_of(verbs_ah);
  if (o == nullptr || token == nullptr) {
    return fail(invalid, "gdaki_doca_ah_attr_set_token", "verbs_ah (gdaki's) and token must not be NULL");
  }
  std::memcpy(o->av.token, token, 16);
  return DOCA_SUCCESS;
}

/* ---- QP init attributes -------------------------------------------------------------------- */
extern "C" doca_error_t doca_verbs_qp_init_attr_create(doca_verbs_qp_init_attr_t** a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_init_attr_create, a);
  return create_attr<doca_verbs_qp_init_attr_t, doca_verbs_qp_init_attr_open>(a, "doca_verbs_qp_init_attr_create", "verbs_qp_init_attr");
}
extern "C" doca_error_t doca_verbs_qp_init_attr_destroy(doca_verbs_qp_init_attr_t* a) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_qp_init_attr_destroy, a);
  return destroy_attr(a, "doca_verbs_qp_init_attr_destroy", "verbs_qp_init_attr");
}
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_pd, doca_verbs_qp_init_attr_t, doca_dev_t*, net_dev, o->pd = net_dev)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_send_cq, doca_verbs_qp_init_attr_t, doca_verbs_cq_t*, cq, o->send_cq = cq)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_receive_cq, doca_verbs_qp_init_attr_t, doca_verbs_cq_t*, cq,
                  o->receive_cq = cq)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_sq_sig_all, doca_verbs_qp_init_attr_t, int, v, o->sq_sig_all = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_sq_wr, doca_verbs_qp_init_attr_t, uint32_t, v, o->sq_wr = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_rq_wr, doca_verbs_qp_init_attr_t, uint32_t, v, o->rq_wr = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_send_max_sges, doca_verbs_qp_init_attr_t, uint32_t, v,
                  o->send_max_sges = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_receive_max_sges, doca_verbs_qp_init_attr_t, uint32_t, v,
                  o->receive_max_sges = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_max_inline_data, doca_verbs_qp_init_attr_t, uint32_t, v,
                  o->max_inline = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_init_attr_set_user_index, doca_verbs_qp_init_attr_t, uint32_t, v, o->user_index = v)

extern "C" doca_error_t doca_verbs_qp_init_attr_set_qp_type(doca_verbs_qp_init_attr_t* a, uint32_t qp_type) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_init_attr_set_qp_type, a, qp_type);
  doca_verbs_qp_init_attr_open* o = open_of(a);
  if (o == nullptr) return fail(invalid, "doca_verbs_qp_init_attr_set_qp_type", "qp_init_attr is NULL or not gdaki's");
  if (qp_type != DOCA_VERBS_QP_TYPE_RC) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_verbs_qp_init_attr_set_qp_type",
                "QP type " + std::to_string(qp_type) + ": gdaki makes RC QPs only");
  }
  o->qp_type = qp_type;
  return DOCA_SUCCESS;
}

// Attributes that hand gdaki memory or doorbells the program made itself: gdaki places
// rings and doorbell pages itself (verbs::placement), so these are refused by name.
// In SDK mode the SDK may offer them: each is forwarded first.
#define GDAKI_DOCA_REFUSE(call, reason, params, ...)          \
  extern "C" doca_error_t call params {                       \
    GDAKI_DOCA_SDK_FORWARD(call, __VA_ARGS__);                \
    return fail(DOCA_ERROR_NOT_SUPPORTED, #call, reason);     \
  }
// The same for a refused call that destroys its handle.
#define GDAKI_DOCA_REFUSE_DESTROY(call, reason, params, ...)  \
  extern "C" doca_error_t call params {                       \
    GDAKI_DOCA_SDK_FORWARD_DESTROY(call, __VA_ARGS__);        \
    return fail(DOCA_ERROR_NOT_SUPPORTED, #call, reason);     \
  }

GDAKI_DOCA_REFUSE(doca_verbs_qp_init_attr_set_external_umem,
                  "gdaki allocates the QP's rings itself; external UMEM is not accepted",
                  (doca_verbs_qp_init_attr_t* a1, doca_verbs_umem_t* a2, uint64_t a3), a1, a2, a3)
GDAKI_DOCA_REFUSE(doca_verbs_qp_init_attr_set_external_dbr_umem,
                  "gdaki places the QP's doorbell record itself; external UMEM is not accepted",
                  (doca_verbs_qp_init_attr_t* a1, doca_verbs_umem_t* a2, uint64_t a3), a1, a2, a3)
GDAKI_DOCA_REFUSE(doca_verbs_qp_init_attr_set_external_uar,
                  "gdaki maps the QP's doorbell page itself; external UARs are not accepted",
                  (doca_verbs_qp_init_attr_t* a1, doca_verbs_uar_t* a2), a1, a2)
GDAKI_DOCA_REFUSE(doca_verbs_qp_init_attr_set_core_direct_master,
                  "core-direct (cross-QP WAIT WQEs) is not modelled by gdaki's providers",
                  (doca_verbs_qp_init_attr_t* a1, uint8_t a2), a1, a2)

extern "C" doca_error_t doca_verbs_qp_init_attr_set_send_dbr_mode(doca_verbs_qp_init_attr_t* a,
                                                                  enum doca_verbs_qp_send_dbr_mode mode) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_init_attr_set_send_dbr_mode, a, mode);
  if (open_of(a) == nullptr) return fail(invalid, "doca_verbs_qp_init_attr_set_send_dbr_mode", "qp_init_attr is NULL");
  if (mode != DOCA_VERBS_QP_SEND_DBR_MODE_DBR_VALID) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_verbs_qp_init_attr_set_send_dbr_mode",
                "no-DBR mode: the soft NIC learns of new WQEs from the doorbell record, so it must be valid");
  }
  return DOCA_SUCCESS;
}
extern "C" doca_error_t doca_verbs_qp_init_attr_set_ordering_semantic(doca_verbs_qp_init_attr_t* a,
                                                                      enum doca_verbs_qp_ordering_semantic s) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_init_attr_set_ordering_semantic, a, s);
  if (open_of(a) == nullptr) {
    return fail(invalid, "doca_verbs_qp_init_attr_set_ordering_semantic", "qp_init_attr is NULL");
  }
  if (s != DOCA_VERBS_QP_ORDERING_SEMANTIC_IBTA) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_verbs_qp_init_attr_set_ordering_semantic",
                "gdaki executes every QP in IBTA order; out-of-order semantics are not offered");
  }
  return DOCA_SUCCESS;
}

/* ---- QP attributes ------------------------------------------------------------------------- */
extern "C" doca_error_t doca_verbs_qp_attr_create(doca_verbs_qp_attr_t** a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_attr_create, a);
  return create_attr<doca_verbs_qp_attr_t, doca_verbs_qp_attr_open>(a, "doca_verbs_qp_attr_create", "verbs_qp_attr");
}
extern "C" doca_error_t doca_verbs_qp_attr_destroy(doca_verbs_qp_attr_t* a) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_qp_attr_destroy, a);
  return destroy_attr(a, "doca_verbs_qp_attr_destroy", "verbs_qp_attr");
}
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_next_state, doca_verbs_qp_attr_t, enum doca_verbs_qp_state, s,
                  o->next_state = s)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_current_state, doca_verbs_qp_attr_t, enum doca_verbs_qp_state, s,
                  o->current_state = s)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_path_mtu, doca_verbs_qp_attr_t, enum doca_verbs_mtu_size, mtu,
                  o->attr.mtu = static_cast<verbs::path_mtu>(static_cast<uint32_t>(mtu) + 1))
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_rq_psn, doca_verbs_qp_attr_t, uint32_t, v, o->attr.rq_psn = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_sq_psn, doca_verbs_qp_attr_t, uint32_t, v, o->attr.sq_psn = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_dest_qp_num, doca_verbs_qp_attr_t, uint32_t, v, o->attr.dest_qp_num = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_allow_remote_write, doca_verbs_qp_attr_t, int, v, o->allow_write = v != 0)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_allow_remote_read, doca_verbs_qp_attr_t, int, v, o->allow_read = v != 0)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_allow_remote_atomic, doca_verbs_qp_attr_t, enum doca_verbs_qp_atomic_mode, v,
                  o->allow_atomic = v != DOCA_VERBS_QP_ATOMIC_MODE_NONE)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_pkey_index, doca_verbs_qp_attr_t, uint16_t, v, o->attr.pkey_index = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_port_num, doca_verbs_qp_attr_t, uint16_t, v,
                  o->attr.port_num = static_cast<uint8_t>(v))
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_ack_timeout, doca_verbs_qp_attr_t, uint16_t, v,
                  o->attr.timeout = static_cast<uint8_t>(v))
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_retry_cnt, doca_verbs_qp_attr_t, uint16_t, v,
                  o->attr.retry_cnt = static_cast<uint8_t>(v))
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_rnr_retry, doca_verbs_qp_attr_t, uint16_t, v,
                  o->attr.rnr_retry = static_cast<uint8_t>(v))
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_min_rnr_timer, doca_verbs_qp_attr_t, uint16_t, v,
                  o->attr.min_rnr_timer = static_cast<uint8_t>(v))
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_max_rd_atomic, doca_verbs_qp_attr_t, uint8_t, v, o->attr.max_rd_atomic = v)
GDAKI_DOCA_SETTER(doca_verbs_qp_attr_set_max_dest_rd_atomic, doca_verbs_qp_attr_t, uint8_t, v,
                  o->attr.max_dest_rd_atomic = v)

extern "C" doca_error_t doca_verbs_qp_attr_set_ah_attr(doca_verbs_qp_attr_t* a, doca_verbs_ah_attr_t* ah) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_attr_set_ah_attr, a, ah);
  doca_verbs_qp_attr_open* o = open_of(a);
  doca_verbs_ah_attr_open* h = open_of(ah);
  if (o == nullptr || h == nullptr) {
    return fail(invalid, "doca_verbs_qp_attr_set_ah_attr", "qp_attr and ah_attr must be gdaki's and not NULL");
  }
  o->attr.av = h->av;
  return DOCA_SUCCESS;
}
extern "C" enum doca_verbs_qp_state doca_verbs_qp_attr_get_next_state(const doca_verbs_qp_attr_t* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_attr_get_next_state, a);
  return a->open->next_state;
}
extern "C" enum doca_verbs_qp_state doca_verbs_qp_attr_get_current_state(const doca_verbs_qp_attr_t* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_attr_get_current_state, a);
  return a->open->current_state;
}
extern "C" uint32_t doca_verbs_qp_attr_get_dest_qp_num(const doca_verbs_qp_attr_t* a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_attr_get_dest_qp_num, a);
  return a->open->attr.dest_qp_num;
}

/* ---- CQs ------------------------------------------------------------------------------------ */
extern "C" doca_error_t doca_verbs_cq_attr_create(doca_verbs_cq_attr_t** a) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_cq_attr_create, a);
  return create_attr<doca_verbs_cq_attr_t, doca_verbs_cq_attr_open>(a, "doca_verbs_cq_attr_create", "verbs_cq_attr");
}
extern "C" doca_error_t doca_verbs_cq_attr_destroy(doca_verbs_cq_attr_t* a) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_cq_attr_destroy, a);
  return destroy_attr(a, "doca_verbs_cq_attr_destroy", "verbs_cq_attr");
}
GDAKI_DOCA_SETTER(doca_verbs_cq_attr_set_cq_size, doca_verbs_cq_attr_t, uint32_t, v, o->size = v)
GDAKI_DOCA_SETTER(doca_verbs_cq_attr_set_cq_overrun, doca_verbs_cq_attr_t, enum doca_verbs_cq_overrun, v,
                  o->overrun = v == DOCA_VERBS_CQ_ENABLE_OVERRUN)
extern "C" doca_error_t doca_verbs_cq_attr_set_cq_collapsed(doca_verbs_cq_attr_t* a, uint8_t collapsed) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_cq_attr_set_cq_collapsed, a, collapsed);
  if (open_of(a) == nullptr) return fail(invalid, "doca_verbs_cq_attr_set_cq_collapsed", "cq_attr is NULL");
  if (collapsed != 0) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_verbs_cq_attr_set_cq_collapsed",
                "gdaki's device poller reads one CQE per signalled WQE; collapsed CQs are not exported");
  }
  return DOCA_SUCCESS;
}
GDAKI_DOCA_REFUSE(doca_verbs_cq_attr_set_external_umem,
                  "gdaki allocates the CQ's ring itself; external UMEM is not accepted",
                  (doca_verbs_cq_attr_t* a1, doca_verbs_umem_t* a2, uint64_t a3), a1, a2, a3)
GDAKI_DOCA_REFUSE(doca_verbs_cq_attr_set_external_uar, "gdaki's CQs are not armed; a UAR has nothing to do",
                  (doca_verbs_cq_attr_t* a1, doca_verbs_uar_t* a2), a1, a2)

extern "C" doca_error_t doca_verbs_cq_create(doca_dev_t* net_dev, doca_verbs_cq_attr_t* cq_attr,
                                             doca_verbs_cq_t** verbs_cq) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_cq_create, net_dev, cq_attr, verbs_cq);
  doca_dev_open* d = open_of(net_dev);
  doca_verbs_cq_attr_open* a = open_of(cq_attr);
  if (d == nullptr || a == nullptr || verbs_cq == nullptr) {
    return fail(invalid, "doca_verbs_cq_create", "net_dev and cq_attr (gdaki's) and verbs_cq must not be NULL");
  }
  if (a->size == 0) return fail(invalid, "doca_verbs_cq_create", "cq_size is 0");
  return guarded("doca_verbs_cq_create", [&] {
    auto o = std::make_unique<doca_verbs_cq_open>();
    verbs::cq_init ci;
    ci.depth = a->size;
    ci.ignore_overrun = true;  // exported CQs run with overrun ignored (the device poller's contract)
    o->cq = verbs::cq(d->pd->device, ci);
    o->handle = o->cq.export_handle();
    *verbs_cq = make_handle<doca_verbs_cq_t>(o.release());
    return DOCA_SUCCESS;
  });
}
extern "C" doca_error_t doca_verbs_cq_destroy(doca_verbs_cq_t* verbs_cq) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_cq_destroy, verbs_cq);
  doca_verbs_cq_open* o = open_of(verbs_cq);
  if (o == nullptr) return fail(invalid, "doca_verbs_cq_destroy", "verbs_cq is NULL or not gdaki's");
  return guarded("doca_verbs_cq_destroy", [&] {
    delete o;
    delete verbs_cq;
    return DOCA_SUCCESS;
  });
}
extern "C" uint32_t doca_verbs_cq_get_cqn(const doca_verbs_cq_t* verbs_cq) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_cq_get_cqn, verbs_cq);
  return verbs_cq->open->cq.cqn();
}

/* ---- QPs ------------------------------------------------------------------------------------ */
extern "C" doca_error_t doca_verbs_qp_create(doca_dev_t* net_dev, doca_verbs_qp_init_attr_t* qp_init_attr,
                                             doca_verbs_qp_t** verbs_qp) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_create, net_dev, qp_init_attr, verbs_qp);
  static constexpr const char* call = "doca_verbs_qp_create";
  doca_dev_open* d = open_of(net_dev);
  doca_verbs_qp_init_attr_open* a = open_of(qp_init_attr);
  if (d == nullptr || a == nullptr || verbs_qp == nullptr) {
    return fail(invalid, call, "net_dev and qp_init_attr (gdaki's) and verbs_qp must not be NULL");
  }
  doca_verbs_cq_open* scq = open_of(a->send_cq);
  if (scq == nullptr) return fail(invalid, call, "qp_init_attr has no send CQ (doca_verbs_qp_init_attr_set_send_cq)");
  if (a->receive_cq != nullptr && open_of(a->receive_cq) == nullptr) {
    return fail(invalid, call, "qp_init_attr's receive CQ is not gdaki's");
  }
  if (a->sq_wr == 0) return fail(invalid, call, "sq_wr is 0");
  doca_dev_open* pd_dev = a->pd != nullptr ? open_of(a->pd) : d;
  if (pd_dev == nullptr) return fail(invalid, call, "qp_init_attr's PD is not gdaki's");
  return guarded(call, [&] {
    auto o = std::make_unique<doca_verbs_qp_open>();
    o->init = *a;
    o->send_cq = a->send_cq;
    o->receive_cq = a->receive_cq;
    if (o->receive_cq == nullptr) {  // gdaki's RC QPs need one; DOCA's GPU QPs often have no RQ
      auto rcq = std::make_unique<doca_verbs_cq_open>();
      verbs::cq_init ci;
      ci.depth = a->rq_wr == 0 ? 1 : a->rq_wr;
      rcq->cq = verbs::cq(d->pd->device, ci);
      rcq->handle = rcq->cq.export_handle();
      o->own_receive_cq.reset(make_handle<doca_verbs_cq_t>(rcq.release()));
      o->receive_cq = o->own_receive_cq.get();
    }
    verbs::qp_init qi;
    qi.send_cq = &scq->cq;
    qi.recv_cq = &o->receive_cq->open->cq;
    qi.sq_wqebbs = a->sq_wr;
    qi.rq_wqes = a->rq_wr == 0 ? 1 : a->rq_wr;
    qi.max_send_sge = a->send_max_sges == 0 ? 1 : a->send_max_sges;
    qi.max_recv_sge = a->receive_max_sges == 0 ? 1 : a->receive_max_sges;
    qi.max_inline = a->max_inline;
    qi.user_index = a->user_index;
    o->qp = verbs::qp(pd_dev->pd->pd, qi);
    *verbs_qp = make_handle<doca_verbs_qp_t>(o.release());
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_verbs_qp_destroy(doca_verbs_qp_t* verbs_qp) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_verbs_qp_destroy, verbs_qp);
  doca_verbs_qp_open* o = open_of(verbs_qp);
  if (o == nullptr) return fail(invalid, "doca_verbs_qp_destroy", "verbs_qp is NULL or not gdaki's");
  return guarded("doca_verbs_qp_destroy", [&] {
    o->qp = verbs::qp();  // the QP goes before its own receive CQ
    if (o->own_receive_cq) delete o->own_receive_cq->open;
    delete o;
    delete verbs_qp;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_verbs_qp_modify(doca_verbs_qp_t* verbs_qp, doca_verbs_qp_attr_t* qp_attr, int attr_mask) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_modify, verbs_qp, qp_attr, attr_mask);
  static constexpr const char* call = "doca_verbs_qp_modify";
  doca_verbs_qp_open* q = open_of(verbs_qp);
  doca_verbs_qp_attr_open* a = open_of(qp_attr);
  if (q == nullptr || a == nullptr) return fail(invalid, call, "verbs_qp and qp_attr must be gdaki's and not NULL");
  if (!(attr_mask & DOCA_VERBS_QP_ATTR_NEXT_STATE)) {
    return fail(invalid, call, "attr_mask lacks DOCA_VERBS_QP_ATTR_NEXT_STATE (gdaki changes state on every modify)");
  }
  const int required = required_doca_mask(a->next_state);
  // A move to ERR or RESET needs only the state; the others need their table's attributes.
  if (a->next_state == DOCA_VERBS_QP_STATE_INIT || a->next_state == DOCA_VERBS_QP_STATE_RTR ||
      a->next_state == DOCA_VERBS_QP_STATE_RTS) {
    std::string missing;
    for (int bit = 1; bit <= DOCA_VERBS_QP_ATTR_MAX_DEST_RD_ATOMIC; bit <<= 1) {
      if ((required & bit) && !(attr_mask & bit)) missing += std::string(missing.empty() ? "" : ", ") + mask_bit_name(bit);
    }
    if (!missing.empty()) {
      return fail(invalid, call,
                  "QP " + std::to_string(q->qp.qpn()) + ": moving to state " + std::to_string(a->next_state) +
                      " needs attributes that attr_mask lacks: " + missing);
    }
  }
  return guarded(call, [&] {
    verbs::qp_attr attr = a->attr;
    attr.state = to_gdaki(a->next_state);
    attr.access_flags = (a->allow_write ? verbs::access::remote_write : 0u) |
                        (a->allow_read ? verbs::access::remote_read : 0u) |
                        (a->allow_atomic ? verbs::access::remote_atomic : 0u);
    q->qp.modify(attr, to_gdaki_mask(attr_mask, a->next_state));
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_verbs_qp_query(doca_verbs_qp_t* verbs_qp, doca_verbs_qp_attr_t* qp_attr,
                                            doca_verbs_qp_init_attr_t* qp_init_attr, int* attr_mask) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_query, verbs_qp, qp_attr, qp_init_attr, attr_mask);
  doca_verbs_qp_open* q = open_of(verbs_qp);
  doca_verbs_qp_attr_open* a = open_of(qp_attr);
  if (q == nullptr || a == nullptr) {
    return fail(invalid, "doca_verbs_qp_query", "verbs_qp and qp_attr must be gdaki's and not NULL");
  }
  return guarded("doca_verbs_qp_query", [&] {
    const verbs::qp_attr now = q->qp.query();
    a->attr = now;
    a->current_state = to_doca(now.state);
    a->next_state = a->current_state;
    a->allow_write = (now.access_flags & verbs::access::remote_write) != 0;
    a->allow_read = (now.access_flags & verbs::access::remote_read) != 0;
    a->allow_atomic = (now.access_flags & verbs::access::remote_atomic) != 0;
    if (doca_verbs_qp_init_attr_open* i = open_of(qp_init_attr)) *i = q->init;
    if (attr_mask != nullptr) {
      *attr_mask = DOCA_VERBS_QP_ATTR_CURRENT_STATE | DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_WRITE |
                   DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_READ | DOCA_VERBS_QP_ATTR_PATH_MTU | DOCA_VERBS_QP_ATTR_RQ_PSN |
                   DOCA_VERBS_QP_ATTR_SQ_PSN | DOCA_VERBS_QP_ATTR_DEST_QP_NUM | DOCA_VERBS_QP_ATTR_ACK_TIMEOUT |
                   DOCA_VERBS_QP_ATTR_RETRY_CNT | DOCA_VERBS_QP_ATTR_RNR_RETRY | DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER |
                   DOCA_VERBS_QP_ATTR_AH_ATTR;
    }
    return DOCA_SUCCESS;
  });
}

extern "C" uint32_t doca_verbs_qp_get_qpn(const doca_verbs_qp_t* verbs_qp) {
  GDAKI_DOCA_SDK_FORWARD(doca_verbs_qp_get_qpn, verbs_qp);
  return verbs_qp->open->qp.qpn();
}

GDAKI_DOCA_REFUSE(doca_verbs_qp_get_wq,
                  "gdaki hands the rings to initiators through doca_gpu_verbs_export_qp, not as raw buffers",
                  (const doca_verbs_qp_t* a1, void** a2, uint32_t* a3, void** a4, uint32_t* a5, uint32_t* a6),
                  a1, a2, a3, a4, a5, a6)
GDAKI_DOCA_REFUSE(doca_verbs_qp_get_dbr_addr,
                  "gdaki hands the doorbell record to initiators through doca_gpu_verbs_export_qp",
                  (const doca_verbs_qp_t* a1, void** a2), a1, a2)
GDAKI_DOCA_REFUSE(doca_verbs_qp_get_uar_addr,
                  "gdaki hands the doorbell page to initiators through doca_gpu_verbs_export_qp",
                  (const doca_verbs_qp_t* a1, void** a2), a1, a2)

/* ---- SRQ, UAR, UMEM ------------------------------------------------------------------------ */
// gdaki's providers have SRQs (verbs::srq), but this layer has no receive path to use one
// with: DOCA posts SRQ receives into the raw ring (doca_verbs_srq_get_wq / _get_dbr_addr),
// and rings reach initiators here only through doca_gpu_verbs_export_qp.
#define GDAKI_DOCA_NO_SRQ \
  "DOCA shared receive queues are not written in gdaki's compat layer (no receive path; use gdaki::verbs::srq)"
GDAKI_DOCA_REFUSE(doca_verbs_srq_init_attr_create, GDAKI_DOCA_NO_SRQ, (struct doca_verbs_srq_init_attr** a1), a1)
GDAKI_DOCA_REFUSE_DESTROY(doca_verbs_srq_init_attr_destroy, GDAKI_DOCA_NO_SRQ,
                          (struct doca_verbs_srq_init_attr* a1), a1)
GDAKI_DOCA_REFUSE(doca_verbs_srq_create, GDAKI_DOCA_NO_SRQ,
                  (doca_dev_t* a1, struct doca_verbs_srq_init_attr* a2, struct doca_verbs_srq** a3), a1, a2, a3)
GDAKI_DOCA_REFUSE_DESTROY(doca_verbs_srq_destroy, GDAKI_DOCA_NO_SRQ, (struct doca_verbs_srq* a1), a1)
#undef GDAKI_DOCA_NO_SRQ
GDAKI_DOCA_REFUSE(doca_verbs_uar_create, "gdaki maps each QP's doorbell page itself; stand-alone UARs are not made",
                  (doca_dev_t* a1, enum doca_verbs_uar_allocation_type a2, doca_verbs_uar_t** a3), a1, a2, a3)
GDAKI_DOCA_REFUSE_DESTROY(doca_verbs_uar_destroy, "gdaki makes no stand-alone UARs",
                  (doca_verbs_uar_t* a1), a1)
GDAKI_DOCA_REFUSE(doca_verbs_uar_id_get, "gdaki makes no stand-alone UARs",
                  (const doca_verbs_uar_t* a1, uint32_t* a2), a1, a2)
GDAKI_DOCA_REFUSE(doca_verbs_uar_reg_addr_get, "gdaki makes no stand-alone UARs",
                  (const doca_verbs_uar_t* a1, void** a2), a1, a2)
GDAKI_DOCA_REFUSE(doca_verbs_umem_create, "gdaki places rings itself (verbs::placement); UMEM objects are not made",
                  (doca_dev_t* a1, void* a2, size_t a3, uint32_t a4, int a5, size_t a6, doca_verbs_umem_t** a7),
                  a1, a2, a3, a4, a5, a6, a7)
GDAKI_DOCA_REFUSE_DESTROY(doca_verbs_umem_destroy, "gdaki makes no UMEM objects",
                  (doca_verbs_umem_t* a1), a1)
GDAKI_DOCA_REFUSE(doca_verbs_umem_get_id, "gdaki makes no UMEM objects",
                  (const doca_verbs_umem_t* a1, uint32_t* a2), a1, a2)
GDAKI_DOCA_REFUSE(doca_verbs_umem_get_size, "gdaki makes no UMEM objects",
                  (const doca_verbs_umem_t* a1, size_t* a2), a1, a2)
GDAKI_DOCA_REFUSE(doca_verbs_umem_get_address, "gdaki makes no UMEM objects",
                  (const doca_verbs_umem_t* a1, void** a2), a1, a2)
