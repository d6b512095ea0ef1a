// RC QPs of the soft provider: rings, doorbell record and doorbell page; the state
// machine as the NIC applies it; export of the data-path handle.
#include <algorithm>
#include <bit>
#include <cstring>

#include "engine/engine.hpp"
#include "engine/executor.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/dbr.hpp"
#include "../../verbs/sq_geometry.hpp"
#include "soft_objects.hpp"
#include "soft_ops.hpp"
#include "soft_tables.hpp"
#include "wire/wire.hpp"

namespace gdaki::soft {

using verbs::qp_state;

namespace {
constexpr uint32_t uar_page_bytes = 4096;
constexpr uint32_t bf_size = 256;  // one BlueFlame half (bf_reg_size 512 / 2)

uint32_t log2_ceil(uint32_t v) { return static_cast<uint32_t>(std::countr_zero(std::bit_ceil(v))); }
}  // namespace

status create_qp(provider_object* pdo, const verbs::qp_create_args& args, provider_object** out, uint32_t* qpn,
                 verbs::qp_caps* caps, std::string* why) {
  auto* p = static_cast<soft_pd*>(pdo);
  const verbs::qp_init& in = *args.init;
  auto* scq = static_cast<soft_cq*>(args.send_cq);
  auto* rcq = static_cast<soft_cq*>(args.recv_cq);
  if (scq->dev != p->dev || rcq->dev != p->dev) {
    *why = "the CQs belong to another device";
    return status::invalid;
  }
  verbs::detail::sq_geometry geo;
  if (!verbs::detail::check_sq_geometry(in, &geo, why)) return status::invalid;
  const uint32_t wqebbs = geo.max_wqe_wqebbs;
  const uint32_t sq_n = geo.sq_wqebbs;
  auto q = std::make_shared<soft_qp>();
  q->ops = &ops;
  q->dev = p->dev;
  q->pd = p;
  q->scq = scq;
  q->rcq = rcq;
  q->srq = static_cast<soft_srq*>(args.srq);
  if (q->srq != nullptr && q->srq->pd != p) {
    *why = "the SRQ belongs to another PD";
    return status::invalid;
  }
  q->user_index = in.user_index & 0xffffff;
  q->log_sq = log2_ceil(in.sq_wqebbs);
  q->log_rq = log2_ceil(in.rq_wqes);
  q->log_rq_stride = std::max(4u, log2_ceil(std::max(1u, in.max_recv_sge) * 16));
  q->max_inline = in.max_inline;
  q->scatter_to_cqe = in.scatter_to_cqe;
  q->max_send_wqebbs = wqebbs;
  q->max_send_sge = in.max_send_sge;
  q->max_recv_sge = (1u << q->log_rq_stride) / 16;
  status st = q->sq_mem.place(in.sq_ring, size_t{sq_n} * prm::wqebb_bytes, "sq ring", why);
  // A QP on an SRQ has no RQ: its doorbell record's receive word stays 0, so nothing is
  // ever flushed from it, and its receives come from the SRQ (responder_impl.hpp).
  if (q->srq != nullptr) q->log_rq = 0;
  if (st == status::ok && q->srq == nullptr) {
    st = q->rq_mem.place(in.rq_ring, size_t{1} << (q->log_rq + q->log_rq_stride), "rq ring", why);
  }
  if (st == status::ok) st = q->dbr_mem.allocate(64, why);
  if (st == status::ok) st = q->uar_mem.allocate(uar_page_bytes, why);
  if (st != status::ok) return st;
  q->sq = q->sq_mem.data();
  q->rq = q->rq_mem.data();
  q->dbrec = reinterpret_cast<prm::qp_dbrec*>(q->dbr_mem.data());
  q->uar_db = reinterpret_cast<uint64_t*>(q->uar_mem.data() + prm::uar_bf_offset);
  q->state.store(static_cast<uint32_t>(qp_state::reset));
  *qpn = qps().add(q);
  if (*qpn == 0) {
    *why = "no free QP number";
    return status::no_memory;
  }
  p->dev->eng->add(q);
  caps->sq_wqebbs = sq_n;
  caps->rq_wqes = q->srq != nullptr ? 0 : 1u << q->log_rq;
  caps->rq_stride = q->srq != nullptr ? 0 : 1u << q->log_rq_stride;
  caps->max_send_sge = in.max_send_sge;
  caps->max_recv_sge = q->max_recv_sge;
  caps->max_inline = in.max_inline;
  caps->max_send_wqebbs = wqebbs;
  *out = q.get();
  return status::ok;
}

// What a QP's RESET and destroy do to its CQs, as rdma-core's mlx5 provider and gdaki's
// mlx5 provider do: its unpolled CQEs leave both (a receive CQ may serve other QPs, whose
// CQEs stay, in order), the receives of a QP on an SRQ give their WQEs back to the SRQ's
// CPU free list, and a CQ exported again starts past them. Called with exec_mu and
// resp_mu held: nothing writes a CQE of this QP meanwhile.
namespace {
void discard_completions(soft_qp& q) {
  dev::srq_handle* free_list = q.srq != nullptr ? q.srq->free_list.load(std::memory_order_acquire) : nullptr;
  if (q.rcq != nullptr) discard_qp_cqes(*q.rcq, q.qpn, free_list);
  if (q.scq != nullptr && q.scq != q.rcq) discard_qp_cqes(*q.scq, q.qpn, nullptr);
}
}  // namespace

status modify_qp(provider_object* qpo, const verbs::qp_attr& a, uint32_t mask, std::string* why) {
  auto* q = static_cast<soft_qp*>(qpo);
  namespace m = verbs::qp_attr_mask;
  if ((mask & m::port) && a.port_num != 1) {
    *why = "port " + std::to_string(a.port_num) + " does not exist (soft devices have port 1)";
    return status::invalid;
  }
  if ((mask & m::pkey_index) && a.pkey_index != 0) {
    *why = "pkey_index " + std::to_string(a.pkey_index) + " out of range (table length 1)";
    return status::invalid;
  }
  std::scoped_lock lk(q->exec_mu, q->resp_mu);
  verbs::qp_attr& s = q->attr;
  if (mask & m::access_flags) s.access_flags = a.access_flags;
  if (mask & m::pkey_index) s.pkey_index = a.pkey_index;
  if (mask & m::port) s.port_num = a.port_num;
  if (mask & m::av) {
    s.av = a.av;
    q->remote.store(wire::is_remote(a.av), std::memory_order_relaxed);  // decided once here, not per WQE
    q->wire_conn.reset();               // a new peer address: connect and bind again
    q->wire_bound = false;
    q->release_short_pin();
    q->wire_maps.clear();
  }
  if (mask & m::path_mtu) s.mtu = a.mtu;
  if (mask & m::timeout) s.timeout = a.timeout;
  if (mask & m::retry_cnt) s.retry_cnt = a.retry_cnt;
  if (mask & m::rnr_retry) s.rnr_retry = a.rnr_retry;
  if (mask & m::rq_psn) s.rq_psn = a.rq_psn;
  if (mask & m::max_qp_rd_atomic) s.max_rd_atomic = a.max_rd_atomic;
  if (mask & m::min_rnr_timer) s.min_rnr_timer = a.min_rnr_timer;
  if (mask & m::sq_psn) s.sq_psn = a.sq_psn;
  if (mask & m::max_dest_rd_atomic) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & m::dest_qpn) {
    s.dest_qp_num = a.dest_qp_num;
    q->peer.reset();  // resolved again on first use
  }
  s.state = a.state;
  switch (a.state) {
    case qp_state::reset:
      // Drop every WQE and zero the counters and doorbell record (DOCA clears the DBR on
      // reset too). The CQs keep their contents. Export the handle again afterwards.
      q->sq_ci = 0;
      q->rq_ci = 0;
      q->sq_ci_seen.store(0);
      q->rq_ci_seen.store(0);
      q->stall = stall_kind::none;
      q->retries_used = 0;
      q->stall_until.store(0);
      q->peer.reset();
      // Requests still on the wire are forgotten; the next one binds the pair again, which
      // resets the responder's expected PSN to ours.
      q->wire_ops.clear();
      q->sq_issued = 0;
      q->wire_conn.reset();
      q->wire_bound = false;
      q->release_short_pin();
      q->wire_maps.clear();
      q->wire_busy.store(false);
      revoke_grants_locked_resp(*q);
      dev::arch::store_release(&q->dbrec->rcv.raw, 0u);
      dev::arch::store_release(&q->dbrec->snd.raw, 0u);
      dev::arch::store_relaxed(q->uar_db, uint64_t{0});
      q->state.store(static_cast<uint32_t>(qp_state::reset), std::memory_order_release);
      discard_completions(*q);
      break;
    case qp_state::err:
      q->release_short_pin();  // before we wait for peers' counts (revoke): mapped_pin.hpp
      enter_error_locked_resp(*q);  // flushes the RQ now; the engine flushes the SQ
      break;
    default:
      q->state.store(static_cast<uint32_t>(a.state), std::memory_order_release);
      break;
  }
  q->dev->eng->wake();  // e.g. RTS: WQEs posted earlier can run now
  return status::ok;
}

status query_qp(provider_object* qpo, verbs::qp_attr* out, std::string*) {
  auto* q = static_cast<soft_qp*>(qpo);
  {
    std::lock_guard lk(q->resp_mu);
    *out = q->attr;
  }
  out->state = static_cast<qp_state>(q->state.load(std::memory_order_acquire));
  return status::ok;
}

status destroy_qp(provider_object* qpo) {
  auto* q = static_cast<soft_qp*>(qpo);
  std::shared_ptr<soft_qp> keep = qps().find(q->qpn);  // our reference while we tear down
  qps().remove(q->qpn);
  q->dev->eng->remove(q);
  std::shared_ptr<soft_qp> peer;
  {
    // Waits for an executor inside this QP's SQ (exec_mu) and for a peer's request being
    // served by its responder (resp_mu). After this nobody touches its CQs or PD; holders
    // of a shared_ptr (engine snapshots, peers' caches) only see `destroyed`.
    std::scoped_lock lk(q->exec_mu, q->resp_mu);
    // Our lease first: the revoke below waits for peers' counts, and a peer destroying its
    // QP at the same time waits for ours (each holding the exec_mu the engine's sweep
    // needs: both deregistrations then waited 2 s; mapped_pin.hpp).
    q->release_short_pin();
    revoke_grants_locked_resp(*q);
    q->destroyed = true;
    q->dead.store(true, std::memory_order_release);
    peer = std::move(q->peer);  // released outside the locks (breaks peer <-> peer cycles)
    discard_completions(*q);
  }
  return status::ok;
}

status export_qp(provider_object* qpo, const verbs::qp_export_options& opt, dev::qp_handle* out, std::string*) {
  auto* q = static_cast<soft_qp*>(qpo);
  // cpu_assisted: the NIC then acts on rung doorbells only, as a ConnectX does, so work
  // whose doorbell record moved waits for the CPU doorbell service (proxy/doorbell_service.hpp).
  q->doorbell_gated.store(opt.db_mode == dev::doorbell_mode::cpu_assisted, std::memory_order_release);
  if (!opt.host_hook && q->dev->eng) q->dev->eng->note_hookless_ringer();
  *out = dev::qp_handle{};
  out->sq_buf = q->sq;
  out->log_sq_wqebbs = q->log_sq;
  out->qpn = q->qpn;
  out->dbrec = q->dbrec;
  out->uar_db = q->uar_db;
  out->bf_reg = reinterpret_cast<uint8_t*>(q->uar_db);  // the BlueFlame register at UAR + 0x800
  out->bf_size = bf_size;
  out->db_mode = opt.db_mode;
  out->max_inline = q->max_inline;
  out->max_send_wqebbs = q->max_send_wqebbs;
  out->rq_buf = q->rq;
  out->log_rq_wqes = q->log_rq;
  out->log_rq_stride = q->log_rq_stride;
  out->host_doorbell_hook = opt.host_hook ? host_doorbell_hook : nullptr;
  out->host_poll_hook = opt.host_hook ? host_poll_hook : nullptr;
  out->host_hook_ctx = opt.host_hook ? q : nullptr;
  out->err_state = dev::no_error_state;
  return status::ok;
}

}  // namespace gdaki::soft
