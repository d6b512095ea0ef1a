// Ring and doorbell-record memory of the mlx5 provider, its DEVX umem registration, UARs,
// and the check that turns a DEVX command's output mailbox into a sentence.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gpu/cuda_driver.hpp"
#include "mlx5_objects.hpp"
#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5 {

namespace {

constexpr size_t page_bytes = 4096;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The CUDA driver with a current context on GPU 0 (its primary context, retained for
// the life of the process), or nullptr with the reason.
const gpu::cuda_driver_api* cuda_ready(std::string* why) {
  static std::once_flag once;
  static std::string failure;
  static const gpu::cuda_driver_api* api = nullptr;
  std::call_once(once, [] {
    std::string msg;
    const gpu::cuda_driver_api* cu = gpu::cuda_driver(&msg);
    if (cu == nullptr) {
      failure = msg;
      return;
    }
    gpu::cu::device dev = 0;
    gpu::cu::context ctx = nullptr;
    gpu::cu::result r = cu->init(0);
    if (r == gpu::cu::success) r = cu->device_get(&dev, 0);
    if (r == gpu::cu::success) r = cu->primary_ctx_retain(&ctx, dev);
    if (r != gpu::cu::success) {
      failure = "CUDA initialisation failed: " + gpu::describe(cu, r);
      return;
    }
    api = cu;
  });
  if (api == nullptr) {
    if (why != nullptr) *why = failure;
    return nullptr;
  }
  // Make GPU 0's primary context current on this thread (cheap when it already is).
  gpu::cu::device dev = 0;
  gpu::cu::context ctx = nullptr;
  if (api->device_get(&dev, 0) != gpu::cu::success || api->primary_ctx_retain(&ctx, dev) != gpu::cu::success ||
      api->ctx_set_current(ctx) != gpu::cu::success) {
    if (why != nullptr) *why = "cannot make GPU 0's primary CUDA context current";
    return nullptr;
  }
  api->primary_ctx_release(dev);  // balance the retain just above; the first one stays
  return api;
}

}  // namespace

status dev_memory::place(const verbs::placement& p, size_t bytes, const char* what, std::string* why) {
  if (p.buffer == nullptr) return allocate(p.kind, bytes, what, why);
  if (p.size < bytes) {
    *why = std::string(what) + ": caller buffer of " + std::to_string(p.size) + " bytes, " + std::to_string(bytes) +
           " needed";
    return status::invalid;
  }
  if (reinterpret_cast<uintptr_t>(p.buffer) % page_bytes != 0) {
    *why = std::string(what) + ": caller buffer must be 4096-byte aligned (it is registered as a DEVX umem "
                               "at offset 0)";
    return status::invalid;
  }
  release();
  p_ = static_cast<uint8_t*>(p.buffer);
  n_ = bytes;
  cap_ = p.size;
  kind_ = p.kind;
  owned_ = false;
  return status::ok;
}

status dev_memory::allocate(verbs::memory_kind kind, size_t bytes, const char* what, std::string* why) {
  release();
  const size_t n = round_up(bytes == 0 ? 1 : bytes, page_bytes);
  void* p = nullptr;
  if (kind == verbs::memory_kind::host) {
    if (posix_memalign(&p, page_bytes, n) != 0) {
      *why = std::string(what) + ": out of host memory";
      return status::no_memory;
    }
    std::memset(p, 0, n);
  } else {
    std::string msg;
    const gpu::cuda_driver_api* cu = cuda_ready(&msg);
    if (cu == nullptr) {
      *why = std::string(what) + ": " + verbs::to_string(kind) + " memory needs the CUDA driver: " + msg;
      return status::not_supported;
    }
    gpu::cu::result r = gpu::cu::success;
    if (kind == verbs::memory_kind::host_pinned) {
      r = cu->mem_host_alloc(&p, n, gpu::cu::host_register_portable | gpu::cu::host_register_devicemap);
      if (r == gpu::cu::success) std::memset(p, 0, n);
    } else {
      gpu::cu::deviceptr d = 0;
      r = cu->mem_alloc(&d, n);
      if (r == gpu::cu::success) r = cu->memset_d8(d, 0, n);
      p = reinterpret_cast<void*>(static_cast<uintptr_t>(d));
    }
    if (r != gpu::cu::success) {
      *why = std::string(what) + ": allocating " + std::to_string(n) + " bytes of " + verbs::to_string(kind) +
             " memory failed: " + gpu::describe(cu, r);
      return status::no_memory;
    }
  }
  p_ = static_cast<uint8_t*>(p);
  n_ = bytes;
  cap_ = n;
  kind_ = kind;
  owned_ = true;
  return status::ok;
}

status dev_memory::fill(uint8_t value, std::string* why) {
  if (kind_ != verbs::memory_kind::device) {
    std::memset(p_, value, n_);
    return status::ok;
  }
  const gpu::cuda_driver_api* cu = cuda_ready(why);
  if (cu == nullptr) return status::not_supported;
  if (gpu::cu::result r = cu->memset_d8(reinterpret_cast<uintptr_t>(p_), value, n_); r != gpu::cu::success) {
    *why = "cuMemsetD8 failed: " + gpu::describe(cu, r);
    return status::io_error;
  }
  return status::ok;
}

void dev_memory::release() {
  if (owned_ && p_ != nullptr) {
    if (kind_ == verbs::memory_kind::host) {
      std::free(p_);
    } else if (const gpu::cuda_driver_api* cu = cuda_ready(nullptr)) {
      if (kind_ == verbs::memory_kind::host_pinned) {
        cu->mem_free_host(p_);
      } else {
        cu->mem_free(reinterpret_cast<uintptr_t>(p_));
      }
    }
  }
  p_ = nullptr;
  n_ = 0;
  cap_ = 0;
  owned_ = false;
}

status register_umem(device_obj* d, const dev_memory& m, const char* what, mlx5dv_devx_umem** out, std::string* why) {
  // The NIC reads WQEs and DBRs and writes CQEs: local access is all a ring needs.
  const uint32_t access = IBV_ACCESS_LOCAL_WRITE;
  // Whole pages when the memory has them (the kernel pins pages anyway; dma-buf ranges are
  // page-granular), else exactly the caller's buffer.
  const size_t bytes = round_up(m.size(), page_bytes) <= m.capacity() ? round_up(m.size(), page_bytes) : m.size();
  std::string route = "mlx5dv_devx_umem_reg";
  if (m.kind() == verbs::memory_kind::device) {
    const gpu::cuda_driver_api* cu = cuda_ready(nullptr);
    if (cu != nullptr && cu->mem_get_handle_for_address_range != nullptr && d->dv->devx_umem_reg_ex != nullptr) {
      int fd = -1;
      const gpu::cu::result r = cu->mem_get_handle_for_address_range(
          &fd, reinterpret_cast<uintptr_t>(m.data()), bytes, gpu::cu::mem_range_handle_type_dma_buf_fd, 0);
      if (r == gpu::cu::success && fd >= 0) {
        mlx5dv_devx_umem_in in{};
        in.addr = m.data();
        in.size = bytes;
        in.access = access;
        in.pgsz_bitmap = page_bytes;  // [unverified] 4 KiB pages within the GPU's 64 KiB ones
        in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
        in.dmabuf_fd = fd;
        errno = 0;
        *out = d->dv->devx_umem_reg_ex(d->ctx, &in);
        const int err = errno;
        ::close(fd);
        if (*out != nullptr) return status::ok;
        *why = std::string(what) + ": mlx5dv_devx_umem_reg_ex over a dma-buf failed: " + std::strerror(err);
        return status::io_error;
      }
      route = "mlx5dv_devx_umem_reg on a GPU address (dma-buf export failed: " + gpu::describe(cu, r) +
              "; needs nvidia-peermem)";
    } else {
      route = "mlx5dv_devx_umem_reg on a GPU address (no dma-buf path: needs cuMemGetHandleForAddressRange and "
              "mlx5dv_devx_umem_reg_ex; needs nvidia-peermem)";
    }
  }
  errno = 0;
  *out = d->dv->devx_umem_reg(d->ctx, m.data(), bytes, access);
  if (*out == nullptr) {
    *why = std::string(what) + ": " + route + " failed: " + std::strerror(errno != 0 ? errno : EINVAL);
    return errno == EOPNOTSUPP ? status::not_supported : status::io_error;
  }
  return status::ok;
}

status check_cmd(uint16_t opcode, int rc, const void* out, size_t outlen, const char* call, std::string* why) {
  const auto r = prm_cmd::read_result({static_cast<const uint8_t*>(out), outlen});
  if (rc == 0 && r.ok()) return status::ok;
  if (!r.ok()) {
    *why = prm_cmd::describe_failure(opcode, r) + " (" + call + ": " + std::strerror(rc != 0 ? rc : EREMOTEIO) + ")";
    return status::io_error;
  }
  *why = prm_cmd::opcode_name(opcode) + " failed: " + call + ": " + std::strerror(rc);
  return rc == EPERM || rc == EOPNOTSUPP ? status::not_supported : status::io_error;
}

mlx5dv_devx_uar* alloc_uar(device_obj* d, std::string* why) {
  errno = 0;
  mlx5dv_devx_uar* u = d->dv->devx_alloc_uar(d->ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
  if (u == nullptr) u = d->dv->devx_alloc_uar(d->ctx, MLX5DV_UAR_ALLOC_TYPE_BF);
  if (u == nullptr && why != nullptr) {
    *why = std::string("mlx5dv_devx_alloc_uar failed: ") + std::strerror(errno != 0 ? errno : ENOMEM);
  }
  return u;
}

status cq_resources(device_obj* d, uint32_t* uar_page, uint32_t* eqn, std::string* why) {
  std::lock_guard lk(d->mu);
  if (d->cq_uar == nullptr) {
    d->cq_uar = alloc_uar(d, why);
    if (d->cq_uar == nullptr) return status::io_error;
  }
  if (!d->have_eqn) {
    uint32_t e = 0;
    if (int rc = d->dv->devx_query_eqn(d->ctx, 0, &e); rc != 0) {
      *why = std::string("mlx5dv_devx_query_eqn(0) failed: ") + std::strerror(rc < 0 ? -rc : rc);
      return status::io_error;
    }
    d->eqn = e;
    d->have_eqn = true;
  }
  *uar_page = d->cq_uar->page_id;
  *eqn = d->eqn;
  return status::ok;
}

}  // namespace gdaki::mlx5
