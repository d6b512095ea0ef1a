// exported_qp: a QP handle plus what its backend needs, created and destroyed together.
// See gdaki/export.hpp and docs/proxy.md "Choosing the backend".
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// GPU memory for what only GPU threads touch: the QP handle (its counters are posters'
// words, arch::local) and, for the proxy backend, the ring handle and the ring's producer
// words. The host writes it once at export (cuMemcpyHtoD) and never again.
class device_memory {
 public:
  device_memory(size_t bytes, const std::string& label) {
    std::string why;
    api_ = gpu::cuda_driver(&why);
    if (api_ == nullptr) {
      throw error(status::not_supported, label + ": export for GPU initiators needs the CUDA driver: " + why);
    }
    if (const gpu::cu::result r = api_->mem_alloc(&ptr_, round64(bytes)); r != gpu::cu::success) {
      ptr_ = 0;
      throw error(status::no_memory, label + ": export: cuMemAlloc(" + std::to_string(bytes) +
                                         " bytes) for the device handle failed: " + gpu::describe(api_, r) +
                                         " (is a CUDA context current on this thread?)");
    }
    if (const gpu::cu::result r = api_->memset_d8(ptr_, 0, round64(bytes)); r != gpu::cu::success) {
      (void)api_->mem_free(ptr_);
      ptr_ = 0;
      throw error(status::io_error, label + ": export: cuMemsetD8 of the device handle failed: " + gpu::describe(api_, r));
    }
  }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() {
    if (ptr_ != 0) (void)api_->mem_free(ptr_);
  }
  uint8_t* data() const { return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(ptr_)); }
  const gpu::cuda_driver_api* api() const { return api_; }
  void write(size_t offset, const void* src, size_t bytes, const std::string& label) const {
    if (const gpu::cu::result r = api_->memcpy_htod(ptr_ + offset, src, bytes); r != gpu::cu::success) {
      throw error(status::io_error, label + ": export: copying the handle to GPU memory failed: " + gpu::describe(api_, r));
    }
  }

 private:
  const gpu::cuda_driver_api* api_ = nullptr;
  gpu::cu::deviceptr ptr_ = 0;
};

// Whether the driver knows p as GPU memory (cuMemAlloc). Host memory, pinned or not, is
// not; neither is memory the driver has never seen (the query fails for it).
bool in_gpu_memory(const gpu::cuda_driver_api* api, const void* p) {
  unsigned type = 0;
  return api->pointer_get_attribute(&type, gpu::cu::pointer_attribute_memory_type,
                                    static_cast<gpu::cu::deviceptr>(reinterpret_cast<uintptr_t>(p))) ==
             gpu::cu::success &&
         type == gpu::cu::memorytype_device;
}

// A placed CQ handle read into host memory, wherever the caller put it.
dev::cq_handle read_cq_handle(const gpu::cuda_driver_api* api, const dev::cq_handle* p, const std::string& label) {
  dev::cq_handle h{};
  if (!in_gpu_memory(api, p)) {
    std::memcpy(&h, p, sizeof(h));
    return h;
  }
  const gpu::cu::result r = api->memcpy_dtoh(&h, static_cast<gpu::cu::deviceptr>(reinterpret_cast<uintptr_t>(p)), sizeof(h));
  if (r != gpu::cu::success) {
    throw error(status::io_error, label + ": export: reading a CQ handle from GPU memory failed: " + gpu::describe(api, r));
  }
  return h;
}

}  // namespace

struct exported_qp::impl {
  backend_choice choice;
  bool own_thread = true;
  bool gpu = false;
  // CPU initiators: [handle][ring_handle][ring] in host memory. GPU initiators: the proxy
  // ring's shared parts (proxy line, slots, counters) in host-pinned memory; the rest in
  // `device` (docs/memory-ordering.md, "Every shared word").
  std::optional<initiator_memory> mem;
  std::optional<device_memory> device;  // GPU: [handle][ring_handle][producer words] or
                                        // [handle][send CQ handle][recv CQ handle]
  // Proxy backend, GPU initiators: host copies of CQ handles the caller placed in GPU
  // memory, for the proxy thread that polls them.
  std::unique_ptr<dev::cq_handle[]> host_cqs;
  dev::qp_handle* handle = nullptr;     // where initiators reach it (in mem or device)
  dev::qp_handle view{};                // GPU: the handle as exported (host copy)
  proxy::ring_handle ring{};            // proxy: the ring as the proxy thread sees it
  dev::qp_handle nic{};                 // proxy: the QP's direct handle, the poster's
  std::unique_ptr<proxy::wqe_poster> poster;
  std::unique_ptr<proxy::proxy_service> proxy;
  std::unique_ptr<proxy::doorbell_service> doorbells;
};

namespace {

// GPU initiators: each CQ handle goes where its poller runs (docs/memory-ordering.md,
// "Every shared word"). A CQ handle's claim counter (ci) is written by every poller, so
//   - direct and cpu-assisted: GPU threads poll. A handle the caller left in host memory
//     is copied next to the QP handle in GPU memory, and the QP polls that copy at GPU
//     scope; otherwise every claim would be an atomic across PCIe (the first H100 run:
//     8x128 grid-shared 814-848 ms with host-pinned CQ handles). A handle already in GPU
//     memory is used where it is.
//   - proxy: the CPU proxy thread polls. A handle in GPU memory is copied to host memory.
// The caller's handles are read once here and not used afterwards when copied: poll
// through the QP (dev::wait, dev::rq_poll), not through the handle passed in.
void place_cq_handles_for_gpu(const device_memory& device, std::unique_ptr<dev::cq_handle[]>& host_cqs,
                              bool proxy_backend, size_t handle_bytes, size_t cq_handle_bytes, const std::string& label,
                              dev::cq_handle** send_cq, dev::cq_handle** recv_cq) {
  const gpu::cuda_driver_api* api = device.api();
  dev::cq_handle** cqs[2] = {send_cq, recv_cq};
  for (int i = 0; i < 2; ++i) {
    dev::cq_handle*& placed = *cqs[i];
    const bool on_gpu = in_gpu_memory(api, placed);
    if (!proxy_backend && !on_gpu) {
      const dev::cq_handle copy = read_cq_handle(api, placed, label);
      const size_t offset = handle_bytes + static_cast<size_t>(i) * cq_handle_bytes;
      device.write(offset, &copy, sizeof(copy), label);
      placed = reinterpret_cast<dev::cq_handle*>(device.data() + offset);
    } else if (proxy_backend && on_gpu) {
      if (!host_cqs) host_cqs = std::make_unique<dev::cq_handle[]>(2);
      host_cqs[i] = read_cq_handle(api, placed, label);
      placed = &host_cqs[i];
    }
  }
}

}  // namespace

exported_qp::exported_qp(const verbs::qp& q, dev::cq_handle* send_cq, dev::cq_handle* recv_cq,
                         const export_options& opt)
    : impl_(std::make_unique<impl>()) {
  const verbs::detail::object_ref& r = verbs::detail::need(q.ref(), "qp");
  backend_inputs in;
  in.provider = r.ops->name != nullptr ? r.ops->name : "";
  in.caps = r.ops->caps;
  in.initiator = opt.initiator;
  in.gpu_uar = opt.gpu_uar;
  in.rings = opt.rings;
  in.doorbell_record = opt.doorbell_record;
  in.cqs = opt.cqs;
  impl& s = *impl_;
  s.choice = choose_backend(in, opt.backend);
  s.own_thread = opt.own_thread;
  s.gpu = opt.initiator == initiator::gpu;
  const bool proxy_backend = s.choice.backend == dev::qp_backend::proxy;
  if (proxy_backend && (opt.log2_ring_slots < proxy::ring_min_log2 || opt.log2_ring_slots > proxy::ring_max_log2)) {
    throw error(status::invalid, r.label + ": export: log2_ring_slots " + std::to_string(opt.log2_ring_slots) +
                                     " is outside " + std::to_string(proxy::ring_min_log2) + ".." +
                                     std::to_string(proxy::ring_max_log2));
  }
  const size_t handle_bytes = round64(sizeof(dev::qp_handle));
  const size_t ring_handle_bytes = round64(sizeof(proxy::ring_handle));
  const size_t ring_bytes = proxy_backend ? proxy::ring_bytes(opt.log2_ring_slots, 1) : 0;
  // Where the handle (and, for the proxy, the ring handle and producer words) live.
  uint8_t* ring_mem = nullptr;  // the ring's shared parts
  const size_t cq_handle_bytes = round64(sizeof(dev::cq_handle));
  if (s.gpu) {
    s.device.emplace(handle_bytes + (proxy_backend ? ring_handle_bytes + sizeof(proxy::ring_control)
                                                   : 2 * cq_handle_bytes),
                     r.label);
    if (proxy_backend) {
      s.mem.emplace(opt.initiator, ring_bytes, r.label);
      ring_mem = s.mem->data();
    }
    s.handle = reinterpret_cast<dev::qp_handle*>(s.device->data());
  } else {
    s.mem.emplace(opt.initiator, handle_bytes + (proxy_backend ? ring_handle_bytes + ring_bytes : 0), r.label);
    s.handle = new (s.mem->data()) dev::qp_handle{};
    ring_mem = s.mem->data() + handle_bytes + ring_handle_bytes;
  }
  // Built on the host, then placed: s.view for GPU initiators, the handle itself for CPU.
  dev::qp_handle& h = s.gpu ? s.view : *s.handle;

  verbs::qp_export_options xo;
  xo.db_mode = s.choice.db_mode;
  // The host hook runs the soft NIC on the ringing thread: right for CPU initiators and
  // for the CPU services below; GPU threads never call it.
  xo.host_hook = opt.initiator == initiator::cpu || proxy_backend;
  if (s.gpu) {
    place_cq_handles_for_gpu(*s.device, s.host_cqs, proxy_backend, handle_bytes, cq_handle_bytes, r.label, &send_cq,
                             &recv_cq);
  }
  if (!proxy_backend) {
    h = q.export_handle(send_cq, recv_cq, xo);
    h.scratch_addr = opt.scratch_addr;
    h.scratch_lkey = opt.scratch_lkey;
    if (s.gpu) s.device->write(0, &h, sizeof(h), r.label);
    if (s.choice.db_mode == dev::doorbell_mode::cpu_assisted) {
      s.doorbells = std::make_unique<proxy::doorbell_service>();
      const status st = s.doorbells->add(h);  // reads the record and register addresses only
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
  proxy::ring_parts parts{};
  parts.proxy_words = reinterpret_cast<proxy::ring_control*>(ring_mem);
  parts.slots = reinterpret_cast<proxy::descriptor*>(ring_mem + sizeof(proxy::ring_control));
  parts.counters = reinterpret_cast<uint64_t*>(ring_mem + sizeof(proxy::ring_control) +
                                               (size_t{1} << opt.log2_ring_slots) * sizeof(proxy::descriptor));
  // GPU producers keep their words (reserved, taken) in GPU memory: nobody else reads them.
  parts.producer_words =
      s.gpu ? reinterpret_cast<proxy::ring_control*>(s.device->data() + handle_bytes + ring_handle_bytes) : nullptr;
  const status st = proxy::ring_init_parts(parts, opt.log2_ring_slots, 1, &s.ring);
  if (st != status::ok) throw error(st, r.label + ": export: cannot lay out the proxy ring");
  proxy::ring_handle* rh = nullptr;
  if (s.gpu) {
    const proxy::ring_control prod = proxy::ring_initial_producer_words();
    s.device->write(handle_bytes + ring_handle_bytes, &prod, sizeof(prod), r.label);
    s.device->write(handle_bytes, &s.ring, sizeof(s.ring), r.label);
    rh = reinterpret_cast<proxy::ring_handle*>(s.device->data() + handle_bytes);
  } else {
    rh = new (s.mem->data() + handle_bytes) proxy::ring_handle{s.ring};
  }
  s.poster = std::make_unique<proxy::wqe_poster>(std::vector<dev::qp_handle*>{&s.nic});
  s.proxy = std::make_unique<proxy::proxy_service>(s.ring, *s.poster, opt.proxy);
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
  if (s.gpu) s.device->write(0, &h, sizeof(h), r.label);
  if (s.own_thread) (void)s.proxy->start();
}

exported_qp::~exported_qp() {
  // Services first: they use the handles and the ring, which go with mem.
  if (impl_->proxy) impl_->proxy->stop();
  if (impl_->doorbells) {
    impl_->doorbells->stop();
    (void)impl_->doorbells->remove(impl_->gpu ? impl_->view : *impl_->handle);
  }
  impl_->proxy.reset();
  impl_->doorbells.reset();
}

dev::qp_handle& exported_qp::handle() { return *impl_->handle; }

const dev::qp_handle& exported_qp::host_view() const { return impl_->gpu ? impl_->view : *impl_->handle; }

bool exported_qp::handle_in_gpu_memory() const { return impl_->gpu; }

dev::qp_handle& exported_qp::nic_handle() {
  if (impl_->choice.backend == dev::qp_backend::proxy) return impl_->nic;
  return impl_->gpu ? impl_->view : *impl_->handle;
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
