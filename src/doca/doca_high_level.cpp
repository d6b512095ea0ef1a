// The high-level calls: send CQ + RC QP + export in one step (and main + companion
// groups, and flat arrays of device handles), written on the doca_verbs_* and
// doca_gpu_verbs_* calls of this library, as DOCA's own high-level layer is.
#include <cstring>

#include "doca/doca_objects.hpp"

namespace {

using gdaki::doca::fail;
using gdaki::doca::guarded;
constexpr const char* create_call = "doca_gpu_verbs_create_qp_hl";

// Tears down whatever of q exists (each step undoes one create step).
void destroy_parts(doca_gpu_verbs_qp_hl* q) {
  if (q->qp_gverbs != nullptr) doca_gpu_verbs_unexport_qp(q->gpu_dev, q->qp_gverbs);
  if (q->qp != nullptr) doca_verbs_qp_destroy(q->qp);
  if (q->cq_sq != nullptr) doca_verbs_cq_destroy(q->cq_sq);
}

doca_error_t create_parts(const doca_gpu_verbs_qp_init_attr_hl* a, doca_gpu_verbs_qp_hl* q) {
  q->gpu_dev = a->gpu_dev;
  q->nic_handler = a->nic_handler;
  q->send_dbr_mode_ext = a->send_dbr_mode_ext;
  doca_dev_t* dev = a->net_dev;
  doca_dev_t* own_dev = nullptr;
  if (dev == nullptr) {  // DOCA lets the PD stand for the device
    doca_error_t e = doca_verbs_dev_open(a->ibpd, &own_dev);
    if (e != DOCA_SUCCESS) return e;
    dev = own_dev;
  }
  doca_error_t e = DOCA_SUCCESS;
  doca_verbs_cq_attr_t* ca = nullptr;
  doca_verbs_qp_init_attr_t* qa = nullptr;
  // The send CQ holds a CQE for every WQE the ring can have outstanding (export's rule).
  if ((e = doca_verbs_cq_attr_create(&ca)) == DOCA_SUCCESS && (e = doca_verbs_cq_attr_set_cq_size(ca, a->sq_nwqe)) == DOCA_SUCCESS &&
      (e = doca_verbs_cq_create(dev, ca, &q->cq_sq)) == DOCA_SUCCESS &&
      (e = doca_verbs_qp_init_attr_create(&qa)) == DOCA_SUCCESS &&
      (e = doca_verbs_qp_init_attr_set_pd(qa, dev)) == DOCA_SUCCESS &&
      (e = doca_verbs_qp_init_attr_set_send_cq(qa, q->cq_sq)) == DOCA_SUCCESS &&
      (e = doca_verbs_qp_init_attr_set_sq_wr(qa, a->sq_nwqe)) == DOCA_SUCCESS &&
      (e = doca_verbs_qp_init_attr_set_ordering_semantic(qa, a->ordering_semantic)) == DOCA_SUCCESS &&
      (e = doca_verbs_qp_create(dev, qa, &q->qp)) == DOCA_SUCCESS) {
    e = doca_gpu_verbs_export_qp(a->gpu_dev, q->qp, a->nic_handler, nullptr, q->cq_sq, a->send_dbr_mode_ext,
                                 a->cq_collapsed ? DOCA_GPUNETIO_VERBS_CQ_64B_COLLAPSED : DOCA_GPUNETIO_VERBS_CQ_64B,
                                 false, &q->qp_gverbs);
  }
  if (qa != nullptr) doca_verbs_qp_init_attr_destroy(qa);
  if (ca != nullptr) doca_verbs_cq_attr_destroy(ca);
  if (own_dev != nullptr) doca_verbs_dev_close(own_dev);  // the CQ and QP hold the device themselves
  return e;
}

}  // namespace

extern "C" doca_error_t doca_gpu_verbs_create_qp_hl(struct doca_gpu_verbs_qp_init_attr_hl* qp_init_attr,
                                                    struct doca_gpu_verbs_qp_hl** qp) {
  if (qp_init_attr == nullptr || qp == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, create_call, "NULL argument");
  if (qp_init_attr->gpu_dev == nullptr || (qp_init_attr->net_dev == nullptr && qp_init_attr->ibpd == nullptr)) {
    return fail(DOCA_ERROR_INVALID_VALUE, create_call, "gpu_dev and one of net_dev or ibpd must be set");
  }
  if (qp_init_attr->sq_nwqe == 0) return fail(DOCA_ERROR_INVALID_VALUE, create_call, "sq_nwqe is 0");
  if (qp_init_attr->mreg_type == DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_CUDA_DMABUF ||
      qp_init_attr->mreg_type == DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_CUDA_PEERMEM) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, create_call,
                "CUDA memory registration: gdaki's DOCA layer places rings in host memory (use MEM_REG_TYPE_DEFAULT)");
  }
  return guarded(create_call, [&] {
    auto* q = new doca_gpu_verbs_qp_hl{};
    const doca_error_t e = create_parts(qp_init_attr, q);
    if (e != DOCA_SUCCESS) {
      destroy_parts(q);
      delete q;
      return e;
    }
    *qp = q;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_verbs_destroy_qp_hl(struct doca_gpu_verbs_qp_hl* qp) {
  if (qp == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_verbs_destroy_qp_hl", "qp is NULL");
  destroy_parts(qp);
  delete qp;
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_verbs_create_qp_group_hl(struct doca_gpu_verbs_qp_init_attr_hl* qp_init_attr,
                                                          struct doca_gpu_verbs_qp_group_hl** qpg) {
  if (qp_init_attr == nullptr || qpg == nullptr) {
    return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_verbs_create_qp_group_hl", "NULL argument");
  }
  return guarded("doca_gpu_verbs_create_qp_group_hl", [&] {
    auto* g = new doca_gpu_verbs_qp_group_hl{};
    doca_error_t e = create_parts(qp_init_attr, &g->qp_main);
    if (e == DOCA_SUCCESS) e = create_parts(qp_init_attr, &g->qp_companion);
    if (e != DOCA_SUCCESS) {
      destroy_parts(&g->qp_companion);
      destroy_parts(&g->qp_main);
      delete g;
      return e;
    }
    *qpg = g;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_verbs_destroy_qp_group_hl(struct doca_gpu_verbs_qp_group_hl* qpg) {
  if (qpg == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_verbs_destroy_qp_group_hl", "qpg is NULL");
  destroy_parts(&qpg->qp_companion);
  destroy_parts(&qpg->qp_main);
  delete qpg;
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_verbs_qp_flat_list_create_hl(struct doca_gpu_verbs_qp_hl** qp_list,
                                                              uint32_t num_elems,
                                                              struct doca_gpu_dev_verbs_qp** qp_gpu) {
  if (qp_list == nullptr || num_elems == 0 || qp_gpu == nullptr) {
    return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_verbs_qp_flat_list_create_hl", "qp_list, num_elems, qp_gpu");
  }
  return guarded("doca_gpu_verbs_qp_flat_list_create_hl", [&] {
    auto* arr = new doca_gpu_dev_verbs_qp[num_elems]{};
    for (uint32_t i = 0; i < num_elems; ++i) {
      if (qp_list[i] == nullptr || qp_list[i]->qp_gverbs == nullptr) {
        delete[] arr;
        return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_verbs_qp_flat_list_create_hl",
                    "qp_list[" + std::to_string(i) + "] is NULL or not exported");
      }
      if (qp_list[i]->qp != nullptr && qp_list[i]->qp->type != DOCA_VERBS_SDK_LIB_TYPE_OPEN) {
        // SDK mode made this QP: its export is NVIDIA's object, whose layout gdaki does not know.
        delete[] arr;
        return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_gpu_verbs_qp_flat_list_create_hl",
                    "qp_list[" + std::to_string(i) + "] was made by NVIDIA's DOCA library (SDK mode); gdaki can list "
                    "only QPs it exported");
      }
      arr[i] = qp_list[i]->qp_gverbs->priv->dev_qp;
    }
    *qp_gpu = arr;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_verbs_qp_flat_list_destroy_hl(struct doca_gpu_dev_verbs_qp* qp_gpu) {
  if (qp_gpu == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_verbs_qp_flat_list_destroy_hl", "NULL");
  delete[] qp_gpu;
  return DOCA_SUCCESS;
}
