// RC queue pairs: creation, modify (checked here for every provider against the one state
// machine, qp_transitions.hpp), export.
#include "gdaki/verbs/qp.hpp"

#include <cstdio>
#include <string>

#include "gdaki/device/handles.hpp"
#include "gdaki/verbs/srq.hpp"

#include "object_ref.hpp"
#include "qp_transitions.hpp"

namespace gdaki::verbs {

const char* to_string(qp_state s) {
  switch (s) {
    case qp_state::reset: return "RESET";
    case qp_state::init: return "INIT";
    case qp_state::rtr: return "RTR";
    case qp_state::rts: return "RTS";
    case qp_state::sqd: return "SQD";
    case qp_state::sqe: return "SQE";
    case qp_state::err: return "ERR";
  }
  return "UNKNOWN";
}

namespace {

std::string hex6(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%06x", v);
  return b;
}

// The auto-signal period an export gets (dev::qp_handle::auto_signal_wqebbs).
uint32_t auto_signal_period(const std::string& who, const dev::qp_handle& h, uint32_t requested) {
  if (requested == qp_export_options::no_auto_signal) return 0;
  const uint32_t ring = dev::sq_wqebbs(h);
  // Liveness: a poster waiting for room at `start` needs completed >= start + nbb - ring;
  // the last signalled WQE before it ends past start - period, so period + nbb - 1 <= ring.
  const uint32_t largest_wqe = h.max_send_wqebbs == 0 ? 1 : h.max_send_wqebbs;
  uint32_t limit = ring / 2;
  if (ring + 1 >= largest_wqe && ring + 1 - largest_wqe < limit) limit = ring + 1 - largest_wqe;
  if (limit == 0) limit = 1;
  if (requested == 0) {
    uint32_t p = 1;
    while (p * 2 <= limit) p *= 2;
    return p;
  }
  if ((requested & (requested - 1)) != 0 || requested > limit) {
    throw error(status::invalid, who + ": export: auto_signal_wqebbs " + std::to_string(requested) +
                                     " must be a power of two <= " + std::to_string(limit) + " (ring of " +
                                     std::to_string(ring) + " WQEBBs, largest WQE " + std::to_string(largest_wqe) +
                                     " WQEBBs)");
  }
  return requested;
}

}  // namespace

qp::qp(const pd& p, const qp_init& init) {
  const auto& r = detail::need(p.ref(), "pd");
  const std::string where = r.label;
  if (init.send_cq == nullptr || init.recv_cq == nullptr || !*init.send_cq || !*init.recv_cq) {
    throw error(status::invalid, where + ": create qp: send_cq and recv_cq are required");
  }
  if (init.send_cq->ref() == init.recv_cq->ref()) {
    throw error(status::invalid,
                where + ": create qp: send_cq and recv_cq must differ (the data path's send poller owns its CQ)");
  }
  if (init.sq_wqebbs == 0 || init.sq_wqebbs > (1u << 15)) {
    throw error(status::invalid, where + ": create qp: sq_wqebbs must be 1..32768 (16-bit WQE indexes stay unambiguous)");
  }
  if (init.srq != nullptr && !*init.srq) throw error(status::invalid, where + ": create qp: empty srq");
  if (init.srq != nullptr && init.srq->ref()->parents.at(0) != p.ref()) {
    throw error(status::invalid, where + ": create qp: the srq belongs to another PD");
  }
  if (init.srq == nullptr && (init.rq_wqes == 0 || init.rq_wqes > (1u << 15))) {
    throw error(status::invalid, where + ": create qp: rq_wqes must be 1..32768");
  }
  qp_create_args args;
  args.init = &init;
  args.send_cq = init.send_cq->ref()->impl;
  args.recv_cq = init.recv_cq->ref()->impl;
  args.srq = init.srq != nullptr ? init.srq->ref()->impl : nullptr;
  provider_object* impl = nullptr;
  std::string why;
  detail::check(r.ops->create_qp(r.impl, args, &impl, &qpn_, &caps_, &why), where, "create qp", why);
  ref_ = detail::make_ref(r.ops, impl, r.ops->destroy_qp, "");
  ref_->label = label() + " on " + detail::device_label(p.ref());
  ref_->parents.push_back(p.ref());
  ref_->parents.push_back(init.send_cq->ref());
  ref_->parents.push_back(init.recv_cq->ref());
  // The SRQ outlives the QP (srq::destroy is refused while this reference exists).
  if (init.srq != nullptr) ref_->parents.push_back(init.srq->ref());
}

std::string qp::label() const {
  char b[32];
  std::snprintf(b, sizeof b, "qp 0x%06x", qpn_);
  return b;
}

qp_attr qp::query() const {
  const auto& r = detail::need(ref_, "qp");
  qp_attr a;
  std::string why;
  detail::check(r.ops->query_qp(r.impl, &a, &why), r.label, "query", why);
  return a;
}

qp_state qp::state() const { return query().state; }

void qp::modify(const qp_attr& attr, uint32_t mask) {
  const auto& r = detail::need(ref_, "qp");
  const qp_state from = state();
  const std::string what = std::string("modify ") + to_string(from) + "->" + to_string(attr.state);
  if (!(mask & qp_attr_mask::state)) throw error(status::invalid, r.label + ": " + what + ": state not in mask");
  const detail::transition_rule* rule = detail::rc_transition(from, attr.state);
  if (rule == nullptr) throw error(status::invalid, r.label + ": " + what + ": not a legal RC transition (IBA 10.3.1)");
  if (!detail::transition_modelled(from, attr.state)) {
    throw error(status::not_supported, r.label + ": " + what + ": gdaki's QPs do not enter or leave SQD and SQE");
  }
  if (const uint32_t missing = rule->required & ~mask; missing != 0) {
    throw error(status::invalid, r.label + ": " + what + ": missing attribute " + detail::attribute_names(missing));
  }
  if (const uint32_t extra = mask & ~(rule->required | rule->optional); extra != 0) {
    throw error(status::invalid,
                r.label + ": " + what + ": attribute " + detail::attribute_names(extra) + " not allowed here");
  }
  if (const uint32_t unmodelled = mask & ~detail::modelled_attributes; unmodelled != 0) {
    throw error(status::not_supported, r.label + ": " + what + ": attribute " + detail::attribute_names(unmodelled) +
                                           " has no field in qp_attr (not modelled by gdaki)");
  }
  if ((mask & qp_attr_mask::access_flags) && (attr.access_flags & ~access::all)) {
    throw error(status::invalid, r.label + ": " + what + ": unknown access flags");
  }
  if ((mask & qp_attr_mask::port) && attr.port_num == 0) {
    throw error(status::invalid, r.label + ": " + what + ": port_num is 1-based");
  }
  if ((mask & qp_attr_mask::min_rnr_timer) && attr.min_rnr_timer > 31) {
    throw error(status::invalid, r.label + ": " + what + ": min_rnr_timer is 0..31");
  }
  if ((mask & qp_attr_mask::timeout) && attr.timeout > 31) {
    throw error(status::invalid, r.label + ": " + what + ": timeout is 0..31");
  }
  if (((mask & qp_attr_mask::retry_cnt) && attr.retry_cnt > 7) || ((mask & qp_attr_mask::rnr_retry) && attr.rnr_retry > 7)) {
    throw error(status::invalid, r.label + ": " + what + ": retry counts are 0..7");
  }
  if ((mask & qp_attr_mask::dest_qpn) && attr.dest_qp_num > 0xffffff) {
    throw error(status::invalid, r.label + ": " + what + ": dest_qp_num is 24 bits");
  }
  std::string why;
  detail::check(r.ops->modify_qp(r.impl, attr, mask, &why), r.label, what.c_str(), why);
}

void qp::to_init(uint32_t access_flags, uint8_t port) {
  qp_attr a;
  a.state = qp_state::init;
  a.access_flags = access_flags;
  a.port_num = port;
  modify(a, qp_attr_mask::reset_to_init);
}

void qp::to_rtr(uint32_t remote_qpn, const qp_attr& attr) {
  qp_attr a = attr;
  a.state = qp_state::rtr;
  a.dest_qp_num = remote_qpn;
  modify(a, qp_attr_mask::init_to_rtr);
}

void qp::to_rts(const qp_attr& attr) {
  qp_attr a = attr;
  a.state = qp_state::rts;
  modify(a, qp_attr_mask::rtr_to_rts);
}

void qp::to_err() {
  qp_attr a;
  a.state = qp_state::err;
  modify(a, qp_attr_mask::state);
}

void qp::to_reset() {
  qp_attr a;
  a.state = qp_state::reset;
  modify(a, qp_attr_mask::state);
}

dev::qp_handle qp::export_handle(dev::cq_handle* send_cq, dev::cq_handle* recv_cq, const qp_export_options& opt) const {
  const auto& r = detail::need(ref_, "qp");
  if (send_cq == nullptr || recv_cq == nullptr) {
    throw error(status::invalid, r.label + ": export: the placed send and receive cq_handles are required");
  }
  dev::qp_handle h{};
  std::string why;
  detail::check(r.ops->export_qp(r.impl, opt, &h, &why), r.label, "export", why);
  const bool has_srq = ref_->parents.size() > 3;  // pd, send CQ, recv CQ, srq (constructor)
  if (has_srq && opt.srq == nullptr) {
    throw error(status::invalid, r.label + ": export: the QP receives from an SRQ; pass its placed srq_handle");
  }
  h.send_cq = send_cq;
  h.recv_cq = recv_cq;
  h.srq = has_srq ? opt.srq : nullptr;
  h.auto_signal_wqebbs = auto_signal_period(r.label, h, opt.auto_signal_wqebbs);
  // The placed handles are never read here: for GPU initiators they may already sit in GPU
  // memory, where a host load faults (the first GPU run of tests/gpu crashed exactly so).
  // What the checks need comes from the send CQ object this QP was created with.
  auto& scq = *ref_->parents.at(1);  // pd, send CQ, recv CQ (see the constructor)
  dev::cq_handle scq_view{};
  detail::check(scq.ops->export_cq(scq.impl, &scq_view, &why), scq.label, "export", why);
  const uint32_t ring = dev::sq_wqebbs(h);
  if (opt.check_cq_depth && dev::cqe_count(scq_view) < ring) {
    throw error(status::invalid, r.label + ": export: send CQ 0x" + hex6(scq_view.cqn) + " holds " +
                                     std::to_string(dev::cqe_count(scq_view)) + " CQEs but the SQ can have " +
                                     std::to_string(ring) +
                                     " signalled WQEs outstanding (one per WQEBB); make the CQ at least that deep");
  }
  // One exported QP per send CQ: its poller widens CQE WQE counters against this QP's
  // ring and retires this QP's WQEBBs for every CQE it takes.
  const detail::object_ref* scq_owner = nullptr;
  if (!scq.exported_send_qp.compare_exchange_strong(scq_owner, ref_.get()) && scq_owner != ref_.get()) {
    throw error(status::invalid, r.label + ": export: its send CQ 0x" + hex6(scq_view.cqn) + " already serves " +
                                     scq_owner->label +
                                     " as an exported send CQ; a device poller needs a send CQ of its own per QP");
  }
  return h;
}


void connect_rc(qp& q, uint32_t remote_qpn, uint32_t access_flags, const qp_attr& attr) {
  q.to_init(access_flags, attr.port_num);
  q.to_rtr(remote_qpn, attr);
  q.to_rts(attr);
}

}  // namespace gdaki::verbs
