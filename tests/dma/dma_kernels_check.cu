// Compile-only check: the DMA tests' kernel bodies (dma_kernels.hpp) inside __global__
// kernels, built for sm_90, so the code the CPU-thread tests run is the code a GPU runs.
#include "dma/dma_kernels.hpp"

using namespace dma_test;

template <typename Scope>
__global__ void copy_slices(slices_args a) {
  copy_slices_kernel<Scope>(a);
}
template __global__ void copy_slices<gdaki::dev::scope_thread>(slices_args);
template __global__ void copy_slices<gdaki::dev::scope_warp>(slices_args);
template __global__ void copy_slices<gdaki::dev::scope_block>(slices_args);

__global__ void quiet_and_last_error(gdaki::dev::qp_handle* q, uint64_t* out) {
  out[0] = static_cast<uint64_t>(gdaki::dev::dma_quiet(*q, 1000));
  out[1] = static_cast<uint64_t>(gdaki::dev::dma_test(*q, 1));
  out[2] = static_cast<uint64_t>(gdaki::dev::dma_last_error(*q).syndrome);
}
