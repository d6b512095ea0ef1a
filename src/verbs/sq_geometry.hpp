// internal: the send-queue geometry checks every provider makes at QP creation, in one
// place so that soft and mlx5 refuse the same qp_init with the same words.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/wqe.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::verbs::detail {

struct sq_geometry {
  uint32_t max_wqe_wqebbs = 0;  // the largest WQE the QP may post
  uint32_t sq_wqebbs = 0;       // ring size: sq_wqebbs rounded up to a power of two
};

// The largest WQE is a WRITE with max_send_sge pointers, an inline WRITE of max_inline
// bytes, or an 8-byte masked CS (2 WQEBBs); it must fit one WQE (16 WQEBBs) and the ring.
// False with *why naming the limit that was crossed.
inline bool check_sq_geometry(const qp_init& in, sq_geometry* out, std::string* why) {
  if (in.max_send_sge > 30 || in.max_recv_sge > 30) {
    *why = "max_send_sge / max_recv_sge above the device's max_sge 30";
    return false;
  }
  uint32_t wqebbs = dev::wqebbs_rdma(in.max_send_sge);
  wqebbs = std::max(wqebbs, dev::wqebbs_write_inline(in.max_inline));
  wqebbs = std::max(wqebbs, dev::wqebbs_masked_cs(8));
  if (wqebbs > prm::max_wqebbs_per_wqe) {
    *why = "max_inline " + std::to_string(in.max_inline) + " / max_send_sge " + std::to_string(in.max_send_sge) +
           " need a WQE larger than 16 WQEBBs";
    return false;
  }
  const uint32_t sq_n = std::bit_ceil(in.sq_wqebbs);
  if (sq_n < wqebbs) {
    *why = "sq_wqebbs " + std::to_string(sq_n) + " cannot hold the largest WQE (" + std::to_string(wqebbs) + " WQEBBs)";
    return false;
  }
  out->max_wqe_wqebbs = wqebbs;
  out->sq_wqebbs = sq_n;
  return true;
}

}  // namespace gdaki::verbs::detail
