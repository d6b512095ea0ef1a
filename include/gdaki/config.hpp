// Compilation-target macros shared by every header that must build three ways:
// nvcc device code, nvcc host code and plain g++/clang++ host code.
#pragma once

#if defined(__CUDACC__)
#define GDAKI_HD __host__ __device__
#define GDAKI_DEVICE __device__
#else
#define GDAKI_HD
#define GDAKI_DEVICE
#endif

// True while compiling the device half of a CUDA translation unit.
#if defined(__CUDA_ARCH__)
#define GDAKI_DEVICE_PASS 1
#else
#define GDAKI_DEVICE_PASS 0
#endif

#if defined(__CUDACC__) || defined(__GNUC__)
#define GDAKI_FORCEINLINE inline __attribute__((always_inline))
#else
#define GDAKI_FORCEINLINE inline
#endif

// A slow path kept out of its caller, so the fast path around it stays small enough to
// inline and saves no registers for a loop it rarely enters.
#if defined(__CUDACC__) || defined(__GNUC__)
#define GDAKI_NOINLINE inline __attribute__((noinline))
#else
#define GDAKI_NOINLINE inline
#endif
