// probe(): fills placement capabilities on the running machine.
#include <sys/stat.h>

#include <cstdio>

#include "cuda_driver.hpp"
#include "gdrcopy.hpp"
#include "placement.hpp"


namespace gdaki::gpu {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string join(const std::string& root, const char* abs) {
  if (root.empty() || root == "/") return abs;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + abs;
}

void probe_cuda(capabilities& c, int ordinal) {
  std::string why;
  const cuda_driver_api* cu = cuda_driver(&why);
  if (cu == nullptr) {
    c.notes.push_back(why);
    return;
  }
  for (const auto& m : cu->missing) c.notes.push_back(m);
  c.cuda_dma_buf_export = cu->mem_get_handle_for_address_range != nullptr;
  if (cu::result r = cu->init(0); r != cu::success) {
    if (r == cu::error_stub_library) {
      c.notes.push_back("libcuda.so.1 at " + cu->path +
                        " is the CUDA toolkit's link stub, not a driver: GPU initiators are "
                        "unavailable; install the NVIDIA driver");
    } else {
      c.notes.push_back("cuInit failed: " + describe(cu, r) + ": GPU initiators are unavailable");
    }
    return;
  }
  c.cuda_driver = true;
  cu->driver_get_version(&c.cuda_driver_version);
  int n = 0;
  if (cu::result r = cu->device_get_count(&n); r != cu::success || n <= 0) {
    c.notes.push_back(r != cu::success ? "cuDeviceGetCount failed: " + describe(cu, r)
                                       : "the CUDA driver sees no GPU");
    return;
  }
  c.gpu_count = n;
  auto attr = [cu](cu::device dev, int a) {
    int v = 0;
    // An attribute the driver does not know reads as "unsupported".
    return cu->device_get_attribute(&v, a, dev) == cu::success ? v : 0;
  };
  for (int i = 0; i < n; ++i) {
    cu::device dev = 0;
    if (cu->device_get(&dev, i) != cu::success) continue;
    gpu_caps g;
    g.ordinal = i;
    char name[256] = {};
    if (cu->device_get_name(name, sizeof name, dev) == cu::success) g.name = name;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", attr(dev, cu::attr_pci_domain_id),
                  attr(dev, cu::attr_pci_bus_id), attr(dev, cu::attr_pci_device_id));
    g.pci_bus_id = bus;
    g.cc_major = attr(dev, cu::attr_compute_capability_major);
    g.cc_minor = attr(dev, cu::attr_compute_capability_minor);
    g.dma_buf = attr(dev, cu::attr_dma_buf_supported) != 0;
    g.gpu_direct_rdma = attr(dev, cu::attr_gpu_direct_rdma_supported) != 0;
    g.host_register = attr(dev, cu::attr_host_register_supported) != 0;
    c.gpus.push_back(std::move(g));
  }
  const int pick = ordinal >= 0 && ordinal < static_cast<int>(c.gpus.size()) ? ordinal : 0;
  if (!c.gpus.empty()) {
    c.gpu_dma_buf = c.gpus[pick].dma_buf;
    c.gpu_direct_rdma = c.gpus[pick].gpu_direct_rdma;
    c.gpu_host_register = c.gpus[pick].host_register;
  }
}

void probe_gdrcopy(capabilities& c) {
  std::string why;
  const gdrcopy_api* g = gdrcopy(&why);
  if (g == nullptr) {
    c.notes.push_back(why);
    return;
  }
  // The library alone is not enough: gdr_open() opens /dev/gdrdrv, the kernel module.
  gdr::handle h = g->open();
  if (h == nullptr) {
    c.notes.push_back("libgdrapi.so.2 is present but gdr_open() failed: the gdrdrv kernel "
                      "module is not loaded (/dev/gdrdrv); GDRCopy mappings are unavailable");
    return;
  }
  g->close(h);
  c.gdrcopy = true;
}

}  // namespace

bool peermem_loaded(const std::string& root) {
  return exists(join(root, "/sys/module/nvidia_peermem")) ||
         exists(join(root, "/sys/module/nv_peer_mem")) ||
         exists(join(root, "/sys/kernel/mm/memory_peers/nv_mem/version"));
}

capabilities probe(const probe_options& opt) {
  capabilities c;
  probe_cuda(c, opt.gpu_ordinal);
  c.peermem = peermem_loaded(opt.sysfs_root);
  if (!c.peermem) {
    c.notes.push_back("nvidia-peermem is not loaded: GPU memory registration needs dma-buf");
  }
  probe_gdrcopy(c);
  if (opt.rdma != nullptr) {
    opt.rdma(c);
  } else {
    c.notes.push_back("RDMA devices were not probed: no provider probe was given (the mlx5 provider's, "
                      "mlx5::probe_rdma, where it is built)");
  }
  c.notes.push_back("cuMemHostRegister(IOMEMORY) of a UAR page is only tested when a QP is "
                    "created on a real device");
  return c;
}

}  // namespace gdaki::gpu
