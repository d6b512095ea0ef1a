// internal: where gdaki puts rings, doorbell records, CQs and data buffers, and how the
// doorbell reaches the NIC, decided from what this machine can do. decide() is a pure
// function of a capabilities struct (so every combination is unit-tested without
// hardware); probe() fills that struct on the running machine. Every choice carries a
// sentence saying why, which `gdaki doctor` prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gdaki::gpu {

enum class tristate : uint8_t { no, yes, unknown };

// What one GPU supports (CUDA device attributes).
struct gpu_caps {
  int ordinal = 0;
  std::string name;
  std::string pci_bus_id;  // "dddd:bb:dd.0"
  int cc_major = 0, cc_minor = 0;
  bool dma_buf = false;          // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  bool gpu_direct_rdma = false;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  bool host_register = false;    // CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED
};

struct capabilities {
  // CUDA driver (libcuda.so.1).
  bool cuda_driver = false;  // loaded, and cuInit succeeded
  int cuda_driver_version = 0;  // e.g. 13000
  int gpu_count = 0;
  std::vector<gpu_caps> gpus;
  // The GPU placement is decided for (gpus[0] by default; copied here so decide() reads
  // flat fields and tests can set them directly).
  bool gpu_dma_buf = false;
  bool gpu_direct_rdma = false;
  bool gpu_host_register = false;
  bool cuda_dma_buf_export = false;  // cuMemGetHandleForAddressRange exists
  // Kernel modules.
  bool peermem = false;  // nvidia-peermem (or the older nv_peer_mem) is loaded
  // GDRCopy: libgdrapi.so.2 loaded and /dev/gdrdrv opened.
  bool gdrcopy = false;
  // rdma-core and the NIC.
  bool rdma_core = false;  // libibverbs.so.1 and libmlx5.so.1 loaded
  int mlx5_devices = 0;
  bool ibv_dmabuf_mr = false;     // ibv_reg_dmabuf_mr exists (rdma-core 34+)
  bool devx_umem_dmabuf = false;  // mlx5dv_devx_umem_reg_ex exists (rdma-core 40+)
  // Whether cuMemHostRegister(IOMEMORY) of a UAR page works. Only a real UAR page can tell
  // (PCIe topology, IOMMU, virtualization), so probe() leaves it unknown.
  tristate uar_gpu_mappable = tristate::unknown;

  std::vector<std::string> notes;  // why absent things are absent, one line each
};

enum class nic_kind : uint8_t { mlx5, soft };
enum class initiator_kind : uint8_t { cpu, gpu };
enum class location : uint8_t {
  host,         // ordinary host memory
  host_pinned,  // page-locked host memory mapped into the GPU's address space
  gpu,          // GPU memory
};
enum class gpu_registration : uint8_t {
  none,     // GPU memory cannot be registered with the NIC
  dma_buf,  // cuMemGetHandleForAddressRange -> ibv_reg_dmabuf_mr / DEVX umem over dma-buf
  peermem,  // ibv_reg_mr / DEVX umem on the GPU virtual address, through nvidia-peermem
};
enum class doorbell_path : uint8_t {
  cpu_store,     // a CPU thread stores to the UAR page (CPU initiators on mlx5)
  gpu_store,     // GPU threads store to the UAR page, registered with cuMemHostRegister(IOMEMORY)
  cpu_assisted,  // GPU threads update the doorbell record; a CPU thread rings the UAR
  host_hook,     // soft NIC, CPU initiator: the ringing thread runs the NIC model
  engine_poll,   // soft NIC, GPU initiator: the engine thread polls the doorbell record
};

template <class T>
struct reasoned {
  T value{};
  std::string reason;
};

struct placement_decision {
  reasoned<nic_kind> nic;
  reasoned<initiator_kind> initiator;
  reasoned<gpu_registration> gpu_memory;  // how GPU memory is registered with the NIC
  reasoned<location> rings;               // SQ and RQ rings
  reasoned<location> doorbell_records;    // QP and CQ doorbell records
  reasoned<location> cqs;                 // CQ rings
  reasoned<location> data;                // default for data buffers the caller registers
  reasoned<doorbell_path> doorbell;
  reasoned<bool> gdrcopy;                 // whether GDRCopy is used for CPU access to GPU memory
};

// The placement for `caps`. Pure: same input, same output; never fails (the least capable
// machine gets host memory and CPU initiators).
placement_decision decide(const capabilities& caps);

struct probe_options {
  std::string sysfs_root = "/";  // prefix for /sys paths (tests point it at a fake tree)
  int gpu_ordinal = 0;           // the GPU whose attributes drive the decision
  // The RDMA half (rdma-core, dma-buf entry points, NIC count), supplied by a provider
  // (mlx5::probe_rdma where the mlx5 provider is built), so this code includes no
  // provider header. Null: RDMA is not probed, and a note says so.
  void (*rdma)(capabilities&) = nullptr;
};

// Fills capabilities on this machine: loads libcuda and libgdrapi through the process-wide
// loaders, queries GPU attributes, looks for nvidia-peermem in sysfs, and runs opt.rdma.
// Never throws; what it cannot find is explained in notes.
capabilities probe(const probe_options& opt = {});

// Whether nvidia-peermem (or nv_peer_mem) is loaded, judged from sysfs under `sysfs_root`:
// /sys/module/nvidia_peermem, /sys/module/nv_peer_mem or
// /sys/kernel/mm/memory_peers/nv_mem/version.
bool peermem_loaded(const std::string& sysfs_root);

const char* to_string(nic_kind k);
const char* to_string(initiator_kind k);
const char* to_string(location l);
const char* to_string(gpu_registration r);
const char* to_string(doorbell_path d);

// Multi-line report, one "what: choice (reason)" line per decision, for `gdaki doctor`.
std::string describe(const placement_decision& d);

}  // namespace gdaki::gpu
