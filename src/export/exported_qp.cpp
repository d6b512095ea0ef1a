// exported_qp: a QP handle plus what its backend needs, created and destroyed together.
// See gdaki/export.hpp and docs/proxy.md "Choosing the backend".
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>

#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/proxy/doorbell_service.hpp"
#include "gdaki/proxy/ring.hpp"
#include "gdaki/proxy/wqe_poster.hpp"
#include "gdaki/verbs/qp.hpp"
#include "../gpu/cuda_driver.hpp"
#include "../verbs/object_ref.hpp"

namespace gdaki {

namespace {

constexpr size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// Memory the initiators read and write: plain host memory for CPU threads, host-pinned
// memory mapped into the GPU (same address under unified addressing) for kernels.
class initiator_memory {
 public:
  initiator_memory(initiator who, size_t bytes, const std::string& label) : gpu_(who == initiator::gpu) {
    bytes = round64(bytes);
    if (!gpu_) {
      ptr_ = std::aligned_alloc(64, bytes);
      if (ptr_ == nullptr) throw error(status::no_memory, label + ": export: no memory for the handle and ring");
    } else {
      std::string why;
      api_ = gpu::cuda_driver(&why);
      if (api_ == nullptr) {
        throw error(status::not_supported,
                    label + ": export for GPU initiators needs host-pinned memory from the CUDA driver: " + why);
      }
      // PORTABLE: usable from every context; DEVICEMAP: mapped into the GPU. The caller's
      // thread must have a current context (any CUDA runtime call makes one).
      const gpu::cu::result r =
          api_->mem_host_alloc(&ptr_, bytes, gpu::cu::host_register_portable | gpu::cu::host_register_devicemap);
      if (r != gpu::cu::success) {
        ptr_ = nullptr;
        throw error(status::no_memory, label + ": export: cuMemHostAlloc(" + std::to_string(bytes) +
                                           " bytes) failed: " + gpu::describe(api_, r) +
                                           " (is a CUDA context current on this thread?)");
      }
    }
    std::memset(ptr_, 0, bytes);
  }
  initiator_memory(const initiator_memory&) = delete;
  initiator_memory& operator=(const initiator_memory&) = delete;
  ~initiator_memory() {
    if (ptr_ == nullptr) return;
    if (gpu_) {
      (void)api_->mem_free_host(ptr_);
    } else {
      std::free(ptr_);
    }
  }
  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }

 private:
  bool gpu_;
  const gpu::cuda_driver_api* api_ = nullptr;
  void* ptr_ = nullptr;
};

}  // namespace

struct exported_qp::impl {
  backend_choice choice;
  bool own_thread = true;
  std::optional<initiator_memory> mem;  // [handle][ring_handle][ring]
  dev::qp_handle* handle = nullptr;     // in mem
  dev::qp_handle nic{};                 // proxy: the QP's direct handle, the poster's
  std::unique_ptr<proxy::wqe_poster> poster;
  std::unique_ptr<proxy::proxy_service> proxy;
  std::unique_ptr<proxy::doorbell_service> doorbells;
};

exported_qp::exported_qp(const verbs::qp& q, dev::cq_handle* send_cq, dev::cq_handle* recv_cq,
                         const export_options& opt)
    : impl_(std::make_unique<impl>()) {
  const verbs::detail::object_ref& r = verbs::detail::need(q.ref(), "qp");
  backend_inputs in;
  in.provider = r.ops->name != nullptr ? r.ops->name : "";
  in.initiator = opt.initiator;
  in.gpu_uar = opt.gpu_uar;
  in.rings = opt.rings;
  in.doorbell_record = opt.doorbell_record;
  in.cqs = opt.cqs;
  impl& s = *impl_;
  s.choice = choose_backend(in, opt.backend);
  s.own_thread = opt.own_thread;
  const bool proxy_backend = s.choice.backend == dev::qp_backend::proxy;
  if (proxy_backend && (opt.log2_ring_slots < proxy::ring_min_log2 || opt.log2_ring_slots > proxy::ring_max_log2)) {
    throw error(status::invalid, r.label + ": export: log2_ring_slots " + std::to_string(opt.log2_ring_slots) +
                                     " is outside " + std::to_string(proxy::ring_min_log2) + ".." +
                                     std::to_string(proxy::ring_max_log2));
  }
  const size_t handle_bytes = round64(sizeof(dev::qp_handle));
  const size_t ring_handle_bytes = round64(sizeof(proxy::ring_handle));
  const size_t ring_bytes = proxy_backend ? proxy::ring_bytes(opt.log2_ring_slots, 1) : 0;
  s.mem.emplace(opt.initiator, handle_bytes + (proxy_backend ? ring_handle_bytes + ring_bytes : 0), r.label);
  s.handle = new (s.mem->data()) dev::qp_handle{};

  verbs::qp_export_options xo;
  xo.db_mode = s.choice.db_mode;
  // The host hook runs the soft NIC on the ringing thread: right for CPU initiators and
  // for the CPU services below; GPU threads never call it.
  xo.host_hook = opt.initiator == initiator::cpu || proxy_backend;
  if (!proxy_backend) {
    *s.handle = q.export_handle(send_cq, recv_cq, xo);
    s.handle->scratch_addr = opt.scratch_addr;
    s.handle->scratch_lkey = opt.scratch_lkey;
    if (s.choice.db_mode == dev::doorbell_mode::cpu_assisted) {
      s.doorbells = std::make_unique<proxy::doorbell_service>();
      const status st = s.doorbells->add(*s.handle);
      if (st != status::ok) throw error(st, r.label + ": export: the doorbell service cannot watch this QP");
      if (s.own_thread) (void)s.doorbells->start();
    }
    return;
  }
  // Proxy: the proxy thread owns the QP's direct handle; initiators get a handle on a ring
  // of their own (one ring per handle keeps ring positions usable as tickets).
  s.nic = q.export_handle(send_cq, recv_cq, xo);
  s.nic.scratch_addr = opt.scratch_addr;
  s.nic.scratch_lkey = opt.scratch_lkey;
  auto* rh = new (s.mem->data() + handle_bytes) proxy::ring_handle{};
  const status st = proxy::ring_init(s.mem->data() + handle_bytes + ring_handle_bytes, ring_bytes, opt.log2_ring_slots, 1, rh);
  if (st != status::ok) throw error(st, r.label + ": export: cannot lay out the proxy ring");
  s.poster = std::make_unique<proxy::wqe_poster>(std::vector<dev::qp_handle*>{&s.nic});
  s.proxy = std::make_unique<proxy::proxy_service>(*rh, *s.poster, opt.proxy);
  dev::qp_handle& h = *s.handle;
  h.backend = dev::qp_backend::proxy;
  h.proxy_ring = rh;
  h.proxy_peer = 0;
  h.proxy_counter = 0;
  // Argument checks stay those of the QP behind the ring.
  h.qpn = s.nic.qpn;
  h.log_sq_wqebbs = s.nic.log_sq_wqebbs;
  h.max_inline = s.nic.max_inline;
  h.max_send_wqebbs = s.nic.max_send_wqebbs;
  h.scratch_addr = s.nic.scratch_addr;
  h.scratch_lkey = s.nic.scratch_lkey;
  h.err_state = dev::no_error_state;
  if (s.own_thread) (void)s.proxy->start();
}

exported_qp::~exported_qp() {
  // Services first: they use the handles and the ring, which go with mem.
  if (impl_->proxy) impl_->proxy->stop();
  if (impl_->doorbells) {
    impl_->doorbells->stop();
    (void)impl_->doorbells->remove(*impl_->handle);
  }
  impl_->proxy.reset();
  impl_->doorbells.reset();
}

dev::qp_handle& exported_qp::handle() { return *impl_->handle; }

dev::qp_handle& exported_qp::nic_handle() {
  return impl_->choice.backend == dev::qp_backend::proxy ? impl_->nic : *impl_->handle;
}

const backend_choice& exported_qp::choice() const { return impl_->choice; }

size_t exported_qp::progress() {
  if (impl_->own_thread) return 0;
  if (impl_->proxy) return impl_->proxy->progress();
  if (impl_->doorbells) return impl_->doorbells->progress();
  return 0;
}

proxy::proxy_stats exported_qp::proxy_stats() const { return impl_->proxy ? impl_->proxy->stats() : proxy::proxy_stats{}; }

}  // namespace gdaki
