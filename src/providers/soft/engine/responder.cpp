// The responder of the in-process wire: the logic is responder_impl.hpp; the bytes move
// straight from the requester's WQE and buffers to the responder's (one copy).
#include "responder.hpp"

#include <cstring>

#include "responder_impl.hpp"

namespace gdaki::soft {

namespace {

struct inproc_xfer {
  const wqe_reader& r;
  const parsed_wqe& w;
  bool place(const dst_piece* d, uint32_t nd) {
    copy_message(r, w.sg, w.num_sg, d, nd);
    return true;
  }
  void read_out(const uint8_t* from, uint64_t n) {
    dst_piece dst[max_gather];
    for (uint32_t i = 0; i < w.num_sg; ++i) dst[i] = {reinterpret_cast<uint8_t*>(w.sg[i].addr), w.sg[i].length};
    copy_scatter(from, n, dst, w.num_sg);
  }
  void atomic_result(uint64_t old) {
    // The original value lands in host order (IBV_ATOMIC_HCA mode, PRM 6.4); a 4-byte one
    // is the low half of `old`, which on a little-endian host is its first 4 bytes.
    std::memcpy(reinterpret_cast<void*>(w.sg[0].addr), &old, w.atomic_size);
  }
};

}  // namespace

respond_result respond(soft_qp& req, const wqe_reader& r, const parsed_wqe& w, soft_qp& resp) {
  inproc_xfer x{r, w};
  return resp_detail::respond_with(req.qpn, w, resp, x);
}

}  // namespace gdaki::soft
