// gdaki::exported_qp for GPU initiators on a machine without a GPU. The CUDA driver is a
// stand-in (stand_in_libcuda.cpp, loaded through GDAKI_LIBCUDA) whose "GPU memory" is host
// memory it keeps track of, so CPU threads can play the kernels' part. Checked: where the
// export puts each handle (docs/memory-ordering.md, "Every shared word": a CQ handle goes
// where its poller runs) and that every operation works through the handles so placed, on
// every backend. The real GPU runs the same through tests/gpu (label gpu).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "gdaki/device/ops.hpp"
#include "gdaki/export.hpp"
#include "proxy/export_pair.hpp"

namespace {

namespace dev = gdaki::dev;
using gdaki::backend_request;
using gdaki_test::check_every_operation;
using gdaki_test::pair_world;

// Before anything in this process loads the CUDA driver (it is loaded once, on first use).
const bool stand_in_selected = setenv("GDAKI_LIBCUDA", GDAKI_STAND_IN_LIBCUDA, 1) == 0;

constexpr unsigned gpu_memory = 2, pinned_memory = 1, unknown_memory = 0;

// The stand-in's own entry points (the same loaded object as the library's: same path).
struct stand_in {
  void* lib = dlopen(GDAKI_STAND_IN_LIBCUDA, RTLD_NOW);
  unsigned (*memory_type)(const void*) =
      reinterpret_cast<unsigned (*)(const void*)>(dlsym(lib, "stand_in_cuda_memory_type"));
  int (*mem_alloc)(unsigned long long*, size_t) =
      reinterpret_cast<int (*)(unsigned long long*, size_t)>(dlsym(lib, "cuMemAlloc_v2"));
  int (*mem_free)(unsigned long long) = reinterpret_cast<int (*)(unsigned long long)>(dlsym(lib, "cuMemFree_v2"));
};

const stand_in& driver() {
  static const stand_in s;
  return s;
}

gdaki::export_options gpu_options(pair_world& w, backend_request req) {
  gdaki::export_options o = w.options(req, true);
  o.initiator = gdaki::initiator::gpu;
  return o;
}

class gpu_initiator_export : public ::testing::TestWithParam<backend_request> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(stand_in_selected);
    ASSERT_NE(driver().memory_type, nullptr) << dlerror();
    ASSERT_NE(driver().mem_alloc, nullptr);
  }
};

// How it failed before the CQ handles were placed by the export: the QP handle's send_cq
// and recv_cq were the caller's host-memory handles, so GPU pollers claimed CQEs with
// atomics across PCIe (the H100 run: 8x128 grid-shared 814-848 ms on direct).
TEST_P(gpu_initiator_export, cq_handles_in_host_memory_are_moved_to_gpu_memory_for_gpu_pollers) {
  pair_world w;
  gdaki::exported_qp x(w.a, &w.a_send, &w.a_recv, gpu_options(w, GetParam()));
  EXPECT_EQ(driver().memory_type(&x.handle()), gpu_memory);
  const dev::qp_handle& view = x.host_view();
  if (view.backend == dev::qp_backend::direct) {
    EXPECT_EQ(driver().memory_type(view.send_cq), gpu_memory);
    EXPECT_EQ(driver().memory_type(view.recv_cq), gpu_memory);
    EXPECT_NE(view.send_cq, &w.a_send);
    EXPECT_EQ(view.send_cq->cqn, w.a_send.cqn);  // the stand-in's GPU memory is host memory
    EXPECT_EQ(view.recv_cq->cqn, w.a_recv.cqn);
  } else {
    // The proxy thread polls: host memory is where it belongs.
    EXPECT_EQ(x.nic_handle().send_cq, &w.a_send);
    EXPECT_EQ(x.nic_handle().recv_cq, &w.a_recv);
  }
  check_every_operation(w, x);
  EXPECT_EQ(dev::last_error(x.handle()).syndrome, gdaki::prm::syndrome::none);
}

// How it failed: the proxy thread polled the caller's GPU-memory handles from the CPU (on a
// real GPU a fault); export now gives the proxy host copies.
TEST_P(gpu_initiator_export, cq_handles_in_gpu_memory_stay_for_gpu_pollers_and_are_copied_for_the_proxy) {
  pair_world w;
  unsigned long long mem = 0;
  ASSERT_EQ(driver().mem_alloc(&mem, 2 * sizeof(dev::cq_handle)), 0);
  auto* placed = reinterpret_cast<dev::cq_handle*>(static_cast<uintptr_t>(mem));
  placed[0] = w.a_send;  // a kernel's copy would be made with cudaMemcpy; here memory is memory
  placed[1] = w.a_recv;
  {
    gdaki::exported_qp x(w.a, &placed[0], &placed[1], gpu_options(w, GetParam()));
    const dev::qp_handle& view = x.host_view();
    if (view.backend == dev::qp_backend::direct) {
      EXPECT_EQ(view.send_cq, &placed[0]);
      EXPECT_EQ(view.recv_cq, &placed[1]);
    } else {
      EXPECT_EQ(driver().memory_type(x.nic_handle().send_cq), unknown_memory);
      EXPECT_EQ(driver().memory_type(x.nic_handle().recv_cq), unknown_memory);
      EXPECT_EQ(x.nic_handle().send_cq->cqn, w.a_send.cqn);
    }
    check_every_operation(w, x);
    EXPECT_EQ(dev::last_error(x.handle()).syndrome, gdaki::prm::syndrome::none);
  }
  EXPECT_EQ(driver().mem_free(mem), 0);
}

TEST(gpu_initiator_export_placement, the_proxy_ring_shared_with_the_cpu_is_host_pinned) {
  ASSERT_TRUE(stand_in_selected);
  pair_world w;
  gdaki::exported_qp x(w.a, &w.a_send, &w.a_recv, gpu_options(w, backend_request::proxy));
  ASSERT_EQ(x.host_view().backend, dev::qp_backend::proxy);
  const gdaki::proxy::ring_handle* ring = x.host_view().proxy_ring;
  EXPECT_EQ(driver().memory_type(ring), gpu_memory);  // only producers read the ring handle
  EXPECT_EQ(driver().memory_type(ring->prod), gpu_memory);  // the producers' own words
  EXPECT_EQ(driver().memory_type(ring->ctl), pinned_memory);  // the proxy's words
  EXPECT_EQ(driver().memory_type(ring->slots), pinned_memory);
  EXPECT_EQ(driver().memory_type(ring->counters), pinned_memory);
  check_every_operation(w, x);
}

INSTANTIATE_TEST_SUITE_P(backends, gpu_initiator_export,
                         ::testing::Values(backend_request::direct, backend_request::cpu_assisted,
                                           backend_request::proxy, backend_request::automatic),
                         [](const ::testing::TestParamInfo<backend_request>& i) {
                           switch (i.param) {
                             case backend_request::direct: return std::string("direct");
                             case backend_request::cpu_assisted: return std::string("cpu_assisted");
                             case backend_request::proxy: return std::string("proxy");
                             default: return std::string("automatic");
                           }
                         });

}  // namespace
