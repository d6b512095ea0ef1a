// The RC QP state machine of IBA 10.3.1 as ibv_modify_qp(3) tabulates it: which
// transitions are legal and which attributes each one requires and permits. The one
// machine of the control path: qp::modify checks every provider's QPs against it (the
// providers only carry transitions out), and the ibverbs layer reaches it through
// qp::modify. Control-path internal.
#pragma once

#include <cstdint>
#include <string>

#include "gdaki/verbs/qp.hpp"

namespace gdaki::verbs::detail {

struct transition_rule {
  uint32_t required;  // qp_attr_mask bits the transition needs
  uint32_t optional;  // bits it also accepts
};

// The rule for an RC QP going from `from` to `to`, or nullptr when IBA forbids it.
// any -> ERR and any -> RESET need the state alone.
const transition_rule* rc_transition(qp_state from, qp_state to);

// Whether gdaki's QPs make a legal transition: every one but those into and out of the
// send-queue-drained (SQD) and send-queue-error (SQE) states, which no provider models.
bool transition_modelled(qp_state from, qp_state to);

// The qp_attr_mask bits gdaki's qp_attr carries; IBA's others (alternate path, path
// migration, CUR_STATE, SQD notification, Q_Key, capabilities) have no field to set.
inline constexpr uint32_t modelled_attributes =
    qp_attr_mask::state | qp_attr_mask::access_flags | qp_attr_mask::pkey_index | qp_attr_mask::port |
    qp_attr_mask::av | qp_attr_mask::path_mtu | qp_attr_mask::timeout | qp_attr_mask::retry_cnt |
    qp_attr_mask::rnr_retry | qp_attr_mask::rq_psn | qp_attr_mask::max_qp_rd_atomic | qp_attr_mask::min_rnr_timer |
    qp_attr_mask::sq_psn | qp_attr_mask::max_dest_rd_atomic | qp_attr_mask::dest_qpn;

// The names of the attributes in mask, "dest_qp_num|rq_psn", for error messages.
std::string attribute_names(uint32_t mask);

}  // namespace gdaki::verbs::detail
