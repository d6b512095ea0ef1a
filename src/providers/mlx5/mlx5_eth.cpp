// Raw-packet Ethernet queues of the mlx5 provider (mlx5_eth.hpp; docs/mlx5.md,
// "Raw-packet Ethernet queues"). Every object is a DEVX object made from a mailbox of
// mlx5_prm_eth; DEVX destroys each with the matching destroy command itself.
#include "mlx5_eth.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>

#include "gdaki/prm/wqe.hpp"
#include "mlx5_ops.hpp"

namespace gdaki::mlx5 {

namespace {

uint32_t eth_log2_ceil(uint32_t v) { return static_cast<uint32_t>(std::countr_zero(std::bit_ceil(std::max(1u, v)))); }

// Runs one create command; on failure *why says which object ("transport domain") and
// the command's failure ("ALLOC_TRANSPORT_DOMAIN failed: status ..., syndrome ...").
status create_obj(device_obj* d, uint16_t opcode, const std::vector<uint8_t>& cmd, const char* what,
                  mlx5dv_devx_obj** obj, uint8_t (&out)[prm_cmd::size::out_header], std::string* why) {
  std::fill(std::begin(out), std::end(out), uint8_t{0});
  errno = 0;
  *obj = d->dv->devx_obj_create(d->ctx, cmd.data(), cmd.size(), out, sizeof out);
  const status st = check_cmd(opcode, *obj == nullptr ? (errno != 0 ? errno : EIO) : 0, out, sizeof out,
                              "mlx5dv_devx_obj_create", why);
  if (st != status::ok) *why = std::string(what) + ": " + *why;
  return st;
}

status modify_obj(device_obj* d, mlx5dv_devx_obj* obj, uint16_t opcode, const std::vector<uint8_t>& cmd,
                  const char* what, std::string* why) {
  uint8_t out[prm_cmd::size::out_header] = {};
  const int rc = d->dv->devx_obj_modify(obj, cmd.data(), cmd.size(), out, sizeof out);
  const status st = check_cmd(opcode, rc, out, sizeof out, "mlx5dv_devx_obj_modify", why);
  if (st != status::ok) *why = std::string(what) + ": " + *why;
  return st;
}

void destroy(const mlx5dv_api* dv, mlx5dv_devx_obj*& o) {
  if (o != nullptr) dv->devx_obj_destroy(o);
  o = nullptr;
}
void dereg(const mlx5dv_api* dv, mlx5dv_devx_umem*& u) {
  if (u != nullptr) dv->devx_umem_dereg(u);
  u = nullptr;
}

status make_rq(eth_queues* q, device_obj* d, const eth_queues_init& in, eth_rq* r, std::string* why) {
  verbs::cq_init ci;
  ci.depth = 1u << q->log_rq;
  ci.ring = verbs::placement{in.rq_ring.kind, nullptr, 0};
  uint32_t cqn = 0, depth = 0;
  status st = create_cq(d, ci, &r->cq, &cqn, &depth, why);
  if (st != status::ok) {
    *why = "receive CQ: " + *why;
    return st;
  }
  st = r->ring.allocate(in.rq_ring.kind, size_t{1} << (q->log_rq + q->log_rq_stride), "receive ring", why);
  // Doorbell records in GPU memory would be out of the CPU's reach; as for QPs, they go to
  // host-pinned memory next to GPU rings.
  const verbs::memory_kind dbr_kind =
      in.rq_ring.kind == verbs::memory_kind::device ? verbs::memory_kind::host_pinned : in.rq_ring.kind;
  if (st == status::ok) st = r->dbr.allocate(dbr_kind, 64, "receive doorbell record", why);
  if (st == status::ok) st = register_umem(d, r->ring, "receive ring", &r->ring_umem, why);
  if (st == status::ok) st = register_umem(d, r->dbr, "receive doorbell record", &r->dbr_umem, why);
  if (st != status::ok) return st;
  prm_cmd::rq_params p;
  p.cqn = static_cast<cq_obj*>(r->cq)->cqn;
  p.pdn = q->pd->pdn;
  p.log_wq_size = q->log_rq;
  p.log_wq_stride = q->log_rq_stride;
  p.wq_umem_id = r->ring_umem->umem_id;
  p.dbr_umem_id = r->dbr_umem->umem_id;
  uint8_t out[prm_cmd::size::out_header];
  st = create_obj(d, prm_cmd::op::create_rq, prm_cmd::build_create_rq(p), "receive queue (RQ)", &r->obj, out, why);
  if (st != status::ok) return st;
  r->rqn = prm_cmd::parse_rqn(out);
  return modify_obj(d, r->obj, prm_cmd::op::modify_rq,
                    prm_cmd::build_modify_rq(r->rqn, prm_cmd::wq_state::rst, prm_cmd::wq_state::rdy),
                    "receive queue (RQ) to RDY", why);
}

status make_flow(eth_queues* q, device_obj* d, const eth_rule& rule, uint32_t index, eth_flow* f, std::string* why) {
  uint8_t out[prm_cmd::size::out_header];
  prm_cmd::flow_group_params g;
  g.table_id = q->table_id;
  g.start_index = index;
  g.end_index = index;
  g.criteria = rule.match.mask;
  status st = create_obj(d, prm_cmd::op::create_flow_group, prm_cmd::build_create_flow_group(g), "flow group", &f->group,
                         out, why);
  if (st != status::ok) return st;
  f->group_id = prm_cmd::parse_flow_group_id(out);
  if (rule.count) {
    st = create_obj(d, prm_cmd::op::alloc_flow_counter, prm_cmd::build_alloc_flow_counter(), "flow counter",
                    &f->counter, out, why);
    if (st != status::ok) return st;
    f->counter_id = prm_cmd::parse_flow_counter_id(out);
  }
  prm_cmd::fte_params e;
  e.table_id = q->table_id;
  e.flow_index = index;
  e.group_id = f->group_id;
  e.match = rule.match;
  e.drop = rule.drop;
  e.tirn = q->tirn;
  e.counted = rule.count;
  e.counter_id = f->counter_id;
  return create_obj(d, prm_cmd::op::set_flow_table_entry, prm_cmd::build_set_fte(e), "flow table entry", &f->entry,
                    out, why);
}

}  // namespace

void destroy_eth_queues(eth_queues* q) {
  const mlx5dv_api* dv = q->pd->dev->dv;
  for (auto it = q->flows.rbegin(); it != q->flows.rend(); ++it) {
    destroy(dv, it->entry);
    destroy(dv, it->counter);
    destroy(dv, it->group);
  }
  destroy(dv, q->table);
  destroy(dv, q->tir);
  destroy(dv, q->rqt);
  for (auto it = q->rqs.rbegin(); it != q->rqs.rend(); ++it) {
    eth_rq& r = **it;
    destroy(dv, r.obj);
    dereg(dv, r.ring_umem);
    dereg(dv, r.dbr_umem);
    if (r.cq != nullptr) destroy_cq(r.cq);
    r.cq = nullptr;
  }
  destroy(dv, q->sq);
  if (q->uar != nullptr) dv->devx_free_uar(q->uar);
  dereg(dv, q->sq_ring_umem);
  dereg(dv, q->sq_dbr_umem);
  if (q->scq != nullptr) destroy_cq(q->scq);
  destroy(dv, q->tis);
  destroy(dv, q->td);
  delete q;
}

status create_eth_queues(provider_object* pdo, const eth_queues_init& in, eth_queues** out, std::string* why) {
  auto* pd = static_cast<pd_obj*>(pdo);
  device_obj* d = pd->dev;
  const std::string where = "raw-packet Ethernet queues on " + d->name + ": ";
  if (!d->devx) {
    *why = where + "they are DEVX objects, which this device context does not allow";
    return status::not_supported;
  }
  if (in.rx_queues == 0 || in.sq_wqebbs == 0 || in.rq_wqes == 0) {
    *why = where + "sq_wqebbs, rq_wqes and rx_queues must be at least 1";
    return status::invalid;
  }
  auto* q = new eth_queues;
  q->pd = pd;
  q->log_sq = eth_log2_ceil(in.sq_wqebbs);
  q->log_rq = eth_log2_ceil(in.rq_wqes);
  q->log_rq_stride = std::max(4u, eth_log2_ceil(16 * std::max(1u, in.rq_sges)));
  uint8_t o[prm_cmd::size::out_header];
  auto fail = [&](status st) {
    *why = where + *why;
    destroy_eth_queues(q);
    return st;
  };

  // Transport domain and TIS: the send queue's transmit context.
  status st = create_obj(d, prm_cmd::op::alloc_transport_domain, prm_cmd::build_alloc_transport_domain(),
                         "transport domain", &q->td, o, why);
  if (st != status::ok) return fail(st);
  q->tdn = prm_cmd::parse_transport_domain(o);
  prm_cmd::tis_params tp;
  tp.transport_domain = q->tdn;
  tp.pdn = pd->pdn;
  st = create_obj(d, prm_cmd::op::create_tis, prm_cmd::build_create_tis(tp), "transmit interface send (TIS)", &q->tis,
                  o, why);
  if (st != status::ok) return fail(st);
  q->tisn = prm_cmd::parse_tisn(o);

  // Send CQ and SQ.
  verbs::cq_init sci;
  sci.depth = 1u << q->log_sq;
  sci.ring = verbs::placement{in.sq_ring.kind, nullptr, 0};
  uint32_t cqn = 0, depth = 0;
  st = create_cq(d, sci, &q->scq, &cqn, &depth, why);
  if (st != status::ok) {
    *why = "send CQ: " + *why;
    return fail(st);
  }
  st = q->sq_ring.place(in.sq_ring, size_t{1} << (q->log_sq + prm::wqebb_shift), "send ring", why);
  const verbs::memory_kind dbr_kind =
      in.sq_ring.kind == verbs::memory_kind::device ? verbs::memory_kind::host_pinned : in.sq_ring.kind;
  if (st == status::ok) st = q->sq_dbr.allocate(dbr_kind, 64, "send doorbell record", why);
  if (st == status::ok) st = register_umem(d, q->sq_ring, "send ring", &q->sq_ring_umem, why);
  if (st == status::ok) st = register_umem(d, q->sq_dbr, "send doorbell record", &q->sq_dbr_umem, why);
  if (st == status::ok) {
    q->uar = alloc_uar(d, why);
    if (q->uar == nullptr) st = status::io_error;
  }
  if (st != status::ok) return fail(st);
  prm_cmd::sq_params sp;
  sp.cqn = cqn;
  sp.tisn = q->tisn;
  sp.pdn = pd->pdn;
  sp.uar_page = q->uar->page_id;
  sp.min_inline = in.min_inline;
  sp.log_wq_size = q->log_sq;
  sp.wq_umem_id = q->sq_ring_umem->umem_id;
  sp.dbr_umem_id = q->sq_dbr_umem->umem_id;
  st = create_obj(d, prm_cmd::op::create_sq, prm_cmd::build_create_sq(sp), "send queue (SQ)", &q->sq, o, why);
  if (st != status::ok) return fail(st);
  q->sqn = prm_cmd::parse_sqn(o);
  st = modify_obj(d, q->sq, prm_cmd::op::modify_sq,
                  prm_cmd::build_modify_sq(q->sqn, prm_cmd::wq_state::rst, prm_cmd::wq_state::rdy),
                  "send queue (SQ) to RDY", why);
  if (st != status::ok) return fail(st);

  // Receive queues, then the TIR that spreads packets over them.
  std::vector<uint32_t> rqns;
  for (uint32_t i = 0; i < in.rx_queues; ++i) {
    q->rqs.push_back(std::make_unique<eth_rq>());
    st = make_rq(q, d, in, q->rqs.back().get(), why);
    if (st != status::ok) {
      if (in.rx_queues > 1) *why = "receive queue " + std::to_string(i) + ": " + *why;
      return fail(st);
    }
    rqns.push_back(q->rqs.back()->rqn);
  }
  prm_cmd::tir_params tr;
  tr.transport_domain = q->tdn;
  if (in.rx_queues == 1) {
    tr.inline_rqn = rqns[0];
  } else {
    st = create_obj(d, prm_cmd::op::create_rqt, prm_cmd::build_create_rqt(rqns), "RQ table (RQT)", &q->rqt, o, why);
    if (st != status::ok) return fail(st);
    q->rqtn = prm_cmd::parse_rqtn(o);
    tr.rss = true;
    tr.rqtn = q->rqtn;
    tr.toeplitz_key = in.rss_key;
    tr.ipv6 = in.rss_ipv6;
    tr.udp = in.rss_udp;
    tr.fields = in.rss_fields;
  }
  st = create_obj(d, prm_cmd::op::create_tir, prm_cmd::build_create_tir(tr),
                  in.rx_queues == 1 ? "direct TIR" : "RSS TIR", &q->tir, o, why);
  if (st != status::ok) return fail(st);
  q->tirn = prm_cmd::parse_tirn(o);

  // Steering: a NIC RX table with one group, optional counter and entry per rule.
  prm_cmd::flow_table_params fp;
  fp.level = in.table_level;
  fp.log_size = static_cast<uint8_t>(eth_log2_ceil(static_cast<uint32_t>(std::max<size_t>(1, in.rules.size()))));
  st = create_obj(d, prm_cmd::op::create_flow_table, prm_cmd::build_create_flow_table(fp), "NIC RX flow table",
                  &q->table, o, why);
  if (st != status::ok) return fail(st);
  q->table_id = prm_cmd::parse_flow_table_id(o);
  q->flows.resize(in.rules.size());
  for (uint32_t i = 0; i < in.rules.size(); ++i) {
    st = make_flow(q, d, in.rules[i], i, &q->flows[i], why);
    if (st != status::ok) {
      *why = "rule " + std::to_string(i) + ": " + *why;
      return fail(st);
    }
  }
  *out = q;
  return status::ok;
}

}  // namespace gdaki::mlx5
