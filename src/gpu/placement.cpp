#include "placement.hpp"

namespace gdaki::gpu {

namespace {

// Why GPU memory cannot be registered with the NIC, listing every missing piece so the
// user fixes them all at once instead of one per run.
std::string why_no_gpu_registration(const capabilities& c) {
  std::string dmabuf;
  if (!c.gpu_dma_buf) dmabuf += "the GPU does not support dma-buf export; ";
  if (!c.cuda_dma_buf_export) dmabuf += "the CUDA driver lacks cuMemGetHandleForAddressRange; ";
  if (!c.ibv_dmabuf_mr) dmabuf += "rdma-core lacks ibv_reg_dmabuf_mr (needs 34+); ";
  std::string peer;
  if (!c.peermem) peer += "nvidia-peermem is not loaded (modprobe nvidia-peermem); ";
  if (!c.gpu_direct_rdma) peer += "the GPU does not report GPUDirect RDMA support; ";
  std::string s = "no path registers GPU memory with the NIC: dma-buf: " + dmabuf + "peer memory: " + peer;
  s.resize(s.size() - 2);  // drop the trailing "; "
  return s;
}

}  // namespace

placement_decision decide(const capabilities& c) {
  placement_decision d;

  // --- which NIC and which initiator ----------------------------------------------------
  if (c.rdma_core && c.mlx5_devices > 0) {
    d.nic = {nic_kind::mlx5, std::to_string(c.mlx5_devices) + " mlx5 device(s) found"};
  } else {
    d.nic = {nic_kind::soft,
             !c.rdma_core ? "rdma-core (libibverbs/libmlx5) is not loadable, so the soft NIC serves"
                          : "no mlx5 device is present, so the soft NIC serves"};
  }
  const bool mlx5 = d.nic.value == nic_kind::mlx5;
  if (c.cuda_driver && c.gpu_count > 0) {
    d.initiator = {initiator_kind::gpu, std::to_string(c.gpu_count) + " GPU(s) with a working CUDA driver"};
  } else {
    d.initiator = {initiator_kind::cpu, !c.cuda_driver ? "no working CUDA driver: CPU threads initiate"
                                                       : "the CUDA driver sees no GPU: CPU threads initiate"};
  }

  // --- CPU initiators: everything in ordinary host memory ------------------------------
  if (d.initiator.value == initiator_kind::cpu) {
    const char* why = "CPU initiators and the NIC both reach ordinary host memory";
    d.gpu_memory = {gpu_registration::none, "no GPU initiator"};
    d.rings = {location::host, why};
    d.doorbell_records = {location::host, why};
    d.cqs = {location::host, why};
    d.data = {location::host, why};
    if (mlx5) {
      d.doorbell = {doorbell_path::cpu_store,
                    "the CPU stores the doorbell to the UAR page rdma-core maps for it"};
    } else {
      d.doorbell = {doorbell_path::host_hook,
                    "the soft NIC runs the posted WQEs on the thread that rings the doorbell "
                    "(no thread hop)"};
    }
    d.gdrcopy = {false, "no GPU memory to reach"};
    return d;
  }

  // --- GPU initiators on the soft NIC: the engine is a CPU thread ----------------------
  if (!mlx5) {
    const char* why = "the soft NIC's engine is a CPU thread: it reads WQEs and doorbell "
                      "records and writes CQEs, which is cheap in host-pinned memory and slow "
                      "across the GPU's BAR";
    d.gpu_memory = {gpu_registration::none,
                    "the soft NIC reaches memory through the CPU's address space; GPU memory "
                    "is not registered"};
    d.rings = {location::host_pinned, why};
    d.doorbell_records = {location::host_pinned, why};
    d.cqs = {location::host_pinned, why};
    d.data = {location::host_pinned,
              "the soft NIC's engine copies payloads with the CPU, which reads host-pinned "
              "memory at memory speed"};
    d.doorbell = {doorbell_path::engine_poll,
                  "GPU threads update the doorbell record in host-pinned memory and the soft "
                  "NIC's engine polls it"};
    d.gdrcopy = {false, "every object the CPU touches is in host-pinned memory"};
    return d;
  }

  // --- GPU initiators on mlx5 -----------------------------------------------------------
  // GPU memory registration: dma-buf is the upstream kernel path and needs no out-of-tree
  // module, so it wins when everything for it is present.
  if (c.gpu_dma_buf && c.cuda_dma_buf_export && c.ibv_dmabuf_mr) {
    d.gpu_memory = {gpu_registration::dma_buf,
                    "dma-buf: the GPU exports it, the CUDA driver has "
                    "cuMemGetHandleForAddressRange and rdma-core has ibv_reg_dmabuf_mr"};
  } else if (c.peermem && c.gpu_direct_rdma) {
    d.gpu_memory = {gpu_registration::peermem,
                    "nvidia-peermem is loaded: ibv_reg_mr accepts GPU virtual addresses "
                    "(dma-buf is not fully available)"};
  } else {
    d.gpu_memory = {gpu_registration::none, why_no_gpu_registration(c)};
  }

  // Rings and CQs live in GPU memory only if the NIC can reach them there: DEVX umems
  // over GPU memory need peer memory, or dma-buf plus mlx5dv_devx_umem_reg_ex.
  const bool rings_in_gpu = d.gpu_memory.value == gpu_registration::peermem ||
                            (d.gpu_memory.value == gpu_registration::dma_buf && c.devx_umem_dmabuf);
  if (rings_in_gpu) {
    d.rings = {location::gpu,
               "GPU threads write WQEs into local memory; the NIC fetches them peer-to-peer"};
    d.cqs = {location::gpu,
             "GPU threads poll CQEs in local memory; polling host memory costs a PCIe round "
             "trip per poll"};
  } else {
    const std::string why =
        d.gpu_memory.value == gpu_registration::dma_buf
            ? "rdma-core lacks mlx5dv_devx_umem_reg_ex (needs 40+), so ring memory cannot be a "
              "dma-buf: host-pinned memory mapped into the GPU"
            : "the NIC cannot reach GPU memory: host-pinned memory mapped into the GPU";
    d.rings = {location::host_pinned, why};
    d.cqs = {location::host_pinned, why};
  }

  // Doorbell: a direct GPU store needs the UAR page registered as I/O memory with CUDA,
  // which only a real UAR page confirms. Until then the CPU rings, as the export's
  // automatic backend choice does (gdaki::choose_backend): the two must agree.
  if (c.gpu_host_register && c.uar_gpu_mappable == tristate::yes) {
    d.doorbell = {doorbell_path::gpu_store,
                  "the UAR page is registered with cuMemHostRegister(IOMEMORY) and GPU threads store the 8-byte "
                  "doorbell directly"};
  } else if (c.gpu_host_register && c.uar_gpu_mappable == tristate::unknown) {
    d.doorbell = {doorbell_path::cpu_assisted,
                  "whether GPU stores reach the UAR page is not known until a QP's UAR page is registered with "
                  "cuMemHostRegister(IOMEMORY): a CPU thread rings the UAR (request the direct backend to try GPU "
                  "stores; the export fails naming the cause if they cannot)"};
  } else {
    d.doorbell = {doorbell_path::cpu_assisted,
                  !c.gpu_host_register
                      ? "the GPU cannot register host or I/O memory (no HOST_REGISTER support): "
                        "a CPU thread rings the UAR"
                      : "cuMemHostRegister(IOMEMORY) of the UAR page failed: a CPU thread rings "
                        "the UAR"};
  }

  // Doorbell records: written by the poster (GPU threads, or the proxy thread), read by the
  // NIC and, with cpu_assisted doorbells, by a CPU thread. The backend is chosen per export,
  // after the QP exists, so the record goes where every one of them reaches it: host-pinned
  // memory (the mlx5 provider places it there next to GPU-memory rings). In GPU memory the
  // CPU doorbell service would dereference a device pointer.
  d.doorbell_records = {location::host_pinned,
                        d.doorbell.value == doorbell_path::cpu_assisted
                            ? "the CPU thread that rings the UAR polls the doorbell records; host-pinned memory is "
                              "the cheapest place for a CPU to poll and GPU threads reach it mapped"
                            : "GPU threads and the NIC reach it, and so does the CPU doorbell service should an "
                              "export choose cpu-assisted or proxy"};

  if (d.gpu_memory.value != gpu_registration::none) {
    d.data = {location::gpu, "GPU memory is registrable, so payloads move GPU to NIC directly"};
  } else {
    d.data = {location::host_pinned,
              "GPU memory is not registrable: payloads are staged in host-pinned memory"};
  }

  const bool any_gpu_resident = d.rings.value == location::gpu || d.cqs.value == location::gpu ||
                                d.doorbell_records.value == location::gpu;
  if (!any_gpu_resident) {
    d.gdrcopy = {false, "every ring the CPU may read is in host memory"};
  } else if (c.gdrcopy) {
    d.gdrcopy = {true,
                 "maps GPU-resident rings and CQs for the CPU (error dumps, gdaki dump) while "
                 "kernels run"};
  } else {
    d.gdrcopy = {false,
                 "GDRCopy is absent: CPU-side dumps of GPU-resident rings copy through CUDA "
                 "instead"};
  }
  return d;
}

const char* to_string(nic_kind k) { return k == nic_kind::mlx5 ? "mlx5" : "soft"; }
const char* to_string(initiator_kind k) { return k == initiator_kind::gpu ? "gpu" : "cpu"; }

const char* to_string(location l) {
  switch (l) {
    case location::host: return "host";
    case location::host_pinned: return "host_pinned";
    case location::gpu: return "gpu";
  }
  return "?";
}

const char* to_string(gpu_registration r) {
  switch (r) {
    case gpu_registration::none: return "none";
    case gpu_registration::dma_buf: return "dma_buf";
    case gpu_registration::peermem: return "peermem";
  }
  return "?";
}

const char* to_string(doorbell_path p) {
  switch (p) {
    case doorbell_path::cpu_store: return "cpu_store";
    case doorbell_path::gpu_store: return "gpu_store";
    case doorbell_path::cpu_assisted: return "cpu_assisted";
    case doorbell_path::host_hook: return "host_hook";
    case doorbell_path::engine_poll: return "engine_poll";
  }
  return "?";
}

std::string describe(const placement_decision& d) {
  std::string s;
  auto line = [&s](const char* what, const char* value, const std::string& why) {
    s += what;
    s += ": ";
    s += value;
    s += " (" + why + ")\n";
  };
  line("nic", to_string(d.nic.value), d.nic.reason);
  line("initiator", to_string(d.initiator.value), d.initiator.reason);
  line("gpu memory registration", to_string(d.gpu_memory.value), d.gpu_memory.reason);
  line("send/receive rings", to_string(d.rings.value), d.rings.reason);
  line("doorbell records", to_string(d.doorbell_records.value), d.doorbell_records.reason);
  line("completion queues", to_string(d.cqs.value), d.cqs.reason);
  line("data buffers", to_string(d.data.value), d.data.reason);
  line("doorbell", to_string(d.doorbell.value), d.doorbell.reason);
  line("gdrcopy", d.gdrcopy.value ? "used" : "unused", d.gdrcopy.reason);
  return s;
}

}  // namespace gdaki::gpu
