// Compile-only check: the eth test kernels and the example's kernels as CUDA kernels for
// sm_90, so the Ethernet and semaphore device API is the code a GPU would run.
#include "eth/eth_kernels.hpp"
#include "../examples/eth_udp_echo_kernels.hpp"

using namespace eth_test;
namespace d = gdaki::dev;

template <typename Scope>
__global__ void rx_pipeline(rx_pipeline_args a) {
  rx_pipeline_kernel<Scope>(a);
}
template __global__ void rx_pipeline<d::scope_warp>(rx_pipeline_args);
template __global__ void rx_pipeline<d::scope_block>(rx_pipeline_args);

template <typename Scope>
__global__ void tx(tx_args a, gdaki::status* result) {
  tx_kernel<Scope>(a, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x, result);
}
template __global__ void tx<d::scope_thread>(tx_args, gdaki::status*);
template __global__ void tx<d::scope_warp>(tx_args, gdaki::status*);
template __global__ void tx<d::scope_block>(tx_args, gdaki::status*);

__global__ void semaphore_calls(d::semaphore_handle s, uint32_t* out) {
  (void)d::semaphore_set_status(s, 0, d::semaphore_status::hold);
  out[0] = static_cast<uint32_t>(d::semaphore_get_status(s, 0));
  out[1] = static_cast<uint32_t>(d::semaphore_transition(s, 0, d::semaphore_status::hold, d::semaphore_status::done));
  out[2] = static_cast<uint32_t>(d::semaphore_wait_status(s, 0, d::semaphore_status::done, 1000));
}

__global__ void rx_calls(d::eth_rxq_handle* q, uint64_t* out) {
  uint64_t first = 0;
  uint32_t n = 0, bytes = 0;
  (void)d::eth_rxq_receive<d::scope_thread, d::sharing::grid>(*q, 4, 0, &first, &n);
  out[0] = first + n + d::eth_rxq_frame(*q, first, &bytes)[0];
  (void)d::eth_rxq_release<d::sharing::grid>(*q, first, n, 1000);
}

__global__ void tx_calls(d::eth_txq_handle* q, uint64_t addr, uint64_t* out) {
  uint64_t pos = 0;
  (void)d::eth_txq_send<d::scope_thread, d::sharing::exclusive>(*q, addr, 60, d::eth_send_flags::notify, &pos, 1000);
  (void)d::eth_txq_commit(*q);
  out[0] = static_cast<uint64_t>(d::eth_txq_wait(*q, pos, 1000)) + static_cast<uint64_t>(d::eth_txq_test(*q, pos));
}

__global__ void echo_receive(echo_args a) { echo_receive_kernel(a); }
__global__ void echo_send(echo_args a) { echo_send_kernel(a); }
