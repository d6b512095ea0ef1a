// One kernel body, two ways to run it: put_body() is a GDAKI_HD function in which every
// thread of a 2 x 32 grid puts its own 256-byte chunk into the peer's buffer on one
// grid-shared QP, then quiets. With a usable GPU it runs as a CUDA kernel, on a QP
// exported with gdaki::exported_qp for GPU initiators (rings, CQ handles and doorbell
// record in memory the GPU reaches); without one it runs on CPU threads through the host
// grid launcher (gdaki/device/host_grid.hpp), which emulates blocks and warps, and says
// so. Either way the peer is the soft NIC in this process, and the host checks every byte
// and every status. Exit status 0 only if all landed.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gdaki/device/host_grid.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;
namespace arch = gdaki::dev::arch;

namespace {

constexpr uint32_t blocks = 2, threads_per_block = 32, threads = blocks * threads_per_block;
constexpr uint32_t chunk = 256;
constexpr uint32_t sq_wqebbs = 256;

struct put_args {
  dev::qp_handle* qp;
  dev::local_ptr src;  // threads * chunk bytes to send
  dev::remote_ptr dst;  // threads * chunk bytes at the peer
  uint32_t* statuses;   // per thread: the put's status, then (if ok) the quiet's
};

// The kernel body: the same source for a GPU thread and a host-grid CPU thread.
GDAKI_HD inline void put_body(const put_args& a) {
  const uint32_t t = arch::block_rank_in_grid() * arch::threads_in_block() + arch::thread_rank_in_block();
  const uint64_t off = uint64_t{t} * chunk;
  uint64_t ticket = 0;
  gdaki::status s = dev::put(*a.qp, {a.dst.addr + off, a.dst.rkey}, {a.src.addr + off, a.src.lkey}, chunk, &ticket,
                             dev::op_flags::none, 5'000'000'000ull);
  if (s == gdaki::status::ok) s = dev::quiet(*a.qp, 5'000'000'000ull);  // bounded: a lost WQE is a status
  a.statuses[t] = static_cast<uint32_t>(s);
}

__global__ void put_kernel(put_args a) { put_body(a); }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e));
}

// Memory the initiator touches: mapped page-locked memory for a GPU (same address on both
// sides: unified addressing), plain host memory for CPU threads.
struct initiator_memory {
  bool gpu;
  std::vector<void*> owned;
  explicit initiator_memory(bool on_gpu) : gpu(on_gpu) {}
  initiator_memory(const initiator_memory&) = delete;
  initiator_memory& operator=(const initiator_memory&) = delete;
  ~initiator_memory() {
    for (void* p : owned) gpu ? (void)cudaFreeHost(p) : std::free(p);
  }
  void* get(size_t bytes) {
    bytes = (bytes + 4095) / 4096 * 4096;
    void* p = nullptr;
    if (gpu) {
      cuda_check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    } else if ((p = std::aligned_alloc(4096, bytes)) == nullptr) {
      throw std::bad_alloc();
    }
    std::memset(p, 0, bytes);
    owned.push_back(p);
    return p;
  }
  verbs::placement ring(size_t bytes) {
    if (!gpu) return {};  // the provider allocates host memory
    return {verbs::memory_kind::host_pinned, get(bytes), bytes};
  }
  // Provider-allocated words the GPU must reach (doorbell records, doorbell page):
  // registered with CUDA for the life of the process unless already visible.
  void make_visible(const void* p, size_t bytes, const char* what) const {
    if (!gpu || p == nullptr) return;
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + 4095) & ~uintptr_t{4095};
    const cudaError_t e =
        cudaHostRegister(reinterpret_cast<void*>(first), end - first, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) cuda_check(e, what);
    (void)cudaGetLastError();
    void* dp = nullptr;
    cuda_check(cudaHostGetDevicePointer(&dp, const_cast<void*>(p), 0), what);
    if (dp != p) throw std::runtime_error(std::string(what) + ": the GPU sees it at another address");
  }
};

}  // namespace

int main() try {
  int gpus = 0;
  const cudaError_t probe = cudaGetDeviceCount(&gpus);
  const bool gpu = probe == cudaSuccess && gpus > 0;
  if (!gpu) {
    std::printf("no usable GPU (cudaGetDeviceCount: %s, %d devices): running the kernel body on CPU threads "
                "through the host grid launcher\n",
                cudaGetErrorName(probe), gpus);
    (void)cudaGetLastError();
  }
  initiator_memory mem(gpu);

  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd_a(d), pd_b(d);
  auto make_cq = [&](uint32_t depth, bool initiator) {
    verbs::cq_init ci;
    ci.depth = depth;
    if (initiator) ci.ring = mem.ring(size_t{depth} * 64);
    return verbs::cq(d, ci);
  };
  verbs::cq a_send = make_cq(sq_wqebbs, true), a_recv = make_cq(64, true);
  verbs::cq b_send = make_cq(64, false), b_recv = make_cq(64, false);
  verbs::qp_init ia;
  ia.send_cq = &a_send;
  ia.recv_cq = &a_recv;
  ia.sq_wqebbs = sq_wqebbs;
  ia.rq_wqes = 64;
  ia.sq_ring = mem.ring(size_t{sq_wqebbs} * 64);
  ia.rq_ring = mem.ring(size_t{64} * 256);  // 64 receive WQEs, room for their largest stride
  verbs::qp a(pd_a, ia);
  verbs::qp_init ib;
  ib.send_cq = &b_send;
  ib.recv_cq = &b_recv;
  ib.sq_wqebbs = 64;
  ib.rq_wqes = 64;
  verbs::qp b(pd_b, ib);
  verbs::connect_rc(a, b.qpn(), verbs::access::all);
  verbs::connect_rc(b, a.qpn(), verbs::access::all);

  auto* cqh = static_cast<dev::cq_handle*>(mem.get(2 * sizeof(dev::cq_handle)));
  cqh[0] = a_send.export_handle();
  cqh[1] = a_recv.export_handle();
  for (int i = 0; i < 2; ++i) mem.make_visible(cqh[i].dbrec, sizeof(*cqh[i].dbrec), "CQ doorbell record");
  gdaki::export_options eo;
  eo.initiator = gpu ? gdaki::initiator::gpu : gdaki::initiator::cpu;
  gdaki::exported_qp exported(a, &cqh[0], &cqh[1], eo);
  if (exported.host_view().backend == dev::qp_backend::direct) {  // GPU threads ring this QP themselves
    mem.make_visible(exported.nic_handle().dbrec, sizeof(*exported.nic_handle().dbrec), "QP doorbell record");
    mem.make_visible(exported.nic_handle().uar_db, 8, "doorbell register");
  }
  std::printf("export: %s (%s)\n", exported.choice().name.c_str(), exported.choice().reason.c_str());

  // The source is read by the NIC only and the destination lives at the peer: plain memory.
  std::vector<uint8_t> src(threads * chunk), dst(threads * chunk);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  verbs::mr msrc(pd_a, src.data(), src.size(), verbs::access::local_write);
  verbs::mr mdst(pd_b, dst.data(), dst.size(), verbs::access::all);
  auto* statuses = static_cast<uint32_t*>(mem.get(threads * sizeof(uint32_t)));
  for (uint32_t t = 0; t < threads; ++t) statuses[t] = ~0u;  // "never ran"
  const put_args args{&exported.handle(), {reinterpret_cast<uint64_t>(src.data()), msrc.lkey()},
                      {reinterpret_cast<uint64_t>(dst.data()), mdst.rkey()}, statuses};

  if (gpu) {
    put_kernel<<<blocks, threads_per_block>>>(args);
    cuda_check(cudaGetLastError(), "launch");
    cuda_check(cudaDeviceSynchronize(), "kernel");
  } else {
    gdaki::dev::host::launch(blocks, threads_per_block, [&args] { put_body(args); });
  }

  uint32_t not_ok = 0;
  for (uint32_t t = 0; t < threads; ++t) not_ok += statuses[t] != static_cast<uint32_t>(gdaki::status::ok);
  const bool landed = std::memcmp(src.data(), dst.data(), dst.size()) == 0;
  std::printf("%s: %u x %u threads each put %u B on one QP: %u statuses not ok, bytes %s\n%s\n",
              gpu ? "CUDA kernel" : "host grid", blocks, threads_per_block, chunk, not_ok,
              landed ? "landed" : "WRONG", not_ok == 0 && landed ? "OK" : "FAILED");
  return not_ok == 0 && landed ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_kernel_put: %s\n", e.what());
  return 1;
}
