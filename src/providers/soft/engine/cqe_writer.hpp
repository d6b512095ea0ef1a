// internal: writing CQEs (PRM 5). Every field is filled; bytes 0..59 are written first and
// bytes 60..63 (wqe_counter, signature, op_own with the owner bit) last, in one release
// store, which is what pollers acquire.
#pragma once

#include <cstdint>

#include "gdaki/prm/cqe.hpp"

namespace gdaki::soft {

struct soft_cq;

struct cqe_fields {
  prm::cqe_opcode opcode = prm::cqe_opcode::req;
  prm::syndrome synd = prm::syndrome::none;  // error CQEs only
  uint8_t wqe_opcode = 0;  // REQ / REQ_ERR: opcode of the send WQE
  uint32_t qpn = 0;        // local QPN
  uint32_t src_qpn = 0;    // responder CQEs: the remote QPN
  uint32_t byte_cnt = 0;
  uint32_t imm_raw = 0;    // responder CQEs with immediate: raw wire bytes
  uint32_t user_index = 0;
  uint16_t wqe_counter = 0;
  bool solicited = false;  // responder CQEs: the sender's SE bit
  // Responder CQEs of a scatter-to-CQE QP: the byte_cnt (<= 32) payload bytes, written at
  // CQE bytes 0.. with the 32-byte inline-scatter format (PRM 5.1); null otherwise.
  const uint8_t* inline_payload = nullptr;
};

enum class cq_write { ok, dropped, overrun };

// Writes one CQE. Returns ok; dropped when the CQ was destroyed or is already in error;
// overrun when the CQ has no ignore_overrun and set_ci shows no room or moved backwards
// (the CQ then goes to error, and the caller moves its QP to ERR).
cq_write write_cqe(soft_cq& cq, const cqe_fields& f);

}  // namespace gdaki::soft
