// Compile-only check: every data-path entry point called from a __global__ kernel, built
// for sm_90 whenever nvcc is present. Proves the headers are valid device code.
#include "gdaki/device/datapath.hpp"
#include "gdaki/prm/eth.hpp"

using namespace gdaki;
using namespace gdaki::dev;

__global__ void every_entry_point(qp_handle* qp, cq_handle* cq, uint64_t raddr, uint32_t rkey, uint64_t laddr,
                                  uint32_t lkey, uint64_t* out) {
  sge g{laddr, 64, lkey};
  const sge two[2] = {g, g};
  uint64_t start = 0;
  if (sq_acquire(*qp, wqebbs_rdma(2), &start) != status::ok) return;
  prepare_write(*qp, start, raddr, rkey, two, 2, prm::ctrl_flags::cq_update);
  prepare_nop(*qp, start, 0);
  prepare_write_imm(*qp, start, raddr, rkey, &g, 1, 0x01020304u, prm::ctrl_flags::cq_update);
  const uint32_t value = 7;
  prepare_write_inline(*qp, start, raddr, rkey, &value, sizeof value, prm::ctrl_flags::cq_update);
  prepare_read(*qp, start, raddr, rkey, &g, 1, prm::ctrl_flags::cq_update);
  prepare_atomic_fa(*qp, start, raddr, rkey, 1, g, prm::ctrl_flags::cq_update);
  prepare_atomic_cs(*qp, start, raddr, rkey, 0, 1, g, prm::ctrl_flags::cq_update);
  prepare_masked_cs(*qp, start, raddr, rkey, 8, 0, ~0ull, 1, ~0ull, g, prm::ctrl_flags::cq_update);
  prepare_masked_fa(*qp, start, raddr, rkey, 4, 1, 0, g, prm::ctrl_flags::cq_update);
  prepare_send(*qp, start, &g, 1, prm::ctrl_flags::cq_update);
  prepare_send_imm(*qp, start, &g, 1, 0x0a0b0c0du, prm::ctrl_flags::cq_update);
  prepare_send_inline(*qp, start, &value, sizeof value, prm::ctrl_flags::cq_update);
  const uint64_t reserved = sq_reserve(*qp, 1);
  (void)sq_wait_space(*qp, reserved, 1, 1000);
  sq_mark_ready(*qp, start, wqebbs_rdma(2));
  sq_submit(*qp);
  const uint64_t ticket = sq_commit(*qp, reserved, 1);
  out[0] = static_cast<uint64_t>(sq_test(*qp, ticket));
  out[1] = static_cast<uint64_t>(sq_wait(*qp, ticket, 1000000));
  out[2] = static_cast<uint64_t>(sq_quiet(*qp, 1000000));
  out[3] = sq_progress(*qp);
  completion c;
  out[4] = static_cast<uint64_t>(sq_poll(*qp, &c));
  out[5] = static_cast<uint64_t>(rq_post(*qp, &g, 1));
  out[6] = static_cast<uint64_t>(rq_poll(*qp, &c));
  out[7] = static_cast<uint64_t>(cq_poll_one(*cq, &c));
  out[8] = arch::warp_ballot(threadIdx.x & 1) + arch::warp_shfl(out[0], 0) + arch::lane_id() + arch::clock_ns();
  uint32_t total;
  out[9] = arch::warp_exclusive_sum(1, &total) + total + arch::block_rank_in_grid() + arch::blocks_in_grid();
  arch::warp_sync();
  arch::block_sync();
  out[10] = widen16(reserved, c.wqe_counter) + ring_before<16>(1, 2);
  out[11] = to_string(status::ok)[0];
}

// The device API (ops.hpp) at every scope and sharing mode.
template <typename Scope, sharing S>
__device__ void device_api_calls(qp_handle& qp, remote_ptr r, local_ptr l, uint64_t* out) {
  uint64_t t = 0;
  const uint64_t v = 42;
  out[0] += static_cast<uint64_t>(put<Scope, S>(qp, r, l, 4096, &t));
  out[0] += static_cast<uint64_t>(p<Scope, S>(qp, r, &v, sizeof v, &t));
  out[0] += static_cast<uint64_t>(put_signal<Scope, S>(qp, r, l, 64, r, signal_op::add, 1, &t));
  out[0] += static_cast<uint64_t>(signal<Scope, S>(qp, r, signal_op::set, 1, &t));
  out[0] += static_cast<uint64_t>(get<Scope, S>(qp, l, r, 64, &t));
  out[0] += static_cast<uint64_t>(atomic_fetch_add<Scope, S>(qp, r, 1, l, &t));
  out[0] += static_cast<uint64_t>(atomic_compare_swap<Scope, S>(qp, r, 0, 1, l, &t));
  uint64_t old = 0;
  out[0] += static_cast<uint64_t>(atomic_fetch_add_wait<Scope, S>(qp, r, 1, l, &old, 1000));
  out[0] += static_cast<uint64_t>(atomic_compare_swap_wait<Scope, S>(qp, r, 0, 1, l, &old, 1000));
  out[0] += static_cast<uint64_t>(fence<Scope, S>(qp));
  out[0] += static_cast<uint64_t>(quiet<Scope, S>(qp, 1000));
  out[0] += static_cast<uint64_t>(test(qp, t)) + static_cast<uint64_t>(wait(qp, t, 1000)) + old;
  out[0] += static_cast<uint64_t>(last_error(qp).syndrome);
  // DMA queue (dma.hpp) and two-sided verbs (twosided.hpp).
  out[0] += static_cast<uint64_t>(dma_memcpy<Scope, S>(qp, r.addr, r.rkey, l.addr, l.lkey, 4096, &t));
  out[0] += static_cast<uint64_t>(dma_test(qp, t)) + static_cast<uint64_t>(dma_wait(qp, t, 1000));
  out[0] += static_cast<uint64_t>(dma_quiet<Scope, S>(qp, 1000)) + static_cast<uint64_t>(dma_last_error(qp).syndrome);
  out[0] += static_cast<uint64_t>(send<Scope, S>(qp, l, 64, &t));
  out[0] += static_cast<uint64_t>(send_imm<Scope, S>(qp, l, 64, 0x01020304u, &t));
  out[0] += static_cast<uint64_t>(send_inline<Scope, S>(qp, &v, sizeof v, true, 7, &t));
}

// Receives (twosided.hpp): thread-scope calls.
__global__ void receive_calls(qp_handle* qp, local_ptr l, uint64_t* out) {
  recv_completion c;
  out[0] = static_cast<uint64_t>(recv_post(*qp, l, 64));
  out[1] = static_cast<uint64_t>(recv_poll(*qp, &c));
  out[2] = static_cast<uint64_t>(recv_wait(*qp, &c, 1000)) + c.byte_cnt + c.imm_raw + c.index + c.payload[0];
}

// Shared receive queues (sq.hpp, twosided.hpp): thread-scope calls.
__global__ void srq_calls(srq_handle* srq, const sge* g, local_ptr l, uint64_t* out) {
  uint32_t index = 0;
  out[0] = static_cast<uint64_t>(srq_post(*srq, g, 1, &index));
  out[1] = static_cast<uint64_t>(srq_free(*srq, index));
  out[2] = static_cast<uint64_t>(recv_post(*srq, l, 64, &index)) + index + srq_wqes(*srq);
}

__global__ void device_api(qp_handle* qp, remote_ptr r, local_ptr l, uint64_t* out) {
  device_api_calls<scope_thread, sharing::exclusive>(*qp, r, l, out);
  device_api_calls<scope_thread, sharing::grid>(*qp, r, l, out);
  device_api_calls<scope_warp, sharing::exclusive>(*qp, r, l, out);
  device_api_calls<scope_warp, sharing::block>(*qp, r, l, out);
  device_api_calls<scope_block, sharing::exclusive>(*qp, r, l, out);
  device_api_calls<scope_block, sharing::grid>(*qp, r, l, out);
}

// mlx5 raw-packet Ethernet formats (prm/eth.hpp): a thread builds a send WQE into an SQ
// ring and decodes a receive CQE.
__global__ void mlx5_eth_formats(uint8_t* ring, const uint8_t* frame, uint32_t len, const void* cqe,
                                 uint64_t* out) {
  const uint32_t inl = prm::eth_min_inline_bytes(prm::eth_inline_mode::tcp_udp, frame, len);
  out[0] = prm::write_eth_send(ring, 6, threadIdx.x, 0x123, frame, len, 0x55, inl, prm::ctrl_flags::cq_update);
  const prm::eth_rx_completion c = prm::decode_eth_rx_cqe(cqe);
  out[1] = c.byte_count + c.wqe_counter + c.rss_hash + c.rss_hash_type + static_cast<uint32_t>(c.opcode);
}
