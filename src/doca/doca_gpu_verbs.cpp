// doca_gpu_verbs_*: exporting a verbs QP to its initiators with the NIC handler the program
// asks for, the device handles, the CPU proxy (progress calls and the progress service),
// and error queries. Built on gdaki::exported_qp (gdaki/export.hpp): AUTO and GPU_SM_DB are
// its direct backend, CPU_PROXY its CPU-assisted backend (initiators write WQEs and the
// doorbell record; a CPU thread rings), GPU_SM_BF a handle that rings BlueFlame.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "doca/doca_objects.hpp"
#include "gdaki/device/ops.hpp"

namespace {

using gdaki::doca::fail;
using gdaki::doca::guarded;
using gdaki::doca::open_of;
using gdaki::doca::invalid;

// The progress service: one thread stepping every monitored QP's CPU proxy.
struct service {
  std::mutex mutex;
  std::vector<doca_gpu_verbs_qp*> qps;
  std::atomic<bool> stop{false};
  std::thread thread;
};

size_t progress_one(doca_gpu_verbs_qp* q) {
  std::lock_guard<std::mutex> lock(q->priv->progress_mutex);
  return q->priv->exported ? q->priv->exported->progress() : 0;
}

}  // namespace

extern "C" doca_error_t doca_gpu_verbs_export_qp(doca_gpu_t* gpu_dev, struct doca_verbs_qp_t* qp,
                                                 enum doca_gpu_dev_verbs_nic_handler nic_handler,
                                                 void* gpu_qp_umem_dev_ptr, struct doca_verbs_cq_t* cq_sq,
                                                 enum doca_gpu_verbs_send_dbr_mode_ext send_dbr_mode_ext,
                                                 enum doca_gpu_dev_verbs_cq_type cq_type, bool enable_data_direct,
                                                 struct doca_gpu_verbs_qp** qp_out) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_export_qp, gpu_dev, qp, nic_handler, gpu_qp_umem_dev_ptr, cq_sq,
                         send_dbr_mode_ext, cq_type, enable_data_direct, qp_out);
  static constexpr const char* call = "doca_gpu_verbs_export_qp";
  doca_verbs_qp_open* q = open_of(qp);
  doca_verbs_cq_open* scq = open_of(cq_sq);
  if (open_of(gpu_dev) == nullptr || q == nullptr || scq == nullptr || qp_out == nullptr) {
    return fail(invalid, call, "gpu_dev, qp and cq_sq must be gdaki's, and qp_out not NULL");
  }
  if (cq_sq != q->send_cq) return fail(invalid, call, "cq_sq is not the send CQ the QP was created with");
  if (gpu_qp_umem_dev_ptr != nullptr) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, call, "gdaki places the QP's rings itself; external UMEM is not accepted");
  }
  if (send_dbr_mode_ext != DOCA_GPUNETIO_VERBS_SEND_DBR_MODE_EXT_VALID_DBR ||
      nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_NO_DBR) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, call,
                "no-DBR mode: the soft NIC learns of new WQEs from the doorbell record, so it must be valid");
  }
  if (cq_type != DOCA_GPUNETIO_VERBS_CQ_64B && cq_type != DOCA_GPUNETIO_VERBS_CQ_UNKNOWN) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, call, "collapsed CQs: gdaki's device poller reads one CQE per signalled WQE");
  }
  if (enable_data_direct) return fail(DOCA_ERROR_NOT_SUPPORTED, call, "data direct needs a ConnectX; not written");
  return guarded(call, [&]() -> doca_error_t {
    auto priv = std::make_unique<doca_gpu_verbs_qp_private>();
    gdaki::dev::qp_handle* handle = nullptr;
    doca_verbs_cq_open* rcq = open_of(q->receive_cq);
    if (nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_BF) {
      gdaki::verbs::qp_export_options xo;
      xo.db_mode = gdaki::dev::doorbell_mode::blueflame;
      priv->blueflame = std::make_unique<gdaki::dev::qp_handle>(q->qp.export_handle(&scq->handle, &rcq->handle, xo));
      handle = priv->blueflame.get();
    } else {
      gdaki::export_options eo;
      eo.initiator = gdaki::initiator::cpu;  // gdaki's DOCA layer serves CPU initiators (host grid)
      if (nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY) {
        eo.backend = gdaki::backend_request::cpu_assisted;
        eo.own_thread = false;  // DOCA's program (or its service) calls cpu_proxy_progress
      } else if (nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO ||
                 nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB) {
        eo.backend = gdaki::backend_request::direct;
      } else {
        return fail(invalid, call, "nic_handler " + std::to_string(static_cast<int>(nic_handler)) + " is unknown");
      }
      priv->exported = std::make_unique<gdaki::exported_qp>(q->qp, &scq->handle, &rcq->handle, eo);
      handle = &priv->exported->handle();
    }
    priv->dev_qp.qp = handle;
    priv->dev_qp.cq_sq = doca_gpu_dev_verbs_cq{handle, &scq->handle};
    priv->dev_qp.nic_handler = nic_handler;
    priv->dev_qp.sq_wqe_num = gdaki::dev::sq_wqebbs(*handle);
    auto* out = new doca_gpu_verbs_qp{};
    out->gpu_dev = gpu_dev;
    out->qp = qp;
    out->nic_handler = nic_handler;
    out->cpu_proxy = nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY;
    out->qp_cpu = &priv->dev_qp;
    out->qp_gpu = &priv->dev_qp;
    out->cq_sq = cq_sq;
    out->priv = priv.release();
    *qp_out = out;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_verbs_unexport_qp(doca_gpu_t* gpu_dev, struct doca_gpu_verbs_qp* qp) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_unexport_qp, gpu_dev, qp);
  (void)gpu_dev;
  if (qp == nullptr || qp->priv == nullptr) return fail(invalid, "doca_gpu_verbs_unexport_qp", "qp is NULL or not exported");
  return guarded("doca_gpu_verbs_unexport_qp", [&] {
    delete qp->priv;
    delete qp;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_verbs_get_qp_dev(struct doca_gpu_verbs_qp* qp, struct doca_gpu_dev_verbs_qp** qp_gpu) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_get_qp_dev, qp, qp_gpu);
  if (qp == nullptr || qp->priv == nullptr || qp_gpu == nullptr) {
    return fail(invalid, "doca_gpu_verbs_get_qp_dev", "qp (exported) and qp_gpu must not be NULL");
  }
  *qp_gpu = &qp->priv->dev_qp;
  return DOCA_SUCCESS;
}

// An array of device handles, copied by value (each copy points at the same gdaki handle).
extern "C" doca_error_t doca_gpu_verbs_export_multi_qps_dev(doca_gpu_t* gpu_dev, struct doca_gpu_verbs_qp** qps,
                                                            unsigned int num_qps,
                                                            struct doca_gpu_dev_verbs_qp** out_qp_gpus) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_export_multi_qps_dev, gpu_dev, qps, num_qps, out_qp_gpus);
  (void)gpu_dev;
  if (qps == nullptr || num_qps == 0 || out_qp_gpus == nullptr) {
    return fail(invalid, "doca_gpu_verbs_export_multi_qps_dev", "qps, num_qps and out_qp_gpus must be given");
  }
  return guarded("doca_gpu_verbs_export_multi_qps_dev", [&] {
    auto* arr = new doca_gpu_dev_verbs_qp[num_qps]{};
    for (unsigned int i = 0; i < num_qps; ++i) {
      if (qps[i] != nullptr && qps[i]->priv != nullptr) arr[i] = qps[i]->priv->dev_qp;  // holes stay zero
    }
    *out_qp_gpus = arr;
    return DOCA_SUCCESS;
  });
}
extern "C" doca_error_t doca_gpu_verbs_unexport_multi_qps_dev(doca_gpu_t* gpu_dev, struct doca_gpu_verbs_qp** qps,
                                                              unsigned int num_qps,
                                                              struct doca_gpu_dev_verbs_qp* qp_gpus) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_unexport_multi_qps_dev, gpu_dev, qps, num_qps, qp_gpus);
  (void)gpu_dev;
  (void)qps;
  (void)num_qps;
  if (qp_gpus == nullptr) return fail(invalid, "doca_gpu_verbs_unexport_multi_qps_dev", "qp_gpus is NULL");
  delete[] qp_gpus;
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_verbs_can_gpu_register_uar(void* db, bool* out_can_register) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_can_gpu_register_uar, db, out_can_register);
  if (db == nullptr || out_can_register == nullptr) {
    return fail(invalid, "doca_gpu_verbs_can_gpu_register_uar", "db and out_can_register must not be NULL");
  }
  *out_can_register = false;  // no CUDA in gdaki's DOCA layer: nothing is registered with a GPU
  return DOCA_SUCCESS;
}
extern "C" doca_error_t doca_gpu_verbs_export_uar(uint64_t* sq_db, uint64_t** uar_addr_gpu) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_export_uar, sq_db, uar_addr_gpu);
  (void)sq_db;
  (void)uar_addr_gpu;
  return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_gpu_verbs_export_uar",
              "gdaki's DOCA layer serves CPU initiators; mapping a UAR for GPU stores is not written");
}
extern "C" doca_error_t doca_gpu_verbs_unexport_uar(uint64_t* uar_addr_gpu) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_unexport_uar, uar_addr_gpu);
  (void)uar_addr_gpu;
  return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_gpu_verbs_unexport_uar", "no UAR is ever exported by gdaki");
}

extern "C" doca_error_t doca_gpu_verbs_cpu_proxy_progress(struct doca_gpu_verbs_qp* qp_cpu, bool* out_progressed) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_cpu_proxy_progress, qp_cpu, out_progressed);
  if (qp_cpu == nullptr || qp_cpu->priv == nullptr) {
    return fail(invalid, "doca_gpu_verbs_cpu_proxy_progress", "qp_cpu is NULL or not exported");
  }
  return guarded("doca_gpu_verbs_cpu_proxy_progress", [&] {
    const size_t work = progress_one(qp_cpu);
    if (out_progressed != nullptr) *out_progressed = work != 0;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_verbs_create_service(doca_gpu_verbs_service_t* out_service) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_create_service, out_service);
  if (out_service == nullptr) return fail(invalid, "doca_gpu_verbs_create_service", "out_service is NULL");
  return guarded("doca_gpu_verbs_create_service", [&] {
    auto* s = new service{};
    s->thread = std::thread([s] {
      uint32_t idle = 0;
      while (!s->stop.load(std::memory_order_acquire)) {
        size_t work = 0;
        {
          std::lock_guard<std::mutex> lock(s->mutex);
          for (doca_gpu_verbs_qp* q : s->qps) work += progress_one(q);
        }
        // Spin while busy, then back off: an idle service must not hold a core.
        idle = work != 0 ? 0 : idle + 1;
        if (idle > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
        else if (idle > 64) std::this_thread::yield();
      }
    });
    *out_service = s;
    return DOCA_SUCCESS;
  });
}
extern "C" doca_error_t doca_gpu_verbs_service_monitor_qp(doca_gpu_verbs_service_t svc, struct doca_gpu_verbs_qp* qp) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_service_monitor_qp, svc, qp);
  if (svc == nullptr || qp == nullptr || qp->priv == nullptr) {
    return fail(invalid, "doca_gpu_verbs_service_monitor_qp", "service and qp (exported) must not be NULL");
  }
  auto* s = static_cast<service*>(svc);
  std::lock_guard<std::mutex> lock(s->mutex);
  s->qps.push_back(qp);
  return DOCA_SUCCESS;
}
extern "C" doca_error_t doca_gpu_verbs_destroy_service(doca_gpu_verbs_service_t svc) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_gpu_verbs_destroy_service, svc);
  if (svc == nullptr) return fail(invalid, "doca_gpu_verbs_destroy_service", "service is NULL");
  auto* s = static_cast<service*>(svc);
  s->stop.store(true, std::memory_order_release);
  s->thread.join();
  delete s;
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_verbs_query_last_error(struct doca_gpu_verbs_qp* qp,
                                                        struct doca_gpu_verbs_qp_error_info* error_info) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_query_last_error, qp, error_info);
  if (qp == nullptr || qp->priv == nullptr || error_info == nullptr) {
    return fail(invalid, "doca_gpu_verbs_query_last_error", "qp (exported) and error_info must not be NULL");
  }
  const gdaki::dev::op_error e = gdaki::dev::last_error(*qp->priv->dev_qp.qp);
  *error_info = doca_gpu_verbs_qp_error_info{};
  error_info->has_error = e.syndrome != gdaki::prm::syndrome::none;
  if (error_info->has_error) {
    error_info->syndrome = static_cast<int>(e.syndrome);
    error_info->vendor_err_synd = static_cast<int>(qp->priv->dev_qp.qp->err_vendor_syndrome);
    error_info->wqe_counter = static_cast<int>(e.wqe_index & 0xffff);
  }
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_verbs_reset_tracking_and_memory(struct doca_gpu_verbs_qp* qp_gverbs) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_reset_tracking_and_memory, qp_gverbs);
  (void)qp_gverbs;
  return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_gpu_verbs_reset_tracking_and_memory",
              "gdaki's exported counters are not rewound; unexport the QP, take it through RESET and export it again");
}
