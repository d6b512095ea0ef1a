// The objects behind DOCA's opaque handles when gdaki serves them (the "open" library
// type), and the helpers every DOCA entry point shares: argument checks that name the
// object and the cause, and the translation of gdaki errors into doca_error_t. Internal to
// libgdaki_doca.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "doca_gpunetio_dev_verbs_common.cuh"
#include "doca_gpunetio_high_level.h"
#include "doca_gpunetio_host.h"
#include "doca_verbs.h"
#include "doca/sdk_mode.hpp"
#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

// GPU handle: without a GPU, memory "on the GPU" is host memory (CPU initiators).
struct doca_gpu_open {
  std::string bus_id;
  std::mutex mutex;
  std::unordered_map<void*, size_t> allocations;  // pointer -> size, for mem_free's check
};

namespace gdaki::doca {

// The answer to an argument an entry point cannot use.
constexpr doca_error_t invalid = DOCA_ERROR_INVALID_VALUE;

// What gdaki_doca_pd_open hands out as a struct ibv_pd *. The magic word lets every entry
// point refuse a pointer that is not one (a real libibverbs PD, or garbage) by name.
struct pd_object {
  static constexpr uint64_t magic_value = 0x6764616b69706421ull;  // "gdakipd!"
  uint64_t magic = magic_value;
  verbs::device device;
  verbs::pd pd;
};

// Returns the PD behind p, or nullptr if p is not one of ours.
pd_object* pd_of(struct ibv_pd* p);

}  // namespace gdaki::doca

struct doca_dev_open {
  gdaki::doca::pd_object* pd = nullptr;
};

struct doca_verbs_ah_attr_open {
  gdaki::verbs::address av;
};

struct doca_verbs_qp_init_attr_open {
  doca_dev_t* pd = nullptr;
  doca_verbs_cq_t* send_cq = nullptr;
  doca_verbs_cq_t* receive_cq = nullptr;
  uint32_t sq_wr = 256, rq_wr = 1, send_max_sges = 1, receive_max_sges = 1, max_inline = 32;
  uint32_t qp_type = DOCA_VERBS_QP_TYPE_RC, user_index = 0;
  int sq_sig_all = 0;
};

struct doca_verbs_qp_attr_open {
  gdaki::verbs::qp_attr attr;
  enum doca_verbs_qp_state next_state = DOCA_VERBS_QP_STATE_RST;
  enum doca_verbs_qp_state current_state = DOCA_VERBS_QP_STATE_RST;
  bool allow_write = false, allow_read = false, allow_atomic = false;
};

struct doca_verbs_cq_attr_open {
  uint32_t size = 256;
  bool overrun = true;
};

struct doca_verbs_cq_open {
  gdaki::verbs::cq cq;
  // The exported ring state (consumer counter) the data path polls; lives as long as the CQ.
  gdaki::dev::cq_handle handle{};
};

struct doca_verbs_qp_open {
  gdaki::verbs::qp qp;
  doca_verbs_cq_t* send_cq = nullptr;
  doca_verbs_cq_t* receive_cq = nullptr;
  // gdaki's RC QPs need a receive CQ; made here when the program gave none.
  std::unique_ptr<doca_verbs_cq_t> own_receive_cq;
  doca_verbs_qp_init_attr_open init;
};

struct doca_gpu_verbs_qp_private {
  std::unique_ptr<gdaki::exported_qp> exported;      // direct and CPU-proxy handlers
  std::unique_ptr<gdaki::dev::qp_handle> blueflame;  // GPU_SM_BF: a handle that rings BlueFlame
  doca_gpu_dev_verbs_qp dev_qp{};                    // what get_qp_dev hands out
  std::mutex progress_mutex;                         // one CPU proxy step at a time
};

namespace gdaki::doca {

// Logs one line (DOCA_GPUNETIO_LOG format) naming the call, the object and the cause, and
// returns err.
doca_error_t fail(doca_error_t err, const char* call, const std::string& why);
// Maps gdaki's statuses to DOCA's codes.
doca_error_t to_doca(gdaki::status s);
// Runs body; a gdaki::error or std::exception becomes a logged doca error.
template <typename Body>
doca_error_t guarded(const char* call, Body&& body) {
  try {
    return body();
  } catch (const gdaki::error& e) {
    return fail(to_doca(e.code()), call, e.what());
  } catch (const std::bad_alloc&) {
    return fail(DOCA_ERROR_NO_MEMORY, call, "out of memory");
  } catch (const std::exception& e) {
    return fail(DOCA_ERROR_DRIVER, call, e.what());
  }
}

// The gdaki object behind a DOCA handle, or nullptr for a null handle or one that another
// library (the SDK) made.
template <typename Handle>
auto open_of(Handle* h) -> decltype(h->open) {
  return h != nullptr && h->type == 0 ? h->open : nullptr;
}

}  // namespace gdaki::doca
