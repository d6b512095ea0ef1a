// Host-side set-up of the GPU scenario program: a soft-NIC loopback QP pair whose
// initiator side (QP A) is reachable by GPU threads, exported with gdaki::exported_qp
// (initiator = gpu) on the backend asked for. What GPU threads touch is in memory they can
// reach: A's SQ and RQ rings, both of A's CQ rings and the CQ handles in cudaHostAlloc'd
// (mapped) memory; the doorbell record and doorbell page the provider allocated are
// cudaHostRegister'ed; the exported QP handle is where the export puts it (GPU memory). The
// CQ handles are handed to the export in GPU memory (cudaMalloc), for every backend: the
// export polls them there from GPU threads, and gives the proxy's CPU thread host copies.
// (../shared/gpu/gpu_check passes them in host-pinned memory, the other path: the export
// then moves them to GPU memory itself.)
// Compiled by nvcc as part of gpu_scenarios.cu (host code only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gdaki/device/handles.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::gpu_test {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e));
}

// Mapped, page-locked host memory, zeroed; freed with the owner.
struct pinned_block {
  void* p = nullptr;
  explicit pinned_block(size_t bytes) {
    cuda_check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    std::memset(p, 0, bytes);
  }
  pinned_block(const pinned_block&) = delete;
  pinned_block& operator=(const pinned_block&) = delete;
  ~pinned_block() { cudaFreeHost(p); }
};

// Makes [p, p + bytes) reachable by GPU threads at the same address, unless it already is
// (cudaHostAlloc'd, or registered before). Memory the provider allocated (doorbell record,
// doorbell page) needs this; the registration stays for the process (pages are shared).
inline void make_gpu_visible(const void* p, size_t bytes, const char* what) {
  cudaPointerAttributes at{};
  if (cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type != cudaMemoryTypeUnregistered &&
      at.devicePointer == p)
    return;
  (void)cudaGetLastError();
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + 4095) & ~uintptr_t{4095};
  const cudaError_t e = cudaHostRegister(reinterpret_cast<void*>(first), end - first,
                                         cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) cuda_check(e, what);
  (void)cudaGetLastError();
  void* dp = nullptr;
  cuda_check(cudaHostGetDevicePointer(&dp, const_cast<void*>(p), 0), what);
  if (dp != p) throw std::runtime_error(std::string(what) + ": the GPU sees it at another address (no UVA)");
}

// A registered buffer in mapped host memory: the GPU passes its address, the host checks it.
struct gpu_buffer {
  pinned_block mem;
  verbs::mr mr;
  gpu_buffer(const verbs::pd& pd, size_t bytes, uint32_t access) : mem(bytes), mr(pd, mem.p, bytes, access) {}
  ~gpu_buffer() { mr = verbs::mr(); }  // deregister before the memory goes
  uint8_t* bytes() const { return static_cast<uint8_t*>(mem.p); }
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(mem.p) + off; }
  dev::local_ptr local() const { return {addr(), mr.lkey()}; }
  dev::remote_ptr remote() const { return {addr(), mr.rkey()}; }
};

inline constexpr uint32_t sq_wqebbs = 1024;
inline constexpr size_t buffer_bytes = 1u << 20;

// QP A (GPU initiator) -> QP B (target) on soft0, A exported on `backend`.
struct gpu_loopback {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pd_a{dev}, pd_b{dev};
  std::vector<std::unique_ptr<pinned_block>> rings;  // placements handed to the provider
  verbs::cq a_send, a_recv, b_send, b_recv;
  verbs::qp a, b;
  pinned_block cq_handles{2 * sizeof(dev::cq_handle)};
  dev::cq_handle* cq_handles_on_gpu = nullptr;  // cudaMalloc'd copy, handed to the export
  gpu_buffer src{pd_a, buffer_bytes, verbs::access::local_write};
  gpu_buffer result{pd_a, 1u << 16, verbs::access::local_write};
  gpu_buffer scratch{pd_a, 64, verbs::access::local_write};
  gpu_buffer dst{pd_b, buffer_bytes, verbs::access::all};
  std::unique_ptr<exported_qp> exported;

  verbs::placement pinned_ring(size_t bytes) {
    rings.push_back(std::make_unique<pinned_block>(bytes));
    return verbs::placement{verbs::memory_kind::host_pinned, rings.back()->p, bytes};
  }
  verbs::cq make_cq(uint32_t depth) {
    verbs::cq_init ci;
    ci.depth = depth;
    ci.ring = pinned_ring(size_t{depth} * 64);
    return verbs::cq(dev, ci);
  }

  explicit gpu_loopback(backend_request backend) {
    a_send = make_cq(sq_wqebbs);
    a_recv = make_cq(256);
    b_send = make_cq(256);
    b_recv = make_cq(256);
    verbs::qp_init ia;
    ia.send_cq = &a_send;
    ia.recv_cq = &a_recv;
    ia.sq_wqebbs = sq_wqebbs;
    ia.rq_wqes = 64;
    ia.sq_ring = pinned_ring(size_t{sq_wqebbs} * 64);
    ia.rq_ring = pinned_ring(64 * 256);
    a = verbs::qp(pd_a, ia);
    verbs::qp_init ib;
    ib.send_cq = &b_send;
    ib.recv_cq = &b_recv;
    ib.sq_wqebbs = 64;
    ib.rq_wqes = 64;
    b = verbs::qp(pd_b, ib);
    verbs::connect_rc(a, b.qpn(), verbs::access::all);
    verbs::connect_rc(b, a.qpn(), verbs::access::all);

    auto* cqh = static_cast<dev::cq_handle*>(cq_handles.p);
    cqh[0] = a_send.export_handle();
    cqh[1] = a_recv.export_handle();
    for (int i = 0; i < 2; ++i) make_gpu_visible(cqh[i].dbrec, sizeof(*cqh[i].dbrec), "CQ doorbell record");

    export_options o;
    o.backend = backend;
    o.initiator = initiator::gpu;
    o.scratch_addr = scratch.addr();
    o.scratch_lkey = scratch.mr.lkey();
    cuda_check(cudaMalloc(&cq_handles_on_gpu, 2 * sizeof(dev::cq_handle)), "cudaMalloc CQ handles");
    cuda_check(cudaMemcpy(cq_handles_on_gpu, cqh, 2 * sizeof(dev::cq_handle), cudaMemcpyHostToDevice),
               "CQ handles to GPU memory");
    exported = std::make_unique<exported_qp>(a, &cq_handles_on_gpu[0], &cq_handles_on_gpu[1], o);

    // The QP behind the handle (the proxy's own, for the proxy backend): its doorbell
    // record and doorbell page are provider memory the GPU must reach when GPU threads
    // post on it directly.
    const dev::qp_handle& nic = exported->nic_handle();
    if (exported->host_view().backend == dev::qp_backend::direct) {
      make_gpu_visible(nic.dbrec, sizeof(*nic.dbrec), "QP doorbell record");
      if (nic.uar_db != nullptr) make_gpu_visible(nic.uar_db, 8, "doorbell register");
    }
    for (size_t i = 0; i < buffer_bytes; ++i) src.bytes()[i] = static_cast<uint8_t>(i * 7 + 3);
  }

  ~gpu_loopback() {
    exported.reset();  // its services stop before the CQ handles go
    if (cq_handles_on_gpu != nullptr) cudaFree(cq_handles_on_gpu);
  }
  gpu_loopback(const gpu_loopback&) = delete;
  gpu_loopback& operator=(const gpu_loopback&) = delete;

  dev::qp_handle* handle() { return &exported->handle(); }
};

}  // namespace gdaki::gpu_test
