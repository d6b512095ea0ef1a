// Compile-only check: the device tests' kernel bodies (device_kernels.hpp) instantiated
// inside __global__ kernels and compiled for sm_90, so the code the CPU-thread tests run
// is the code a GPU would run.
#include "device/device_kernels.hpp"
#include "device/twosided_kernels.hpp"

using namespace device_test;
namespace d = gdaki::dev;

template <typename Scope, sharing S>
__global__ void matrix(matrix_args a) {
  matrix_kernel<Scope, S>(a);
}

template __global__ void matrix<d::scope_thread, sharing::exclusive>(matrix_args);
template __global__ void matrix<d::scope_thread, sharing::block>(matrix_args);
template __global__ void matrix<d::scope_thread, sharing::grid>(matrix_args);
template __global__ void matrix<d::scope_warp, sharing::exclusive>(matrix_args);
template __global__ void matrix<d::scope_warp, sharing::block>(matrix_args);
template __global__ void matrix<d::scope_warp, sharing::grid>(matrix_args);
template __global__ void matrix<d::scope_block, sharing::exclusive>(matrix_args);
template __global__ void matrix<d::scope_block, sharing::block>(matrix_args);
template __global__ void matrix<d::scope_block, sharing::grid>(matrix_args);

template <typename Scope, sharing S>
__global__ void deferred_put(deferred_args a) {
  deferred_put_kernel<Scope, S>(a);
}
template __global__ void deferred_put<d::scope_thread, sharing::exclusive>(deferred_args);
template __global__ void deferred_put<d::scope_thread, sharing::grid>(deferred_args);
template __global__ void deferred_put<d::scope_warp, sharing::grid>(deferred_args);
template __global__ void deferred_put<d::scope_block, sharing::block>(deferred_args);

__global__ void ordering(ordering_args a) { ordering_kernel(a); }
__global__ void stress(stress_args a) { stress_kernel(a); }
__global__ void stuck(stuck_args a) { stuck_kernel(a); }
template <typename Scope>
__global__ void disagreeing_qp(qp_handle* qps, remote_ptr dst, bool only_a_skipper, uint64_t* out) {
  disagreeing_qp_kernel<Scope>(qps, dst, only_a_skipper, out);
}
template __global__ void disagreeing_qp<d::scope_warp>(qp_handle*, remote_ptr, bool, uint64_t*);
template __global__ void disagreeing_qp<d::scope_block>(qp_handle*, remote_ptr, bool, uint64_t*);
__global__ void bad_inline_lane(qp_handle* qp, remote_ptr dst, uint32_t bad_lane, uint64_t* out) {
  bad_inline_lane_kernel(qp, dst, bad_lane, out);
}

// Two-sided calls (twosided_kernels.hpp).
__global__ void post_receives(recv_grid_args a) { post_receives_kernel(a); }
__global__ void wait_receives(recv_grid_args a, uint64_t timeout_ns) { wait_receives_kernel(a, timeout_ns); }
__global__ void post_many_receives(recv_grid_args a, uint32_t per_thread) { post_many_receives_kernel(a, per_thread); }
__global__ void post_srq_receives(srq_grid_args a) { post_srq_receives_kernel(a); }
__global__ void wait_srq_receives(srq_grid_args a, uint64_t timeout_ns) { wait_srq_receives_kernel(a, timeout_ns); }
__global__ void warp_send(qp_handle* qp, uint64_t src, uint32_t lkey, uint32_t bytes, uint32_t skip_lane,
                          uint64_t* log) {
  warp_send_kernel(qp, src, lkey, bytes, skip_lane, log);
}
