// Compile-only check: the communicator's device API inside __global__ kernels for sm_90:
// the MoE dispatch/combine bodies of the example, and every call at every scope.
#include "gdaki/comm/device.hpp"
#include "moe_alltoall_kernels.hpp"

namespace comm = gdaki::comm;

__global__ void moe_dispatch(moe::args a) { (void)moe::dispatch(a); }
__global__ void moe_combine(moe::args a) { (void)moe::combine(a); }

template <typename Scope>
__global__ void every_call(const comm::dev_comm* c, comm::window_t w, int* out) {
  if (comm::check_abi(c) != gdaki::status::ok) return;
  const comm::dev_comm& d = *c;
  int bad = 0;
  bad += comm::put<Scope>(d, 0, d.world, 0, w, 0, w, 64, 64, comm::signal_inc(0), comm::counter_inc(0)) != gdaki::status::ok;
  bad += comm::put_value<Scope>(d, 0, d.world, 0, w, 0, uint32_t{7}, comm::signal_set(1, 3)) != gdaki::status::ok;
  bad += comm::get<Scope>(d, 0, d.world, 0, w, 0, w, 64, 64, comm::counter_inc(1)) != gdaki::status::ok;
  bad += comm::signal<Scope>(d, 0, d.world, 0, comm::signal_add(2, 5)) != gdaki::status::ok;
  bad += comm::flush<Scope>(d, 0) != gdaki::status::ok;
  bad += comm::quiet<Scope>(d, 0) != gdaki::status::ok;
  bad += comm::wait_signal<Scope>(d, 0, 1) != gdaki::status::ok;
  bad += comm::wait_counter<Scope>(d, 0, 1) != gdaki::status::ok;
  bad += comm::barrier<Scope>(d, 0, d.world) != gdaki::status::ok;
  bad += comm::read_signal(d, 0) == 0;
  bad += comm::read_counter(d, 0) == 0;
  bad += comm::reset_signal(d, 0) != gdaki::status::ok;
  bad += comm::reset_counter(d, 0) != gdaki::status::ok;
  bad += comm::raw_qp(d, 0, 0) == nullptr;
  bad += comm::world_to_team(d.world, comm::team_to_world(d.world, 0));
  comm::flush_request r;
  if (comm::flush_async(d, 0, &r) == gdaki::status::ok) bad += comm::test(d, r) != gdaki::status::ok;
  if (bad) atomicAdd(out, bad);
}

template __global__ void every_call<comm::scope_thread>(const comm::dev_comm*, comm::window_t, int*);
template __global__ void every_call<comm::scope_warp>(const comm::dev_comm*, comm::window_t, int*);
template __global__ void every_call<comm::scope_block>(const comm::dev_comm*, comm::window_t, int*);
