// The in-process executor's short path for a one-segment RDMA WRITE (fast_write.hpp).
#include "fast_write.hpp"

#include <cstdint>
#include <mutex>
#include <shared_mutex>

#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/prm/endian.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/qp.hpp"
#include "placement.hpp"
#include "responder_impl.hpp"
#include "wqe_parse.hpp"

namespace gdaki::soft {

bool try_fast_write(soft_qp& qp, const wqe_reader& r, const parsed_wqe& ctrl, uint32_t* bytes) {
  // The shape: RDMA WRITE, its own index, ctrl + raddr + one data segment in one WQEBB.
  if (ctrl.opcode != static_cast<uint8_t>(prm::send_opcode::rdma_write) ||
      ctrl.wqe_index != static_cast<uint16_t>(qp.sq_ci) || ctrl.ds < 3 || ctrl.ds > 4) {
    return false;
  }
  const auto a = r.read<prm::raddr_seg>(1);
  const auto d = r.read<prm::data_seg>(2);
  const uint32_t bc = prm::from_be(d.byte_count);
  const bool is_inline = (bc & prm::inline_flag) != 0;
  const uint32_t len = bc & ~prm::inline_flag;
  if (len == 0) return false;  // no key is checked for it: the general path's case
  if (!one_segment_write_shape(ctrl.ds, bc, qp.max_inline)) return false;  // a gather list, a bad inline
  soft_qp* peer = qp.peer.get();  // resolved by the general path's first WQE
  if (peer == nullptr || peer->qpn != qp.attr.dest_qp_num) return false;
  const uint64_t raddr = prm::from_be(a.raddr);
  const uint32_t rkey = prm::from_be(a.rkey);
  const uint64_t laddr = prm::from_be(d.addr);
  // Held until the bytes are placed: deregistration waits for it (as in execute_one).
  std::shared_lock keys_lock(keys().lock());
  if (!is_inline && !keys().local_range_ok(prm::from_be(d.lkey), qp.pd->pdn, laddr, len, false)) return false;
  std::lock_guard pl(peer->resp_mu);
  const uint32_t ps = peer->state.load(std::memory_order_acquire);
  if (peer->destroyed || (ps != state_of(verbs::qp_state::rtr) && ps != state_of(verbs::qp_state::rts)) ||
      peer->attr.dest_qp_num != qp.qpn || !(peer->attr.access_flags & verbs::access::remote_write) ||
      resp_detail::check_rkey(*peer, rkey, raddr, len, verbs::access::remote_write) == nullptr) {
    return false;
  }
  auto* to = reinterpret_cast<uint8_t*>(raddr);
  if (!is_inline) {
    place_piece(to, reinterpret_cast<const uint8_t*>(laddr), len);
  } else if (len <= 12) {
    // The payload follows the 4-byte count in the data segment's own 16-byte unit.
    place_piece(to, r.unit(2) + 4, len);
  } else {
    uint8_t tmp[64];
    if (len <= sizeof(tmp)) {
      r.copy_out(2 * 16 + 4, tmp, len);  // may straddle the ring's end
      place_piece(to, tmp, len);
    } else {
      r.copy_out(2 * 16 + 4, to, len);
    }
  }
  placement_done();
  *bytes = len;
  return true;
}

}  // namespace gdaki::soft
