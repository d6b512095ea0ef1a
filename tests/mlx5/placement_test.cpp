// The placement policy over a matrix of machines, from "nothing" to "everything", and the
// probe on this machine.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpu/placement.hpp"

using namespace gdaki::gpu;

namespace {

capabilities cpu_only() { return capabilities{}; }

// A ConnectX with rdma-core but no GPU.
capabilities mlx5_no_gpu() {
  capabilities c;
  c.rdma_core = true;
  c.mlx5_devices = 1;
  c.ibv_dmabuf_mr = true;
  c.devx_umem_dmabuf = true;
  return c;
}

// A GPU but no RDMA NIC.
capabilities gpu_no_nic() {
  capabilities c;
  c.cuda_driver = true;
  c.gpu_count = 1;
  c.gpu_dma_buf = true;
  c.gpu_direct_rdma = true;
  c.gpu_host_register = true;
  c.cuda_dma_buf_export = true;
  return c;
}

// A current GPU + ConnectX machine: dma-buf everywhere, no peermem, no GDRCopy.
capabilities full_dma_buf() {
  capabilities c = gpu_no_nic();
  c.rdma_core = true;
  c.mlx5_devices = 2;
  c.ibv_dmabuf_mr = true;
  c.devx_umem_dmabuf = true;
  return c;
}

}  // namespace

TEST(placement, cpu_only_machine_uses_host_memory_and_the_soft_nic) {
  const placement_decision d = decide(cpu_only());
  EXPECT_EQ(d.nic.value, nic_kind::soft);
  EXPECT_EQ(d.initiator.value, initiator_kind::cpu);
  EXPECT_EQ(d.rings.value, location::host);
  EXPECT_EQ(d.doorbell_records.value, location::host);
  EXPECT_EQ(d.cqs.value, location::host);
  EXPECT_EQ(d.data.value, location::host);
  EXPECT_EQ(d.doorbell.value, doorbell_path::host_hook);
  EXPECT_FALSE(d.gdrcopy.value);
  EXPECT_NE(d.nic.reason.find("rdma-core"), std::string::npos) << d.nic.reason;
  EXPECT_NE(d.initiator.reason.find("CUDA driver"), std::string::npos) << d.initiator.reason;
}

TEST(placement, mlx5_without_gpu_has_the_cpu_ring_the_uar) {
  const placement_decision d = decide(mlx5_no_gpu());
  EXPECT_EQ(d.nic.value, nic_kind::mlx5);
  EXPECT_EQ(d.initiator.value, initiator_kind::cpu);
  EXPECT_EQ(d.rings.value, location::host);
  EXPECT_EQ(d.doorbell.value, doorbell_path::cpu_store);
  EXPECT_EQ(d.gpu_memory.value, gpu_registration::none);
}

TEST(placement, gpu_on_soft_nic_keeps_everything_the_engine_reads_host_pinned) {
  const placement_decision d = decide(gpu_no_nic());
  EXPECT_EQ(d.nic.value, nic_kind::soft);
  EXPECT_EQ(d.initiator.value, initiator_kind::gpu);
  EXPECT_EQ(d.rings.value, location::host_pinned);
  EXPECT_EQ(d.doorbell_records.value, location::host_pinned);
  EXPECT_EQ(d.cqs.value, location::host_pinned);
  EXPECT_EQ(d.data.value, location::host_pinned);
  EXPECT_EQ(d.doorbell.value, doorbell_path::engine_poll);
  EXPECT_NE(d.nic.reason.find("rdma-core"), std::string::npos) << d.nic.reason;
  capabilities with_rdma = gpu_no_nic();
  with_rdma.rdma_core = true;
  EXPECT_NE(decide(with_rdma).nic.reason.find("no mlx5 device"), std::string::npos);
}

TEST(placement, dma_buf_machine_puts_rings_cqs_and_data_in_gpu_memory) {
  const placement_decision d = decide(full_dma_buf());
  EXPECT_EQ(d.nic.value, nic_kind::mlx5);
  EXPECT_EQ(d.initiator.value, initiator_kind::gpu);
  EXPECT_EQ(d.gpu_memory.value, gpu_registration::dma_buf);
  EXPECT_EQ(d.rings.value, location::gpu);
  EXPECT_EQ(d.cqs.value, location::gpu);
  // The record is read by the CPU doorbell service, so never in GPU memory (it was, next
  // to GPU rings, while the export picked cpu-assisted: the service read a device pointer).
  EXPECT_EQ(d.doorbell_records.value, location::host_pinned);
  EXPECT_EQ(d.data.value, location::gpu);
  // Not yet confirmed on a UAR page: the CPU rings, as the export's automatic choice does.
  EXPECT_EQ(d.doorbell.value, doorbell_path::cpu_assisted);
  EXPECT_NE(d.doorbell.reason.find("not known"), std::string::npos) << d.doorbell.reason;
  EXPECT_FALSE(d.gdrcopy.value);
}

TEST(placement, dma_buf_is_preferred_over_peermem_when_both_work) {
  capabilities c = full_dma_buf();
  c.peermem = true;
  EXPECT_EQ(decide(c).gpu_memory.value, gpu_registration::dma_buf);
}

TEST(placement, peermem_registers_gpu_memory_when_dma_buf_is_incomplete) {
  for (int missing = 0; missing < 3; ++missing) {
    capabilities c = full_dma_buf();
    c.peermem = true;
    if (missing == 0) c.gpu_dma_buf = false;
    if (missing == 1) c.cuda_dma_buf_export = false;
    if (missing == 2) c.ibv_dmabuf_mr = false;
    const placement_decision d = decide(c);
    EXPECT_EQ(d.gpu_memory.value, gpu_registration::peermem) << "case " << missing;
    EXPECT_EQ(d.rings.value, location::gpu) << "case " << missing;
    EXPECT_EQ(d.data.value, location::gpu) << "case " << missing;
  }
}

TEST(placement, peermem_needs_gpudirect_rdma_support_on_the_gpu) {
  capabilities c = full_dma_buf();
  c.gpu_dma_buf = false;
  c.peermem = true;
  c.gpu_direct_rdma = false;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.gpu_memory.value, gpu_registration::none);
  EXPECT_NE(d.gpu_memory.reason.find("GPUDirect RDMA"), std::string::npos) << d.gpu_memory.reason;
}

TEST(placement, no_gpu_registration_stages_data_in_host_pinned_memory_and_says_why) {
  capabilities c = full_dma_buf();
  c.gpu_dma_buf = false;
  c.ibv_dmabuf_mr = false;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.gpu_memory.value, gpu_registration::none);
  EXPECT_EQ(d.rings.value, location::host_pinned);
  EXPECT_EQ(d.cqs.value, location::host_pinned);
  EXPECT_EQ(d.data.value, location::host_pinned);
  // Every missing piece is named, so one read of the reason fixes the machine.
  const std::string& r = d.gpu_memory.reason;
  EXPECT_NE(r.find("does not support dma-buf"), std::string::npos) << r;
  EXPECT_NE(r.find("ibv_reg_dmabuf_mr"), std::string::npos) << r;
  EXPECT_NE(r.find("nvidia-peermem"), std::string::npos) << r;
  EXPECT_EQ(r.find("cuMemGetHandleForAddressRange"), std::string::npos) << r;
}

TEST(placement, dma_buf_without_devx_umem_dmabuf_keeps_rings_host_pinned_but_data_on_gpu) {
  capabilities c = full_dma_buf();
  c.devx_umem_dmabuf = false;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.gpu_memory.value, gpu_registration::dma_buf);
  EXPECT_EQ(d.rings.value, location::host_pinned);
  EXPECT_EQ(d.cqs.value, location::host_pinned);
  EXPECT_EQ(d.data.value, location::gpu);
  EXPECT_NE(d.rings.reason.find("mlx5dv_devx_umem_reg_ex"), std::string::npos) << d.rings.reason;
}

TEST(placement, uar_not_mappable_falls_back_to_cpu_assisted_with_host_pinned_doorbell_records) {
  capabilities c = full_dma_buf();
  c.uar_gpu_mappable = tristate::no;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.doorbell.value, doorbell_path::cpu_assisted);
  EXPECT_EQ(d.doorbell_records.value, location::host_pinned);
  EXPECT_EQ(d.rings.value, location::gpu);
  EXPECT_NE(d.doorbell.reason.find("IOMEMORY"), std::string::npos) << d.doorbell.reason;
}

TEST(placement, gpu_without_host_register_support_is_cpu_assisted) {
  capabilities c = full_dma_buf();
  c.gpu_host_register = false;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.doorbell.value, doorbell_path::cpu_assisted);
  EXPECT_NE(d.doorbell.reason.find("HOST_REGISTER"), std::string::npos) << d.doorbell.reason;
}

TEST(placement, confirmed_uar_mapping_drops_the_fallback_caveat) {
  capabilities c = full_dma_buf();
  c.uar_gpu_mappable = tristate::yes;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.doorbell.value, doorbell_path::gpu_store);
  EXPECT_EQ(d.doorbell.reason.find("fall back"), std::string::npos) << d.doorbell.reason;
}

TEST(placement, gdrcopy_is_used_only_when_something_the_cpu_reads_is_in_gpu_memory) {
  capabilities c = full_dma_buf();
  c.gdrcopy = true;
  EXPECT_TRUE(decide(c).gdrcopy.value);
  c.gpu_dma_buf = false;  // nothing GPU-resident any more
  EXPECT_FALSE(decide(c).gdrcopy.value);
  EXPECT_FALSE(decide(gpu_no_nic()).gdrcopy.value);
}

TEST(placement, cuda_driver_without_gpus_means_cpu_initiators) {
  capabilities c = full_dma_buf();
  c.gpu_count = 0;
  const placement_decision d = decide(c);
  EXPECT_EQ(d.initiator.value, initiator_kind::cpu);
  EXPECT_NE(d.initiator.reason.find("no GPU"), std::string::npos) << d.initiator.reason;
}

TEST(placement, every_choice_of_every_machine_has_a_reason) {
  // All 2^10 combinations of the boolean capabilities, each with all three UAR states.
  for (unsigned bits = 0; bits < 1024; ++bits) {
    for (tristate uar : {tristate::no, tristate::yes, tristate::unknown}) {
      capabilities c;
      c.cuda_driver = bits & 1;
      c.gpu_count = (bits & 2) ? 1 : 0;
      c.gpu_dma_buf = bits & 4;
      c.gpu_direct_rdma = bits & 8;
      c.gpu_host_register = bits & 16;
      c.cuda_dma_buf_export = bits & 32;
      c.peermem = bits & 64;
      c.gdrcopy = bits & 128;
      c.rdma_core = bits & 256;
      c.mlx5_devices = (bits & 512) ? 1 : 0;
      c.ibv_dmabuf_mr = c.devx_umem_dmabuf = bits & 4;
      c.uar_gpu_mappable = uar;
      const placement_decision d = decide(c);
      for (const std::string* r : {&d.nic.reason, &d.initiator.reason, &d.gpu_memory.reason,
                                   &d.rings.reason, &d.doorbell_records.reason, &d.cqs.reason,
                                   &d.data.reason, &d.doorbell.reason, &d.gdrcopy.reason}) {
        EXPECT_FALSE(r->empty()) << "bits " << bits;
      }
      // Invariants: GPU memory is only used when it is registrable, and CPU initiators
      // never see host-pinned or GPU placement.
      if (d.gpu_memory.value == gpu_registration::none) {
        EXPECT_NE(d.rings.value, location::gpu) << "bits " << bits;
        EXPECT_NE(d.data.value, location::gpu) << "bits " << bits;
      }
      if (d.initiator.value == initiator_kind::cpu) {
        EXPECT_EQ(d.rings.value, location::host) << "bits " << bits;
      }
      if (d.doorbell.value == doorbell_path::cpu_assisted) {
        EXPECT_EQ(d.doorbell_records.value, location::host_pinned) << "bits " << bits;
      }
      // The CPU may have to read the doorbell records whatever the backend (doorbell
      // service, proxy), and GPU stores ring the NIC only where that is confirmed.
      EXPECT_NE(d.doorbell_records.value, location::gpu) << "bits " << bits;
      if (d.doorbell.value == doorbell_path::gpu_store) {
        EXPECT_EQ(c.uar_gpu_mappable, tristate::yes) << "bits " << bits;
      }
    }
  }
}

TEST(placement, describe_prints_one_line_per_decision) {
  capabilities c = full_dma_buf();
  c.uar_gpu_mappable = tristate::yes;
  const std::string s = describe(decide(c));
  EXPECT_NE(s.find("nic: mlx5"), std::string::npos) << s;
  EXPECT_NE(s.find("doorbell: gpu_store"), std::string::npos) << s;
  EXPECT_NE(s.find("completion queues: gpu"), std::string::npos) << s;
  size_t lines = 0;
  for (char ch : s) lines += ch == '\n' ? 1 : 0;
  EXPECT_EQ(lines, 9u) << s;
}

TEST(placement_probe, peermem_is_detected_from_any_of_its_sysfs_markers) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("gdaki-sysfs-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  EXPECT_FALSE(peermem_loaded(root.string()));
  fs::create_directories(root / "sys/kernel/mm/memory_peers/nv_mem");
  std::ofstream(root / "sys/kernel/mm/memory_peers/nv_mem/version") << "1.3\n";
  EXPECT_TRUE(peermem_loaded(root.string()));
  fs::remove_all(root / "sys/kernel");
  EXPECT_FALSE(peermem_loaded(root.string()));
  fs::create_directories(root / "sys/module/nvidia_peermem");
  EXPECT_TRUE(peermem_loaded(root.string() + "/"));
  fs::remove_all(root);
}

// The RDMA half comes from the caller (a provider's probe), so src/gpu includes no
// provider header: probe() runs the one it is given, and says so when it has none.
TEST(placement_probe, the_rdma_half_is_the_given_provider_probe_or_a_note) {
  const capabilities without = probe();
  bool noted = false;
  for (const auto& n : without.notes) noted = noted || n.find("RDMA devices were not probed") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_FALSE(without.rdma_core);
  probe_options o;
  o.rdma = [](capabilities& c) {
    c.rdma_core = true;
    c.mlx5_devices = 3;
  };
  const capabilities with = probe(o);
  EXPECT_TRUE(with.rdma_core);
  EXPECT_EQ(with.mlx5_devices, 3);
  for (const auto& n : with.notes) EXPECT_EQ(n.find("RDMA devices were not probed"), std::string::npos) << n;
}

TEST(placement_probe, probe_on_this_machine_is_consistent_and_explains_what_is_missing) {
  const capabilities c = probe();
  const placement_decision d = decide(c);
  std::printf("%s", describe(d).c_str());
  for (const auto& n : c.notes) std::printf("note: %s\n", n.c_str());
  EXPECT_EQ(c.gpu_count, static_cast<int>(c.gpus.size()));
  if (!c.cuda_driver) {
    EXPECT_EQ(c.gpu_count, 0);
    EXPECT_EQ(d.initiator.value, initiator_kind::cpu);
    EXPECT_FALSE(c.notes.empty());
  }
  if (c.mlx5_devices == 0) {
    EXPECT_EQ(d.nic.value, nic_kind::soft);
  }
  EXPECT_EQ(c.uar_gpu_mappable, tristate::unknown);
}
