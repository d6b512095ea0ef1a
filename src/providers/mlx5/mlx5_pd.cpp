// Protection domains and memory registration of the mlx5 provider, through the loaded
// libibverbs: ibv_alloc_pd (+ mlx5dv_init_obj for the PD number DEVX QPs need), ibv_reg_mr
// for host memory, ibv_reg_dmabuf_mr for GPU memory when the dma-buf path exists.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpu/cuda_driver.hpp"
#include "mlx5_objects.hpp"
#include "mlx5_ops.hpp"
#include "mlx5_translate.hpp"

namespace gdaki::mlx5 {

status alloc_pd(provider_object* dev, provider_object** out, uint32_t* pdn, std::string* why) {
  auto* d = static_cast<device_obj*>(dev);
  errno = 0;
  ibv_pd* pd = d->ibv->alloc_pd(d->ctx);
  if (pd == nullptr) {
    *why = std::string("ibv_alloc_pd failed: ") + std::strerror(errno != 0 ? errno : ENOMEM);
    return status::io_error;
  }
  mlx5dv_pd dvpd{};
  mlx5dv_obj obj{};
  obj.pd.in = pd;
  obj.pd.out = &dvpd;
  if (int rc = d->dv->init_obj(&obj, MLX5DV_OBJ_PD); rc != 0) {
    d->ibv->dealloc_pd(pd);
    *why = std::string("mlx5dv_init_obj(PD) failed: ") + std::strerror(rc < 0 ? -rc : rc);
    return status::io_error;
  }
  auto* p = new pd_obj;
  p->ops = &ops;
  p->dev = d;
  p->pd = pd;
  p->pdn = dvpd.pdn;
  *pdn = dvpd.pdn;
  *out = p;
  return status::ok;
}

status dealloc_pd(provider_object* pdo) {
  auto* p = static_cast<pd_obj*>(pdo);
  const int rc = p->dev->ibv->dealloc_pd(p->pd);
  delete p;
  return rc == 0 ? status::ok : status::io_error;
}

namespace {

// Whether addr is GPU memory, asked of the CUDA driver only when it is loaded and
// initialised (a machine without libcuda has only host memory).
bool is_gpu_memory(const gpu::cuda_driver_api* cu, const void* addr) {
  if (cu == nullptr) return false;
  unsigned type = 0;
  const gpu::cu::result r = cu->pointer_get_attribute(&type, gpu::cu::pointer_attribute_memory_type,
                                                      reinterpret_cast<uintptr_t>(addr));
  return r == gpu::cu::success && type == gpu::cu::memorytype_device;
}

status reg_gpu_mr(pd_obj* p, const gpu::cuda_driver_api* cu, void* addr, size_t length, uint32_t access, ibv_mr** mr,
                  std::string* why) {
  std::string dmabuf_cause;
  if (p->dev->ibv->reg_dmabuf_mr == nullptr) {
    dmabuf_cause = "libibverbs lacks ibv_reg_dmabuf_mr (rdma-core 34 or later)";
  } else if (cu->mem_get_handle_for_address_range == nullptr) {
    dmabuf_cause = "the CUDA driver lacks cuMemGetHandleForAddressRange (CUDA 11.7 or later)";
  } else {
    // The dma-buf covers whole host pages; the MR starts `offset` bytes into it.
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    const uintptr_t base = a & ~(page - 1);
    const size_t span = (a + length - base + page - 1) & ~(page - 1);
    int fd = -1;
    const gpu::cu::result r =
        cu->mem_get_handle_for_address_range(&fd, base, span, gpu::cu::mem_range_handle_type_dma_buf_fd, 0);
    if (r == gpu::cu::success && fd >= 0) {
      errno = 0;
      *mr = p->dev->ibv->reg_dmabuf_mr(p->pd, a - base, length, a, fd, static_cast<int>(access));
      const int err = errno;
      ::close(fd);
      if (*mr != nullptr) return status::ok;
      dmabuf_cause = std::string("ibv_reg_dmabuf_mr failed: ") + std::strerror(err != 0 ? err : EINVAL);
    } else {
      dmabuf_cause = "cuMemGetHandleForAddressRange failed: " + gpu::describe(cu, r);
    }
  }
  // Without dma-buf, ibv_reg_mr on the GPU address works only through nvidia-peermem.
  errno = 0;
  *mr = p->dev->ibv->reg_mr(p->pd, addr, length, static_cast<int>(access));
  if (*mr != nullptr) return status::ok;
  *why = "GPU memory cannot be registered: dma-buf path unavailable (" + dmabuf_cause +
         ") and ibv_reg_mr on the GPU address failed (" + std::strerror(errno != 0 ? errno : EINVAL) +
         "; it needs the nvidia-peermem module)";
  return status::not_supported;
}

}  // namespace

status reg_mr(provider_object* pdo, void* addr, size_t length, uint32_t access, provider_object** out,
              verbs::mr_keys* keys, std::string* why) {
  auto* p = static_cast<pd_obj*>(pdo);
  const auto ibv_access = to_ibv_access(access);
  if (!ibv_access) {
    *why = ibv_access.reason;
    return ibv_access.code;
  }
  ibv_mr* mr = nullptr;
  const gpu::cuda_driver_api* cu = gpu::cuda_driver(nullptr);
  if (is_gpu_memory(cu, addr)) {
    if (status s = reg_gpu_mr(p, cu, addr, length, ibv_access.value, &mr, why); s != status::ok) return s;
  } else {
    errno = 0;
    mr = p->dev->ibv->reg_mr(p->pd, addr, length, static_cast<int>(ibv_access.value));
    if (mr == nullptr) {
      const int err = errno != 0 ? errno : EINVAL;
      *why = std::string("ibv_reg_mr failed: ") + std::strerror(err);
      return err == ENOMEM ? status::no_memory : err == EACCES || err == EPERM ? status::access : status::io_error;
    }
  }
  auto* m = new mr_obj;
  m->ops = &ops;
  m->dev = p->dev;
  m->mr = mr;
  keys->lkey = mr->lkey;
  keys->rkey = mr->rkey;
  *out = m;
  return status::ok;
}

status dereg_mr(provider_object* mro) {
  auto* m = static_cast<mr_obj*>(mro);
  const int rc = m->dev->ibv->dereg_mr(m->mr);
  delete m;
  return rc == 0 ? status::ok : status::io_error;
}

}  // namespace gdaki::mlx5
