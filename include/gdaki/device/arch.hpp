// THE primitives header. Every memory-ordering, MMIO, warp and timing primitive of the data
// path lives here, with one CUDA half and one host half; everything else is written once
// on top of these names. No other file in gdaki contains a fence, an atomic builtin or asm.
//
// Naming follows purpose (rdma-core udma_barrier.h style); the fences below carry a table
// of their instruction per architecture and the source of each rule. Scopes: the data
// path's readers may be the NIC, a CPU thread (soft NIC engine, proxy) or other GPU
// threads, and rings usually live in host-pinned memory, so the device half uses system
// scope (.sys) throughout: GPU scope (__threadfence) does not order stores for a CPU
// observer.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"

#if !GDAKI_DEVICE_PASS
#include <atomic>
#include <chrono>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include "gdaki/device/host_context.hpp"
#endif

namespace gdaki::dev::arch {

// ---------------------------------------------------------------------------------------
// Fences, one per purpose. Each has a device half (PTX) and a host half per architecture:
// x86-64 (and i386), aarch64, and a generic fallback. The host rules follow rdma-core's
// util/udma_barrier.h, where each purpose has its own name (udma_to_device_barrier,
// mmio_wc_start / mmio_flush_writes, udma_from_device_barrier), and the Linux kernel's
// DMA barriers (Documentation/memory-barriers.txt: dma_wmb, wmb, dma_rmb;
// arch/arm64/include/asm/barrier.h). On aarch64 the shareability domain matters: a PCIe
// device is an observer in the outer-shareable domain, so device-facing barriers use
// "osh" (or a DSB), never the inner-shareable "dmb ish" that C++ fences compile to
// (Arm ARM, "Data Memory Barrier" / "Data Synchronization Barrier").
//
//   purpose                                       x86-64            aarch64      generic
//   fence_to_device    WQE bytes before DBR store compiler barrier  dmb oshst    seq_cst
//   fence_before_mmio  DBR before MMIO doorbell,  sfence            dsb st       seq_cst
//                      WC buffer drained
//   fence_after_mmio   WC (BlueFlame) stores      sfence            dsb st       seq_cst
//                      leave the CPU now
//   fence_from_device  valid bit before body      compiler barrier  dmb oshld    seq_cst
//   fence_full         store->load, all parties   mfence (seq_cst)  dmb osh      seq_cst
//
// The generic column is a C++ seq_cst fence: right for CPU observers (the soft NIC, the
// proxy), with no promise for a device. A port that drives real hardware on another
// architecture adds its column here, from the same sources.
// ---------------------------------------------------------------------------------------

// Before the doorbell-record store: every earlier store of this thread (WQE bytes, receive
// WQEs) is visible to the device before any later store (the DBR) is. Store->store only;
// the DBR store that follows is store_release, which also orders earlier loads. Pairs with
// the NIC's acquire of the DBR.
//  x86-64: TSO keeps stores to ordinary memory in order, so only the compiler must not
//    move them: rdma-core's udma_to_device_barrier is an empty asm there. The C++ release
//    fence is exactly that (no instruction) and ThreadSanitizer sees it.
//  aarch64: dmb oshst, rdma-core's udma_to_device_barrier and Linux's dma_wmb().
GDAKI_HD GDAKI_FORCEINLINE void fence_to_device() {
#if GDAKI_DEVICE_PASS
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#elif defined(__x86_64__) || defined(__i386__)
  std::atomic_thread_fence(std::memory_order_release);
#elif defined(__aarch64__)
  asm volatile("dmb oshst" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Before the MMIO doorbell (or a BlueFlame copy): the doorbell-record store is ordered
// before the doorbell store, so a NIC woken by the doorbell never reads an old DBR, and
// earlier write-combined stores (a previous BlueFlame copy, GDRCopy-mapped buffers) have
// left the CPU's WC buffer. rdma-core calls this mmio_wc_start() (= mmio_flush_writes).
//  x86-64: sfence plus a compiler barrier. TSO already keeps the DBR store before the
//    doorbell store; only WC stores can pass it. (A full fence here cost a quarter of a
//    CPU poster's time per WQE on the soft NIC, for no ordering it needed.)
//  aarch64: dsb st, rdma-core's mmio_flush_writes and Linux's wmb(). A DSB, not a DMB:
//    the UAR page is mapped Device or Normal-NC (write-combining), and the ordering
//    between a Normal-memory store (the DBR) and a store to such a mapping is only
//    guaranteed once the earlier store has completed, which a DMB does not wait for.
GDAKI_HD GDAKI_FORCEINLINE void fence_before_mmio() {
#if GDAKI_DEVICE_PASS
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#elif defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
  std::atomic_signal_fence(std::memory_order_seq_cst);
#elif defined(__aarch64__)
  asm volatile("dsb st" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// After a BlueFlame copy (stores to a write-combining mapping), still inside the lock that
// serialises doorbells: the combined stores leave the CPU now and in lock order, and are
// never merged with the next holder's copy. rdma-core does this with mmio_flush_writes()
// after mlx5_bf_copy, inside the BlueFlame spinlock. Same instructions as
// fence_before_mmio on the host.
//  device: the same system-scope fence as before the doorbell, a conservative choice (a
//    BlueFlame copy from a GPU has never run against a ConnectX).
GDAKI_HD GDAKI_FORCEINLINE void fence_after_mmio() {
#if GDAKI_DEVICE_PASS
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#elif defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
  std::atomic_signal_fence(std::memory_order_seq_cst);
#elif defined(__aarch64__)
  asm volatile("dsb st" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// After observing a store from the device (a CQE owner byte): later reads of the CQE body
// and of data the NIC placed (READ / atomic results) see what the device wrote before it.
// Pairs with the NIC's ordered write of op_own after the body.
//  x86-64: loads are not reordered with older loads from ordinary (write-back) memory,
//    so a compiler barrier suffices: Linux's dma_rmb() is barrier() on x86. (rdma-core's
//    udma_from_device_barrier uses lfence, which only matters for WC/UC reads; CQ rings
//    are write-back memory.)
//  aarch64: dmb oshld, rdma-core's udma_from_device_barrier and Linux's dma_rmb().
GDAKI_HD GDAKI_FORCEINLINE void fence_from_device() {
#if GDAKI_DEVICE_PASS
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#elif defined(__x86_64__) || defined(__i386__)
  std::atomic_thread_fence(std::memory_order_acquire);
#elif defined(__aarch64__)
  asm volatile("dmb oshld" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Full two-way fence for the rare paths that need store->load ordering.
//  x86-64: the C++ seq_cst fence (mfence or a locked instruction).
//  aarch64: dmb osh, Linux's dma_mb(): the outer-shareable form of the dmb ish that a C++
//    seq_cst fence compiles to, so it also covers a device observer.
GDAKI_HD GDAKI_FORCEINLINE void fence_full() {
#if GDAKI_DEVICE_PASS
  asm volatile("fence.sc.sys;" ::: "memory");
#elif defined(__aarch64__)
  asm volatile("dmb osh" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// ---------------------------------------------------------------------------------------
// Loads and stores with ordering, on plain (non-atomic-typed) memory shared with the NIC
// or with other threads. Sizes are those of the PRM words and ring counters.
// ---------------------------------------------------------------------------------------

GDAKI_HD GDAKI_FORCEINLINE uint32_t load_acquire(const uint32_t* p) {
#if GDAKI_DEVICE_PASS
  uint32_t v;
  asm volatile("ld.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint64_t load_acquire(const uint64_t* p) {
#if GDAKI_DEVICE_PASS
  uint64_t v;
  asm volatile("ld.acquire.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint32_t load_relaxed(const uint32_t* p) {
#if GDAKI_DEVICE_PASS
  uint32_t v;
  asm volatile("ld.relaxed.sys.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint64_t load_relaxed(const uint64_t* p) {
#if GDAKI_DEVICE_PASS
  uint64_t v;
  asm volatile("ld.relaxed.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_release(uint32_t* p, uint32_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.release.sys.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_release(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.release.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_relaxed(uint32_t* p, uint32_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.relaxed.sys.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_relaxed(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.relaxed.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

// The 8-byte doorbell store to the UAR register: one 64-bit store, never two 32-bit ones.
// Callers put fence_before_mmio() before it. On the GPU this is an MMIO store (not merged
// or reordered with other MMIO by the memory system); on the host a relaxed atomic store,
// visible to a soft-NIC engine polling the same word: one aligned 64-bit mov on x86-64 and
// one str on aarch64 (single-copy atomic), as rdma-core's mmio_write64 on 64-bit CPUs.
GDAKI_HD GDAKI_FORCEINLINE void doorbell_store64(uint64_t* reg, uint64_t v) {
#if GDAKI_DEVICE_PASS
#if __CUDA_ARCH__ >= 700
  asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(reg), "l"(v) : "memory");
#else
  *reinterpret_cast<volatile uint64_t*>(reg) = v;
#endif
#else
  __atomic_store_n(reg, v, __ATOMIC_RELAXED);
#endif
}

// ---------------------------------------------------------------------------------------
// Read-modify-write on shared ring counters and locks (system scope on the device).
// ---------------------------------------------------------------------------------------

GDAKI_HD GDAKI_FORCEINLINE uint64_t fetch_add(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  return atomicAdd_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint32_t fetch_add(uint32_t* p, uint32_t v) {
#if GDAKI_DEVICE_PASS
  return atomicAdd_system(p, v);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
#endif
}
// Raises *p to v if v is larger; returns the previous value.
GDAKI_HD GDAKI_FORCEINLINE uint64_t fetch_max(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  return atomicMax_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
  }
  return cur;
#endif
}
// Compare-and-swap; returns true and stores desired when *p == expected.
GDAKI_HD GDAKI_FORCEINLINE bool compare_swap(uint64_t* p, uint64_t expected, uint64_t desired) {
#if GDAKI_DEVICE_PASS
  return atomicCAS_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(expected),
                          static_cast<unsigned long long>(desired)) == expected;
#else
  return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE bool compare_swap(uint32_t* p, uint32_t expected, uint32_t desired) {
#if GDAKI_DEVICE_PASS
  return atomicCAS_system(p, expected, desired) == expected;
#else
  return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#endif
}

// ---------------------------------------------------------------------------------------
// arch::local: the same loads, stores and read-modify-writes for words that only the
// initiators of one export touch (the posters' counters of a QP or CQ handle: reserved,
// ready, rung, the doorbell lock, completed, the error latch, the CQ's claim counter), never
// the NIC, a CPU service or the other side of PCIe (docs/memory-ordering.md, "Every shared
// word"). On the GPU they run at GPU scope (.gpu), which stays in the GPU's L2 instead of
// crossing to the system's coherence point; with the handle in GPU memory (export.hpp:
// GPU initiators) that is where the words live. On the host they are the system-scope
// operations above: CPU initiators are one coherence domain. A word the NIC or a CPU
// service reads (the doorbell records, the doorbell, CQEs, the proxy ring's shared lines)
// keeps the system-scope functions.
// Ordering across scopes: a poster's WQE stores reach the NIC through sq_submit's
// fence_to_device + store_release(.sys) of the doorbell record by whichever thread rings;
// that thread acquired `ready` at GPU scope from the writers, and PTX causality order is
// transitive across morally-strong operations of different scopes (PTX ISA, "Memory
// Consistency Model": base causality order), so the release at system scope covers the
// other posters' stores it observed.
// ---------------------------------------------------------------------------------------
namespace local {

GDAKI_HD GDAKI_FORCEINLINE uint32_t load_acquire(const uint32_t* p) {
#if GDAKI_DEVICE_PASS
  uint32_t v;
  asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return arch::load_acquire(p);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint64_t load_acquire(const uint64_t* p) {
#if GDAKI_DEVICE_PASS
  uint64_t v;
  asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return arch::load_acquire(p);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint32_t load_relaxed(const uint32_t* p) {
#if GDAKI_DEVICE_PASS
  uint32_t v;
  asm volatile("ld.relaxed.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return arch::load_relaxed(p);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint64_t load_relaxed(const uint64_t* p) {
#if GDAKI_DEVICE_PASS
  uint64_t v;
  asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return arch::load_relaxed(p);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_release(uint32_t* p, uint32_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.release.gpu.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  arch::store_release(p, v);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_release(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.release.gpu.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  arch::store_release(p, v);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_relaxed(uint32_t* p, uint32_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.relaxed.gpu.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  arch::store_relaxed(p, v);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE void store_relaxed(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  asm volatile("st.relaxed.gpu.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  arch::store_relaxed(p, v);
#endif
}
// Read-modify-writes with acquire-release order at GPU scope (the host half is acq_rel).
GDAKI_HD GDAKI_FORCEINLINE uint64_t fetch_add(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  uint64_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  return arch::fetch_add(p, v);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint32_t fetch_add(uint32_t* p, uint32_t v) {
#if GDAKI_DEVICE_PASS
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
#else
  return arch::fetch_add(p, v);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE uint64_t fetch_max(uint64_t* p, uint64_t v) {
#if GDAKI_DEVICE_PASS
  uint64_t old;
  asm volatile("atom.acq_rel.gpu.global.max.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  return arch::fetch_max(p, v);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE bool compare_swap(uint64_t* p, uint64_t expected, uint64_t desired) {
#if GDAKI_DEVICE_PASS
  uint64_t old;
  asm volatile("atom.acq_rel.gpu.global.cas.b64 %0, [%1], %2, %3;"
               : "=l"(old)
               : "l"(p), "l"(expected), "l"(desired)
               : "memory");
  return old == expected;
#else
  return arch::compare_swap(p, expected, desired);
#endif
}
GDAKI_HD GDAKI_FORCEINLINE bool compare_swap(uint32_t* p, uint32_t expected, uint32_t desired) {
#if GDAKI_DEVICE_PASS
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old)
               : "l"(p), "r"(expected), "r"(desired)
               : "memory");
  return old == expected;
#else
  return arch::compare_swap(p, expected, desired);
#endif
}

// Store->load between initiators (sq_submit's combining hand-off): every earlier store
// of this thread is visible to the other initiators before any later load of it.
GDAKI_HD GDAKI_FORCEINLINE void fence_full() {
#if GDAKI_DEVICE_PASS
  asm volatile("fence.sc.gpu;" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace local

// ---------------------------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------------------------

// One step of a polling loop. iteration counts the caller's unsuccessful polls, so the
// host half can escalate from a pause instruction to yielding the core: on a 2-core
// machine the thread we wait for may need our core.
GDAKI_HD GDAKI_FORCEINLINE void spin_pause(uint32_t iteration) {
#if GDAKI_DEVICE_PASS
#if __CUDA_ARCH__ >= 700
  if (iteration > 64) __nanosleep(64);
#else
  (void)iteration;
#endif
#else
  if (iteration < 64) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");  // Linux's cpu_relax() on arm64
#endif
  } else {
    std::this_thread::yield();
  }
#endif
}

// Monotonic nanoseconds (device: the global timer, comparable across SMs).
GDAKI_HD GDAKI_FORCEINLINE uint64_t clock_ns() {
#if GDAKI_DEVICE_PASS
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
#endif
}

// ---------------------------------------------------------------------------------------
// Thread geometry, warp vote/shuffle and block barrier. The host half reads the calling
// thread's launch context; outside a launch a thread is lane 0 of a one-thread warp and
// block. Host emulation requires every lane of a warp to make the same warp call
// (convergent code), as __syncwarp-style full-mask calls do on the GPU.
// ---------------------------------------------------------------------------------------

inline constexpr uint32_t warp_size = 32;

GDAKI_HD GDAKI_FORCEINLINE uint32_t lane_id() {
#if GDAKI_DEVICE_PASS
  uint32_t l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
#else
  const auto* c = host::current_context;
  return c ? c->lane : 0;
#endif
}

// Lanes present in the caller's warp (32 except in a partial last warp).
GDAKI_HD GDAKI_FORCEINLINE uint32_t warp_lanes() {
#if GDAKI_DEVICE_PASS
  const uint32_t block = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t base = tid - (tid % warp_size);
  return (block - base) < warp_size ? (block - base) : warp_size;
#else
  const auto* c = host::current_context;
  return c ? c->warp->nlanes : 1;
#endif
}

// Mask of the lanes present in the caller's warp, for the *_sync intrinsics.
GDAKI_HD GDAKI_FORCEINLINE uint32_t warp_mask() {
  const uint32_t n = warp_lanes();
  return n >= warp_size ? 0xffffffffu : ((1u << n) - 1u);
}

GDAKI_HD GDAKI_FORCEINLINE uint32_t thread_rank_in_block() {
#if GDAKI_DEVICE_PASS
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
#else
  const auto* c = host::current_context;
  return c ? c->thread_idx.x + c->block_dim.x * (c->thread_idx.y + c->block_dim.y * c->thread_idx.z) : 0;
#endif
}

GDAKI_HD GDAKI_FORCEINLINE uint32_t threads_in_block() {
#if GDAKI_DEVICE_PASS
  return blockDim.x * blockDim.y * blockDim.z;
#else
  const auto* c = host::current_context;
  return c ? c->block_dim.count() : 1;
#endif
}

GDAKI_HD GDAKI_FORCEINLINE uint32_t block_rank_in_grid() {
#if GDAKI_DEVICE_PASS
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
#else
  const auto* c = host::current_context;
  return c ? c->block_idx.x + c->grid_dim.x * (c->block_idx.y + c->grid_dim.y * c->block_idx.z) : 0;
#endif
}

GDAKI_HD GDAKI_FORCEINLINE uint32_t blocks_in_grid() {
#if GDAKI_DEVICE_PASS
  return gridDim.x * gridDim.y * gridDim.z;
#else
  const auto* c = host::current_context;
  return c ? c->grid_dim.count() : 1;
#endif
}

GDAKI_HD GDAKI_FORCEINLINE void warp_sync() {
#if GDAKI_DEVICE_PASS
  __syncwarp(warp_mask());
#else
  if (auto* c = host::current_context) c->warp->barrier.arrive_and_wait();
#endif
}

// Bit i set when lane i passed a true predicate.
GDAKI_HD GDAKI_FORCEINLINE uint32_t warp_ballot(bool pred) {
#if GDAKI_DEVICE_PASS
  return __ballot_sync(warp_mask(), pred);
#else
  auto* c = host::current_context;
  if (!c) return pred ? 1u : 0u;
  c->warp->slots[c->lane] = pred ? 1 : 0;
  c->warp->barrier.arrive_and_wait();
  uint32_t mask = 0;
  for (uint32_t l = 0; l < c->warp->nlanes; ++l) mask |= (c->warp->slots[l] ? 1u : 0u) << l;
  c->warp->barrier.arrive_and_wait();  // slots are reused by the next warp call
  return mask;
#endif
}

// True when any lane of the warp passed a true predicate.
GDAKI_HD GDAKI_FORCEINLINE bool warp_any(bool pred) { return warp_ballot(pred) != 0; }

// Value of v held by lane src.
GDAKI_HD GDAKI_FORCEINLINE uint64_t warp_shfl(uint64_t v, uint32_t src) {
#if GDAKI_DEVICE_PASS
  return __shfl_sync(warp_mask(), static_cast<unsigned long long>(v), static_cast<int>(src));
#else
  auto* c = host::current_context;
  if (!c) return v;
  c->warp->slots[c->lane] = v;
  c->warp->barrier.arrive_and_wait();
  const uint64_t r = c->warp->slots[src < c->warp->nlanes ? src : 0];
  c->warp->barrier.arrive_and_wait();
  return r;
#endif
}

// Exclusive prefix sum of v across the warp's lanes, and the total in *total.
GDAKI_HD GDAKI_FORCEINLINE uint32_t warp_exclusive_sum(uint32_t v, uint32_t* total) {
#if GDAKI_DEVICE_PASS
  const uint32_t lane = lane_id();
  const uint32_t mask = warp_mask();
  uint32_t inclusive = v;
  for (uint32_t d = 1; d < warp_size; d <<= 1) {
    const uint32_t n = __shfl_up_sync(mask, inclusive, d);
    if (lane >= d) inclusive += n;
  }
  *total = __shfl_sync(mask, inclusive, static_cast<int>(warp_lanes() - 1));
  return inclusive - v;
#else
  auto* c = host::current_context;
  if (!c) {
    *total = v;
    return 0;
  }
  c->warp->slots[c->lane] = v;
  c->warp->barrier.arrive_and_wait();
  uint32_t before = 0, sum = 0;
  for (uint32_t l = 0; l < c->warp->nlanes; ++l) {
    if (l == c->lane) before = sum;
    sum += static_cast<uint32_t>(c->warp->slots[l]);
  }
  c->warp->barrier.arrive_and_wait();
  *total = sum;
  return before;
#endif
}

GDAKI_HD GDAKI_FORCEINLINE void block_sync() {
#if GDAKI_DEVICE_PASS
  __syncthreads();
#else
  if (auto* c = host::current_context) c->block->barrier.arrive_and_wait();
#endif
}

// Exclusive prefix sum of v over the block's threads (in thread-rank order), and the
// block total in *total. Every thread of the block must call it.
GDAKI_HD inline uint32_t block_exclusive_sum(uint32_t v, uint32_t* total) {
#if GDAKI_DEVICE_PASS
  __shared__ uint32_t warp_totals[32];
  uint32_t warp_total;
  const uint32_t in_warp = warp_exclusive_sum(v, &warp_total);
  const uint32_t warp = thread_rank_in_block() / warp_size;
  if (lane_id() == 0) warp_totals[warp] = warp_total;
  __syncthreads();
  uint32_t before = 0, sum = 0;
  const uint32_t warps = (threads_in_block() + warp_size - 1) / warp_size;
  for (uint32_t w = 0; w < warps; ++w) {
    if (w == warp) before = sum;
    sum += warp_totals[w];
  }
  __syncthreads();  // warp_totals is reused by the next call
  *total = sum;
  return before + in_warp;
#else
  auto* c = host::current_context;
  if (!c) {
    *total = v;
    return 0;
  }
  const uint32_t me = thread_rank_in_block();
  c->block->slots[me] = v;
  c->block->barrier.arrive_and_wait();
  uint32_t before = 0, sum = 0;
  for (uint32_t t = 0; t < threads_in_block(); ++t) {
    if (t == me) before = sum;
    sum += static_cast<uint32_t>(c->block->slots[t]);
  }
  c->block->barrier.arrive_and_wait();
  *total = sum;
  return before;
#endif
}

// True when any thread of the block passed a true predicate. Every thread must call it.
GDAKI_HD inline bool block_any(bool pred) {
#if GDAKI_DEVICE_PASS
  return __syncthreads_or(pred ? 1 : 0) != 0;
#else
  auto* c = host::current_context;
  if (!c) return pred;
  c->block->slots[thread_rank_in_block()] = pred ? 1 : 0;
  c->block->barrier.arrive_and_wait();
  bool any = false;
  for (uint32_t t = 0; t < threads_in_block(); ++t) any = any || c->block->slots[t] != 0;
  c->block->barrier.arrive_and_wait();  // slots are reused by the next block call
  return any;
#endif
}

// Value of v held by the thread of rank src in the block. Every thread must call it.
GDAKI_HD inline uint64_t block_broadcast(uint64_t v, uint32_t src) {
#if GDAKI_DEVICE_PASS
  __shared__ uint64_t slot;
  if (thread_rank_in_block() == src) slot = v;
  __syncthreads();
  const uint64_t r = slot;
  __syncthreads();
  return r;
#else
  auto* c = host::current_context;
  if (!c) return v;
  if (thread_rank_in_block() == src) c->block->slots[0] = v;
  c->block->barrier.arrive_and_wait();
  const uint64_t r = c->block->slots[0];
  c->block->barrier.arrive_and_wait();
  return r;
#endif
}

}  // namespace gdaki::dev::arch
