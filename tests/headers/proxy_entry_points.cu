// Compile-only check: every proxy-ring producer and completion entry point called from a
// __global__ kernel, built for sm_90 whenever nvcc is present. Proves the descriptor and
// ring headers are valid device code (GPU threads are the ring's producers).
#include "gdaki/proxy/descriptor.hpp"
#include "gdaki/proxy/ring.hpp"

using namespace gdaki;
using namespace gdaki::proxy;

__global__ void proxy_producer(ring_handle ring, uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey,
                               uint64_t* out) {
  const uint16_t peer = static_cast<uint16_t>(blockIdx.x);
  const uint16_t counter = static_cast<uint16_t>(threadIdx.x % ring.num_counters);
  descriptor d[] = {
      make_put(peer, raddr, rkey, laddr, lkey, 4096, counter),
      make_put_inline(peer, raddr, rkey, 1, 2, 12, counter),
      make_get(peer, laddr, lkey, raddr, rkey, 64, counter, desc_flags::fence),
      make_signal(peer, raddr, rkey, false, 1, counter),
      make_put_signal(peer, raddr, rkey, laddr, lkey, 64, raddr + 64, rkey, true, 7, counter),
      make_fetch_add(peer, raddr, rkey, 1, laddr, lkey, counter),
      make_compare_swap(peer, raddr, rkey, 0, 1, laddr, lkey, counter),
      make_barrier(true, counter),
  };
  uint64_t acc = 0;
  for (const descriptor& one : d) {
    uint32_t pos = 0;
    acc += static_cast<uint64_t>(ring_push(ring, one, 1000000, &pos)) + pos;
  }
  uint32_t first = 0;
  if (ring_acquire(ring, 2, &first, wait_forever) == status::ok) {
    ring_write(ring, first, d[0]);
    ring_write(ring, first + 1, d[1]);
  }
  acc += static_cast<uint64_t>(ring_wait_counter(ring, counter, 8, 1000000));
  acc += ring_counter(ring, counter) + ring_capacity(ring) + descriptor_check(d[0]);
  uint32_t where = 0;
  acc += static_cast<uint64_t>(ring_error(ring, &where)) + where;
  acc += static_cast<uint64_t>(validate(d[0], 0)) + to_string(d[0].op)[0] + to_string(descriptor_fault::none)[0];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// The consumer half compiles for the device too (a GPU-side consumer is not planned, but
// the header promises GDAKI_HD throughout).
__global__ void proxy_consumer(ring_handle ring, uint64_t* out) {
  descriptor d;
  descriptor_fault f;
  uint64_t acc = static_cast<uint64_t>(ring_peek(ring, 0, &d, &f));
  ring_release(ring, 1, 1);
  ring_complete(ring, 0, 1);
  ring_record_fault(ring, status::io_error, 0);
  ring_close(ring);
  out[0] = acc;
}
