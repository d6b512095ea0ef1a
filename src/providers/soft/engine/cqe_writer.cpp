// The CQE writer.
#include "cqe_writer.hpp"

#include <cstring>

#include "../soft_objects.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/prm/endian.hpp"

namespace gdaki::soft {

cq_write write_cqe(soft_cq& cq, const cqe_fields& f) {
  std::lock_guard lk(cq.mu);
  if (cq.dead || cq.error.load(std::memory_order_relaxed)) return cq_write::dropped;
  const uint32_t n = 1u << cq.log_n;
  if (!cq.ignore_overrun) {
    // set_ci is the poller's 24-bit consumer index (PRM 5.5); p - ci >= N is an overrun.
    const uint32_t ci = prm::from_be(prm::be32{dev::arch::load_acquire(&cq.dbrec->set_ci.raw)}) & prm::cq_ci_mask;
    const uint32_t used = (static_cast<uint32_t>(cq.pi) - ci) & prm::cq_ci_mask;
    // A consumer index behind one read before went backwards: pollers published out of
    // order. A ConnectX would take the smaller value at its word and, sooner or later,
    // overrun; we report it at once, as the overrun it is (core_cq_ci.*, tests/core).
    const uint32_t back = (cq.seen_ci - ci) & prm::cq_ci_mask;
    const bool went_back = back != 0 && back <= (prm::cq_ci_mask >> 1);
    cq.seen_ci = ci;
    if (used >= n || went_back) {
      cq.error.store(true);
      return cq_write::overrun;
    }
  }
  prm::cqe64 c{};
  const bool is_err = prm::cqe_is_error(f.opcode);
  if (is_err) {
    auto* e = reinterpret_cast<prm::err_cqe*>(&c);
    e->srqn = prm::to_be32(f.user_index & 0xffffff);
    e->syndrome = static_cast<uint8_t>(f.synd);
    e->vendor_err_synd = 0;  // 0x93 would mean an ODP fault to rdma-core: never
    e->s_wqe_opcode_qpn = prm::to_be32((static_cast<uint32_t>(f.wqe_opcode) << 24) | (f.qpn & 0xffffff));
  } else {
    c.flags_rqpn = prm::to_be32(f.src_qpn & 0xffffff);
    c.srqn_uidx = prm::to_be32(f.user_index & 0xffffff);
    c.imm_inval_pkey = f.imm_raw;
    c.byte_cnt = prm::to_be32(f.byte_cnt);
    c.sop_drop_qpn = prm::to_be32((static_cast<uint32_t>(f.wqe_opcode) << 24) | (f.qpn & 0xffffff));
    // Scatter-to-CQE: the payload takes the CQE's first bytes, over the fields there (a
    // payload longer than 24 bytes covers flags_rqpn, as on a ConnectX: rdma-core and UCX
    // read it from the CQE's start, cq.c handle_responder / rc_mlx5 iface).
    if (f.inline_payload != nullptr) std::memcpy(&c, f.inline_payload, f.byte_cnt);
  }
  const uint8_t owner = static_cast<uint8_t>((cq.pi >> cq.log_n) & 1);
  const uint8_t format = !is_err && f.inline_payload != nullptr ? prm::cqe_inline_scatter_32 : 0;
  const uint8_t op_own = static_cast<uint8_t>((static_cast<uint8_t>(f.opcode) << 4) | format |
                                              (f.solicited ? prm::cqe_se_mask : 0) | owner);
  uint8_t* slot = reinterpret_cast<uint8_t*>(cq.cqes + (cq.pi & (n - 1)));
  std::memcpy(slot, &c, 60);
  // Bytes 60..63 as one little-endian word: wqe_counter (BE16), signature 0, op_own. The
  // release store orders the body above before it; pollers acquire this word.
  const uint32_t tail = static_cast<uint32_t>(prm::to_be16(f.wqe_counter).raw) | (static_cast<uint32_t>(op_own) << 24);
  dev::arch::store_release(reinterpret_cast<uint32_t*>(slot + 60), tail);
  ++cq.pi;
  return cq_write::ok;
}

}  // namespace gdaki::soft
