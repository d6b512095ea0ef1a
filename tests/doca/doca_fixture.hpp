// Host side of the DOCA-API semantics tests, set up only through DOCA's host API (and
// gdaki's libibverbs stand-ins, gdaki_doca_ext.h): a GPU handle, one soft device and PD,
// pairs of high-level QPs (initiator A_i, peer B_i) connected in this process, and
// registered buffers from doca_gpu_mem_alloc. Kernels run on CPU threads through gdaki's
// host grid launcher.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "doca_connect.h"
#include "doca_gpunetio_device.h"
#include "doca_gpunetio_high_level.h"
#include "doca_gpunetio_host.h"
#include "doca_verbs.h"
#include "gdaki/device/host_grid.hpp"
#include "gdaki_doca_ext.h"

namespace doca_test {

#define DOCA_OK(expr) ASSERT_EQ((expr), DOCA_SUCCESS) << #expr

inline uint32_t be32(uint32_t v) { return __builtin_bswap32(v); }

// A doca_gpu_mem_alloc block registered for every access.
struct buffer {
  doca_gpu_t* gpu = nullptr;
  void* ptr = nullptr;
  size_t bytes = 0;
  gdaki_doca_mr* mr = nullptr;
  uint32_t lkey = 0, rkey = 0;
  void init(doca_gpu_t* g, ibv_pd* pd, size_t n) {
    gpu = g;
    bytes = n;
    void* cpu = nullptr;
    ASSERT_EQ(doca_gpu_mem_alloc(g, n, 0, DOCA_GPU_MEM_TYPE_GPU_CPU, &ptr, &cpu), DOCA_SUCCESS);
    ASSERT_EQ(cpu, ptr);
    ASSERT_EQ(gdaki_doca_mr_register(pd, ptr, n,
                                     GDAKI_DOCA_ACCESS_LOCAL_WRITE | GDAKI_DOCA_ACCESS_REMOTE_WRITE |
                                         GDAKI_DOCA_ACCESS_REMOTE_READ | GDAKI_DOCA_ACCESS_REMOTE_ATOMIC,
                                     &mr, &lkey, &rkey),
              DOCA_SUCCESS);
  }
  void release() {
    if (mr != nullptr) {
      EXPECT_EQ(gdaki_doca_mr_deregister(mr), DOCA_SUCCESS);
    }
    if (ptr != nullptr) {
      EXPECT_EQ(doca_gpu_mem_free(gpu, ptr), DOCA_SUCCESS);
    }
    mr = nullptr;
    ptr = nullptr;
  }
  uint8_t* bytes_at(size_t off = 0) const { return static_cast<uint8_t*>(ptr) + off; }
  uint64_t* word(size_t off) const { return reinterpret_cast<uint64_t*>(bytes_at(off)); }
  // The device API's addresses: keys big-endian, as DOCA wants them.
  doca_gpu_dev_verbs_addr local(size_t off = 0) const { return {reinterpret_cast<uint64_t>(bytes_at(off)), be32(lkey)}; }
  doca_gpu_dev_verbs_addr remote(size_t off = 0) const {
    return {reinterpret_cast<uint64_t>(bytes_at(off)), be32(rkey)};
  }
};

struct options {
  uint32_t pairs = 1;
  uint16_t sq_nwqe = 256;
  doca_gpu_dev_verbs_nic_handler handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO;
  bool connect_a = true;
  size_t buffer_bytes = 1 << 20;
};

class doca_env : public ::testing::Test {
 protected:
  doca_gpu_t* gpu = nullptr;
  ibv_pd* pd = nullptr;
  doca_dev_t* dev = nullptr;
  std::vector<doca_gpu_verbs_qp_hl*> a, b;
  doca_gpu_dev_verbs_qp* flat = nullptr;  // device handles of A_0 .. A_n-1
  buffer src, dst, res;                   // src and res local to A, dst at the peer

  void setup(const options& o = {}) {
    DOCA_OK(doca_gpu_create("0000:00:00.0", &gpu));
    DOCA_OK(gdaki_doca_pd_open("soft0", &pd));
    DOCA_OK(doca_verbs_dev_open(pd, &dev));
    for (uint32_t i = 0; i < o.pairs; ++i) {
      doca_gpu_verbs_qp_init_attr_hl at{};
      at.gpu_dev = gpu;
      at.net_dev = dev;
      at.ibpd = pd;
      at.sq_nwqe = o.sq_nwqe;
      at.nic_handler = o.handler;
      doca_gpu_verbs_qp_hl* qa = nullptr;
      doca_gpu_verbs_qp_hl* qb = nullptr;
      DOCA_OK(doca_gpu_verbs_create_qp_hl(&at, &qa));
      at.nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO;  // the peer only responds
      DOCA_OK(doca_gpu_verbs_create_qp_hl(&at, &qb));
      a.push_back(qa);
      b.push_back(qb);
      DOCA_OK(doca_test_connect(dev, qb->qp, doca_verbs_qp_get_qpn(qa->qp), nullptr, nullptr));
      if (o.connect_a) {
        DOCA_OK(doca_test_connect(dev, qa->qp, doca_verbs_qp_get_qpn(qb->qp), nullptr, nullptr));
      }
    }
    DOCA_OK(doca_gpu_verbs_qp_flat_list_create_hl(a.data(), o.pairs, &flat));
    src.init(gpu, pd, o.buffer_bytes);
    dst.init(gpu, pd, o.buffer_bytes);
    res.init(gpu, pd, 1 << 16);
  }

  doca_gpu_dev_verbs_qp* qp(uint32_t i = 0) { return &flat[i]; }

  void TearDown() override {
    src.release();
    dst.release();
    res.release();
    if (flat != nullptr) {
      EXPECT_EQ(doca_gpu_verbs_qp_flat_list_destroy_hl(flat), DOCA_SUCCESS);
    }
    for (auto* q : a) EXPECT_EQ(doca_gpu_verbs_destroy_qp_hl(q), DOCA_SUCCESS);
    for (auto* q : b) EXPECT_EQ(doca_gpu_verbs_destroy_qp_hl(q), DOCA_SUCCESS);
    if (dev != nullptr) {
      EXPECT_EQ(doca_verbs_dev_close(dev), DOCA_SUCCESS);
    }
    if (pd != nullptr) {
      EXPECT_EQ(gdaki_doca_pd_close(pd), DOCA_SUCCESS);
    }
    if (gpu != nullptr) {
      EXPECT_EQ(doca_gpu_destroy(gpu), DOCA_SUCCESS);
    }
  }
};

}  // namespace doca_test
