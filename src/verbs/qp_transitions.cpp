// The RC state machine table (ibv_modify_qp(3), IBA 10.3.1). See qp_transitions.hpp.
#include "qp_transitions.hpp"

namespace gdaki::verbs::detail {

namespace {

struct row {
  qp_state from, to;
  transition_rule rule;
};

namespace m = qp_attr_mask;
// ibv_modify_qp(3), RC columns; any -> ERR and any -> RESET are handled apart.
constexpr uint32_t rts_like_optional = m::cur_state | m::access_flags | m::min_rnr_timer | m::alt_path | m::path_mig_state;
constexpr row rows[] = {
    {qp_state::reset, qp_state::init, {m::reset_to_init, 0}},
    {qp_state::init, qp_state::init, {m::state, m::pkey_index | m::port | m::access_flags}},
    {qp_state::init, qp_state::rtr, {m::init_to_rtr, m::alt_path | m::access_flags | m::pkey_index}},
    {qp_state::rtr, qp_state::rts, {m::rtr_to_rts, rts_like_optional}},
    {qp_state::rts, qp_state::rts, {m::state, rts_like_optional}},
    {qp_state::rts, qp_state::sqd, {m::state, m::en_sqd_async_notify}},
    {qp_state::sqd, qp_state::rts, {m::state, rts_like_optional}},
    {qp_state::sqd, qp_state::sqd,
     {m::state, m::cur_state | m::av | m::alt_path | m::access_flags | m::pkey_index | m::port | m::path_mig_state |
                    m::timeout | m::retry_cnt | m::rnr_retry | m::max_qp_rd_atomic | m::max_dest_rd_atomic |
                    m::min_rnr_timer}},
    {qp_state::sqe, qp_state::rts, {m::state, m::cur_state | m::access_flags | m::min_rnr_timer}},
};

}  // namespace

const transition_rule* rc_transition(qp_state from, qp_state to) {
  static constexpr transition_rule state_alone{m::state, 0};
  if (to == qp_state::err || to == qp_state::reset) return &state_alone;
  for (const row& r : rows) {
    if (r.from == from && r.to == to) return &r.rule;
  }
  return nullptr;
}

bool transition_modelled(qp_state from, qp_state to) {
  if (rc_transition(from, to) == nullptr) return false;
  const auto drained_or_stopped = [](qp_state s) { return s == qp_state::sqd || s == qp_state::sqe; };
  return !drained_or_stopped(to) && !(drained_or_stopped(from) && to != qp_state::err && to != qp_state::reset);
}

std::string attribute_names(uint32_t mask) {
  // Named as qp_attr's fields where there is one, else as ibv_qp_attr_mask's suffix.
  static constexpr const char* names[21] = {
      "state",     "cur_state",    "en_sqd_async_notify", "access_flags",     "pkey_index", "port_num",
      "qkey",      "av (path to the peer)", "path_mtu",   "timeout",          "retry_cnt",  "rnr_retry",
      "rq_psn",    "max_rd_atomic", "alt_path",           "min_rnr_timer",    "sq_psn",     "max_dest_rd_atomic",
      "path_mig_state", "cap",     "dest_qp_num"};
  std::string out;
  for (uint32_t b = 0; b < 32; ++b) {
    if ((mask & (1u << b)) == 0) continue;
    if (!out.empty()) out += '|';
    out += b < 21 ? names[b] : "bit " + std::to_string(b);
  }
  return out;
}

}  // namespace gdaki::verbs::detail
