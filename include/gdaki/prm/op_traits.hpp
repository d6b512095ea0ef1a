// What each send opcode is, in one table: the segments that follow its control segment,
// what crosses the wire each way, what the responder must have granted, and whether the
// soft NIC executes it. Every layer that used to keep its own opcode list reads this one:
// the WQE decoder (src/core/decode.cpp), the soft NIC's parser, executor and responder
// (src/providers/soft/engine), the soft wire's frame rules (wire_frame.cpp) and the verbs
// poster (src/ibverbs/verbs_post.cpp). tests/unit/op_traits_test.cpp holds every layer to
// it. docs/design.md, "Adding an opcode", says what else a new opcode needs: one entry
// here, one builder (device/wqe.hpp) and one executor case (the soft responder).
// Host and device (constexpr, no tables in memory).
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/prm/wqe.hpp"

namespace gdaki::prm {

// The segment layout family: the soft NIC's parser and responder dispatch on it.
enum class op_kind : uint8_t {
  unsupported,    // not modelled (SEND_INVAL, WAIT, UMR, ...): LOCAL_QP_OP_ERR
  nop,            // ctrl only; completes locally
  write,          // ctrl, raddr, data (pointer or inline)
  send,           // ctrl, data (pointer or inline)
  read,           // ctrl, raddr, data (pointer): the local scatter list
  atomic,         // ctrl, raddr, atomic (8 B operands), data: the 8 B result
  masked_atomic,  // ctrl, raddr, masked operands (opmod picks 4 or 8 B), data: the result
};

// The right the responder's QP and the memory key must grant.
enum class remote_right : uint8_t { none, write, read, atomic };

struct op_traits {
  const char* name;       // the PRM's name, as decoders print it ("RDMA_WRITE")
  op_kind kind;
  bool has_raddr;         // a remote-address segment follows the control segment
  bool inline_allowed;    // its data segments may be inline
  bool has_imm;           // ctrl.imm is immediate data delivered to the responder's CQE
  bool consumes_recv;     // the responder takes a receive WQE
  bool request_payload;   // the request carries the gather list's bytes to the responder
  bool response_payload;  // the response writes bytes into the local scatter list
  remote_right right;

  // The soft NIC executes it end to end (the wire frames it as a request).
  GDAKI_HD constexpr bool remote() const { return kind != op_kind::unsupported && kind != op_kind::nop; }
  GDAKI_HD constexpr bool is_atomic() const { return kind == op_kind::atomic || kind == op_kind::masked_atomic; }
};

GDAKI_HD constexpr op_traits traits_of(send_opcode op) {
  using k = op_kind;
  using r = remote_right;
  switch (op) {
    //                                   kind     raddr  inline imm    recv   req    resp   right
    case send_opcode::nop: return {"NOP", k::nop, false, false, false, false, false, false, r::none};
    case send_opcode::rdma_write: return {"RDMA_WRITE", k::write, true, true, false, false, true, false, r::write};
    case send_opcode::rdma_write_imm:
      return {"RDMA_WRITE_IMM", k::write, true, true, true, true, true, false, r::write};
    case send_opcode::send: return {"SEND", k::send, false, true, false, true, true, false, r::none};
    case send_opcode::send_imm: return {"SEND_IMM", k::send, false, true, true, true, true, false, r::none};
    case send_opcode::rdma_read: return {"RDMA_READ", k::read, true, false, false, false, false, true, r::read};
    case send_opcode::atomic_cs: return {"ATOMIC_CS", k::atomic, true, false, false, false, false, true, r::atomic};
    case send_opcode::atomic_fa: return {"ATOMIC_FA", k::atomic, true, false, false, false, false, true, r::atomic};
    case send_opcode::atomic_masked_cs:
      return {"ATOMIC_MASKED_CS", k::masked_atomic, true, false, false, false, false, true, r::atomic};
    case send_opcode::atomic_masked_fa:
      return {"ATOMIC_MASKED_FA", k::masked_atomic, true, false, false, false, false, true, r::atomic};
    case send_opcode::send_inval:
      return {"SEND_INVAL", k::unsupported, false, false, false, false, false, false, r::none};
    case send_opcode::wait: return {"WAIT", k::unsupported, false, false, false, false, false, false, r::none};
  }
  return {"UNKNOWN", k::unsupported, false, false, false, false, false, false, r::none};
}

// The opcode byte of a control segment (any value, as read off a ring or a wire).
GDAKI_HD constexpr op_traits traits_of(uint8_t opcode) { return traits_of(static_cast<send_opcode>(opcode)); }

}  // namespace gdaki::prm
