// internal: the responder side of one request (PRM 4, 6.4-6.6). Every check (QP access
// flags, rkey, PD, bounds, MR permission, alignment, receive WQE capacity and keys) runs
// before any byte lands. Remote-detected errors move the responder QP to ERR.
#pragma once

#include <cstdint>

#include "gdaki/prm/cqe.hpp"
#include "wqe_parse.hpp"

namespace gdaki::soft {

struct soft_qp;

struct respond_result {
  prm::syndrome req = prm::syndrome::none;  // what the requester's CQE reports
  bool rnr = false;                          // no receive WQE: RNR NAK
  uint8_t rnr_timer = 0;                     // the responder's min_rnr_timer (IBA code)
};

// Executes w (already parsed, local keys checked) from `req` at `resp`. The caller holds
// req.exec_mu, the key table's shared lock and resp.resp_mu; resp is live, in RTR or RTS,
// and connected to req.
respond_result respond(soft_qp& req, const wqe_reader& r, const parsed_wqe& w, soft_qp& resp);

}  // namespace gdaki::soft
