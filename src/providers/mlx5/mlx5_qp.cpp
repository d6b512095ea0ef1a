// RC QPs of the mlx5 provider as DEVX objects (docs/mlx5.md, "DEVX objects"): one work
// queue buffer (RQ at offset 0, SQ right after it, as the NIC expects; the SQ alone for a
// QP on a shared receive queue, mlx5_srq.cpp) and a doorbell
// record in memory gdaki places, registered as umems; a UAR page per QP; CREATE_QP; the
// state machine through RST2INIT / INIT2RTR / RTR2RTS / 2ERR / 2RST; export of the
// dev::qp_handle the data path posts through.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/wqe.hpp"
#include "gpu/cuda_driver.hpp"
#include "../../verbs/sq_geometry.hpp"
#include "mlx5_atomic_results.hpp"
#include "mlx5_objects.hpp"
#include "mlx5_ops.hpp"
#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5 {

using verbs::qp_state;

namespace {

constexpr size_t uar_page_bytes = 4096;

uint32_t log2_ceil(uint32_t v) { return static_cast<uint32_t>(std::countr_zero(std::bit_ceil(v))); }

void release_qp(qp_obj* q) {
  const device_obj* d = q->pd->dev;
  if (q->obj != nullptr) d->dv->devx_obj_destroy(q->obj);
  if (q->wq_umem != nullptr) d->dv->devx_umem_dereg(q->wq_umem);
  if (q->dbr_umem != nullptr) d->dv->devx_umem_dereg(q->dbr_umem);
  if (q->uar_registered != nullptr) {
    if (const gpu::cuda_driver_api* cu = gpu::cuda_driver(nullptr)) cu->mem_host_unregister(q->uar_registered);
  }
  if (q->uar != nullptr) d->dv->devx_free_uar(q->uar);
  delete q;
}

// Runs one QP modify command and checks its output mailbox.
status run_modify(qp_obj* q, const std::vector<uint8_t>& in, std::string* why) {
  const uint16_t opcode = static_cast<uint16_t>(prm_cmd::get_bits(in, 0, 16));
  uint8_t out[prm_cmd::size::modify_qp_out] = {};
  const int rc = q->pd->dev->dv->devx_obj_modify(q->obj, in.data(), in.size(), out, sizeof out);
  return check_cmd(opcode, rc, out, sizeof out, "mlx5dv_devx_obj_modify", why);
}

// The peer's MAC address for a RoCE path: an address handle makes the kernel resolve it
// (neighbour table), and mlx5dv_init_obj exposes it. [unverified] on hardware.
status resolve_rmac(qp_obj* q, const verbs::address& av, std::array<uint8_t, 6>* mac, std::string* why) {
  const device_obj* d = q->pd->dev;
  ibv_ah_attr ah{};
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, av.dgid, 16);
  ah.grh.sgid_index = av.sgid_index;
  ah.grh.hop_limit = av.hop_limit;
  ah.grh.traffic_class = av.traffic_class;
  ah.grh.flow_label = av.flow_label;
  ah.sl = av.sl;
  ah.port_num = av.port_num;
  errno = 0;
  ibv_ah* h = d->ibv->create_ah(q->pd->pd, &ah);
  if (h == nullptr) {
    *why = std::string("resolving the peer's MAC address: ibv_create_ah failed: ") +
           std::strerror(errno != 0 ? errno : EINVAL) + " (is the peer GID reachable from GID index " +
           std::to_string(av.sgid_index) + "?)";
    return status::io_error;
  }
  mlx5dv_ah dvah{};
  mlx5dv_obj obj{};
  obj.ah.in = h;
  obj.ah.out = &dvah;
  const int rc = d->dv->init_obj(&obj, MLX5DV_OBJ_AH);
  if (rc == 0 && dvah.av != nullptr) std::memcpy(mac->data(), dvah.av->rmac, 6);
  d->ibv->destroy_ah(h);
  if (rc != 0 || dvah.av == nullptr) {
    *why = "resolving the peer's MAC address: mlx5dv_init_obj(AH) failed";
    return status::io_error;
  }
  return status::ok;
}

// What rdma-core's mlx5 provider does whenever a QP enters RESET (modify or destroy): the
// QP's CQEs leave both CQs (the receive CQ may serve other QPs, whose CQEs stay, in
// order), and the doorbell record goes back to 0, the index the NIC restarts both rings
// at. The exported handle is a snapshot: export the QP again (every counter 0) and its CQs
// (consumer index past the discarded CQEs) before posting after RESET. A QP on an SRQ
// gives the WQEs of its discarded receive CQEs back to the SRQ's CPU free list, as
// rdma-core does (without it each unpolled receive cost the SRQ a WQE for good).
status clean_after_reset(qp_obj* q, std::string* why) {
  status st = q->dbr.fill(0, why);
  if (st != status::ok) return st;
  dev::srq_handle* free_list = q->srq != nullptr ? q->srq->free_list.load(std::memory_order_acquire) : nullptr;
  st = discard_qp_completions(q->rcq, q->qpn, free_list, why);
  if (st == status::ok && q->scq != q->rcq) st = discard_qp_completions(q->scq, q->qpn, nullptr, why);
  return st;
}

// Refuses an export whose atomic results the data path would misread: it hands the result
// buffer's 8 bytes to callers as a host word, which is right only when the NIC writes them
// in host order (mlx5_atomic_results.hpp). Asked per export (a control-path command), so a
// NIC reconfigured between exports is judged as it is now.
status check_atomic_results(device_obj* d, std::string* why) {
  prm_cmd::atomic_caps ac;
  if (status s = query_atomic_caps(d, &ac); s != status::ok) {
    *why = "device " + d->name + ": cannot tell in which byte order its atomics return results (QUERY_HCA_CAP of the "
           "atomic caps failed), so fetch-add and compare-swap results could be byte-swapped; refusing the export";
    return status::io_error;
  }
  if (atomic_results_of(ac) == atomic_results::big_endian) {
    *why = "device " + d->name + ": its 8-byte atomics return big-endian results (QUERY_HCA_CAP atomic "
           "req_8B_endianness_mode " + std::to_string(ac.req_8B_endianness_mode) +
           ", host endianness not enabled; rdma-core reports such a device as IBV_ATOMIC_NONE), and the data path "
           "returns fetch-add / compare-swap results as host words: they would be byte-swapped, so the export is "
           "refused";
    return status::not_supported;
  }
  return status::ok;
}

status to_init(qp_obj* q, const verbs::qp_attr& a, uint32_t mask, std::string* why) {
  namespace m = verbs::qp_attr_mask;
  prm_cmd::rst2init_params p;
  p.qpn = q->qpn;
  p.port = (mask & m::port) ? a.port_num : q->attr.port_num;
  p.pkey_index = (mask & m::pkey_index) ? a.pkey_index : q->attr.pkey_index;
  const uint32_t acc = (mask & m::access_flags) ? a.access_flags : q->attr.access_flags;
  p.remote_read = (acc & verbs::access::remote_read) != 0;
  p.remote_write = (acc & verbs::access::remote_write) != 0;
  p.remote_atomic = (acc & verbs::access::remote_atomic) != 0;
  return run_modify(q, prm_cmd::build_rst2init(p), why);
}

status to_rtr(qp_obj* q, const verbs::qp_attr& a, std::string* why) {
  const device_obj* d = q->pd->dev;
  const verbs::address& av = a.av;
  const uint8_t port = av.port_num != 0 ? av.port_num : q->attr.port_num;
  ibv_port_attr pa{};
  if (int rc = query_port(*d->ibv, d->ctx, port, &pa); rc != 0) {
    *why = "ibv_query_port(" + std::to_string(port) + ") failed: " + std::strerror(rc);
    return status::io_error;
  }
  prm_cmd::init2rtr_params p;
  p.qpn = q->qpn;
  p.mtu = static_cast<uint32_t>(a.mtu);
  p.remote_qpn = a.dest_qp_num;
  p.next_rcv_psn = a.rq_psn & 0xffffff;
  p.max_dest_rd_atomic = a.max_dest_rd_atomic;
  p.min_rnr_nak = a.min_rnr_timer;
  prm_cmd::address_path& path = p.path;
  path.vhca_port_num = port;
  path.pkey_index = q->attr.pkey_index;
  path.src_addr_index = av.sgid_index;
  path.hop_limit = av.hop_limit;
  path.tclass = av.traffic_class;
  path.flow_label = av.flow_label & 0xfffff;
  std::memcpy(path.rgid.data(), av.dgid, 16);
  const bool gid_zero = std::all_of(path.rgid.begin(), path.rgid.end(), [](uint8_t b) { return b == 0; });
  if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
    if (!av.is_global || gid_zero) {
      *why = "RoCE addressing needs a GRH: set av.is_global, av.dgid (the peer's GID) and av.sgid_index";
      return status::invalid;
    }
    path.roce = true;
    path.grh = true;
    path.eth_prio = av.sl & 7;
    const uint32_t fl = av.flow_label != 0 ? (av.flow_label & 0xfffff)
                                           : prm_cmd::flow_label_from_qpns(q->qpn, a.dest_qp_num);
    path.udp_sport = prm_cmd::udp_sport_from_flow_label(fl);
    if (status s = resolve_rmac(q, av, &path.rmac, why); s != status::ok) return s;
  } else {
    if (!av.is_global && av.dlid == 0) {
      *why = "InfiniBand addressing needs the peer's LID (av.dlid) or a GRH (av.is_global with av.dgid)";
      return status::invalid;
    }
    path.grh = av.is_global;
    path.rlid = av.dlid;
    path.sl = av.sl & 0xf;
  }
  return run_modify(q, prm_cmd::build_init2rtr(p), why);
}

status to_rts(qp_obj* q, const verbs::qp_attr& a, std::string* why) {
  prm_cmd::rtr2rts_params p;
  p.qpn = q->qpn;
  p.next_send_psn = a.sq_psn & 0xffffff;
  p.ack_timeout = a.timeout;
  p.retry_count = a.retry_cnt;
  p.rnr_retry = a.rnr_retry;
  p.max_rd_atomic = a.max_rd_atomic;
  return run_modify(q, prm_cmd::build_rtr2rts(p), why);
}

}  // namespace

status create_qp(provider_object* pdo, const verbs::qp_create_args& args, provider_object** out, uint32_t* qpn,
                 verbs::qp_caps* caps, std::string* why) {
  auto* pd = static_cast<pd_obj*>(pdo);
  device_obj* d = pd->dev;
  const verbs::qp_init& in = *args.init;
  auto* scq = static_cast<cq_obj*>(args.send_cq);
  auto* rcq = static_cast<cq_obj*>(args.recv_cq);
  auto* srq = static_cast<srq_obj*>(args.srq);
  if (!d->devx) {
    *why = "a QP in caller-placed memory needs DEVX, which this device context does not allow";
    return status::not_supported;
  }
  if (scq->dev != d || rcq->dev != d) {
    *why = "the CQs belong to another device";
    return status::invalid;
  }
  if (srq != nullptr && srq->pd != pd) {
    *why = "the SRQ belongs to another PD";
    return status::invalid;
  }
  verbs::detail::sq_geometry geo;
  if (!verbs::detail::check_sq_geometry(in, &geo, why)) return status::invalid;
  const uint32_t wqebbs = geo.max_wqe_wqebbs;
  const uint32_t sq_n = geo.sq_wqebbs;
  // The NIC finds the SQ right after the RQ in one work-queue buffer, so the two rings
  // share sq_ring's placement (rq_ring is ignored on an SRQ: there is no RQ).
  if (srq == nullptr && in.rq_ring.buffer != nullptr && in.rq_ring.buffer != in.sq_ring.buffer) {
    *why = "mlx5 keeps the RQ and the SQ in one buffer (RQ first): give it as sq_ring.buffer and leave "
           "rq_ring.buffer empty or equal to it";
    return status::invalid;
  }
  auto* q = new qp_obj;
  q->ops = &ops;
  q->pd = pd;
  q->scq = scq;
  q->rcq = rcq;
  q->srq = srq;
  q->log_sq = log2_ceil(sq_n);
  q->log_rq = log2_ceil(in.rq_wqes);
  q->log_rq_stride = std::max(4u, log2_ceil(std::max(1u, in.max_recv_sge) * 16));
  q->max_inline = in.max_inline;
  q->max_send_wqebbs = wqebbs;
  // A QP on an SRQ has no RQ: the work queue is the SQ alone (rq_type SRQ tells the NIC),
  // and the doorbell record's receive word stays 0.
  if (srq != nullptr) q->log_rq = 0;
  q->rq_bytes = srq != nullptr ? 0 : size_t{1} << (q->log_rq + q->log_rq_stride);
  const size_t wq_bytes = q->rq_bytes + size_t{sq_n} * prm::wqebb_bytes;
  status st = q->wq.place(in.sq_ring, wq_bytes, "work queue (RQ + SQ)", why);
  // The doorbell record is written by whoever posts (GPU threads, CPU threads or the proxy
  // thread) and read by the NIC and, with cpu_assisted doorbells, by a CPU thread. The
  // backend is chosen at export, after this, so a record next to GPU-memory rings goes to
  // host-pinned memory, which all of them reach; in GPU memory the CPU doorbell service
  // would dereference a device pointer (docs/mlx5.md, "Doorbell record placement").
  const verbs::memory_kind dbr_kind =
      in.sq_ring.kind == verbs::memory_kind::device ? verbs::memory_kind::host_pinned : in.sq_ring.kind;
  if (st == status::ok) st = q->dbr.allocate(dbr_kind, 64, "qp doorbell record", why);
  if (st == status::ok) st = register_umem(d, q->wq, "work queue (RQ + SQ)", &q->wq_umem, why);
  if (st == status::ok) st = register_umem(d, q->dbr, "qp doorbell record", &q->dbr_umem, why);
  if (st == status::ok) {
    q->uar = alloc_uar(d, why);
    if (q->uar == nullptr) st = status::io_error;
  }
  if (st != status::ok) {
    release_qp(q);
    return st;
  }
  prm_cmd::qp_params p;
  p.pdn = pd->pdn;
  p.uar_page = q->uar->page_id;
  p.user_index = in.user_index & 0xffffff;
  p.log_sq_size = q->log_sq;
  p.log_rq_size = q->log_rq;
  p.log_rq_stride = q->log_rq_stride;
  p.cqn_snd = scq->cqn;
  p.cqn_rcv = rcq->cqn;
  p.wq_umem_id = q->wq_umem->umem_id;
  p.dbr_umem_id = q->dbr_umem->umem_id;
  p.cs_res = in.scatter_to_cqe ? 1u : 0u;  // MLX5_RES_SCAT_DATA32_CQE: our CQEs are 64 bytes
  p.on_srq = srq != nullptr;
  p.srqn = srq != nullptr ? srq->srqn : 0;
  const auto cmd = prm_cmd::build_create_qp(p);
  uint8_t outbuf[prm_cmd::size::create_qp_out] = {};
  errno = 0;
  q->obj = d->dv->devx_obj_create(d->ctx, cmd.data(), cmd.size(), outbuf, sizeof outbuf);
  st = check_cmd(prm_cmd::op::create_qp, q->obj == nullptr ? (errno != 0 ? errno : EIO) : 0, outbuf, sizeof outbuf,
                 "mlx5dv_devx_obj_create", why);
  if (st != status::ok) {
    release_qp(q);
    return st;
  }
  q->qpn = prm_cmd::parse_qpn(outbuf);
  q->attr.state = qp_state::reset;
  if (srq != nullptr) srq->qps.fetch_add(1, std::memory_order_acq_rel);  // destroy_qp gives it back
  *qpn = q->qpn;
  caps->sq_wqebbs = sq_n;
  caps->rq_wqes = srq != nullptr ? 0 : 1u << q->log_rq;
  caps->rq_stride = srq != nullptr ? 0 : 1u << q->log_rq_stride;
  caps->max_send_sge = in.max_send_sge;
  caps->max_recv_sge = srq != nullptr ? srq->max_sge : (1u << q->log_rq_stride) / 16;
  caps->max_inline = in.max_inline;
  caps->max_send_wqebbs = wqebbs;
  *out = q;
  return status::ok;
}

status modify_qp(provider_object* qpo, const verbs::qp_attr& a, uint32_t mask, std::string* why) {
  auto* q = static_cast<qp_obj*>(qpo);
  namespace m = verbs::qp_attr_mask;
  const qp_state from = q->attr.state;
  const qp_state to = a.state;
  status st = status::ok;
  if (to == qp_state::err) {
    st = run_modify(q, prm_cmd::build_2err(q->qpn), why);
  } else if (to == qp_state::reset) {
    st = run_modify(q, prm_cmd::build_2rst(q->qpn), why);
    if (st == status::ok) {
      q->attr.state = qp_state::reset;  // the NIC is in RESET even if the clean-up below fails
      st = clean_after_reset(q, why);
    }
  } else if (from == qp_state::reset && to == qp_state::init) {
    st = to_init(q, a, mask, why);
  } else if (from == qp_state::init && to == qp_state::rtr) {
    st = to_rtr(q, a, why);
  } else if (from == qp_state::rtr && to == qp_state::rts) {
    st = to_rts(q, a, why);
  } else {
    *why = std::string("the mlx5 provider implements RESET->INIT, INIT->RTR, RTR->RTS, ->ERR and ->RESET; not ") +
           verbs::to_string(from) + "->" + verbs::to_string(to);
    return status::not_supported;
  }
  if (st != status::ok) return st;
  verbs::qp_attr& s = q->attr;
  if (mask & m::access_flags) s.access_flags = a.access_flags;
  if (mask & m::pkey_index) s.pkey_index = a.pkey_index;
  if (mask & m::port) s.port_num = a.port_num;
  if (mask & m::av) s.av = a.av;
  if (mask & m::path_mtu) s.mtu = a.mtu;
  if (mask & m::dest_qpn) s.dest_qp_num = a.dest_qp_num;
  if (mask & m::rq_psn) s.rq_psn = a.rq_psn;
  if (mask & m::max_dest_rd_atomic) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & m::min_rnr_timer) s.min_rnr_timer = a.min_rnr_timer;
  if (mask & m::sq_psn) s.sq_psn = a.sq_psn;
  if (mask & m::timeout) s.timeout = a.timeout;
  if (mask & m::retry_cnt) s.retry_cnt = a.retry_cnt;
  if (mask & m::rnr_retry) s.rnr_retry = a.rnr_retry;
  if (mask & m::max_qp_rd_atomic) s.max_rd_atomic = a.max_rd_atomic;
  s.state = to;
  return status::ok;
}

status query_qp(provider_object* qpo, verbs::qp_attr* out, std::string* why) {
  auto* q = static_cast<qp_obj*>(qpo);
  // The NIC moves a QP to ERR (or SQE) by itself, so the state is read back from it.
  const auto in = prm_cmd::build_query_qp(q->qpn);
  uint8_t outbuf[prm_cmd::size::query_qp_out] = {};
  const int rc = q->pd->dev->dv->devx_obj_query(q->obj, in.data(), in.size(), outbuf, sizeof outbuf);
  if (status s = check_cmd(prm_cmd::op::query_qp, rc, outbuf, sizeof outbuf, "mlx5dv_devx_obj_query", why);
      s != status::ok) {
    return s;
  }
  *out = q->attr;
  switch (prm_cmd::parse_query_qp_state(outbuf)) {
    case prm_cmd::qpc_state::rst: out->state = qp_state::reset; break;
    case prm_cmd::qpc_state::init: out->state = qp_state::init; break;
    case prm_cmd::qpc_state::rtr: out->state = qp_state::rtr; break;
    case prm_cmd::qpc_state::rts: out->state = qp_state::rts; break;
    case prm_cmd::qpc_state::sqer: out->state = qp_state::sqe; break;
    case prm_cmd::qpc_state::sqd: out->state = qp_state::sqd; break;
    case prm_cmd::qpc_state::err: out->state = qp_state::err; break;
    default:
      *why = "QUERY_QP returned an unknown state " + std::to_string(prm_cmd::get_bits(outbuf, 0xc0, 4));
      return status::io_error;
  }
  q->attr.state = out->state;
  return status::ok;
}

status destroy_qp(provider_object* qpo) {
  auto* q = static_cast<qp_obj*>(qpo);
  // The QP object goes first, so the NIC writes no CQE for it during the clean-up.
  q->pd->dev->dv->devx_obj_destroy(q->obj);
  q->obj = nullptr;
  std::string why;
  const status st = clean_after_reset(q, &why);
  if (q->srq != nullptr) q->srq->qps.fetch_sub(1, std::memory_order_acq_rel);
  release_qp(q);
  return st;
}

status export_qp(provider_object* qpo, const verbs::qp_export_options& opt, dev::qp_handle* out, std::string* why) {
  auto* q = static_cast<qp_obj*>(qpo);
  if (opt.db_mode == dev::doorbell_mode::blueflame) {
    *why = "BlueFlame doorbells are not exported by the mlx5 provider (bf_reg is null); use db_store or cpu_assisted";
    return status::not_supported;
  }
  if (status s = check_atomic_results(q->pd->dev, why); s != status::ok) return s;
  auto* cpu_db = static_cast<uint64_t*>(q->uar->reg_addr);
  uint64_t* db = cpu_db;
  const bool gpu_rings = q->wq.kind() != verbs::memory_kind::host;
  if (gpu_rings && opt.db_mode == dev::doorbell_mode::db_store) {
    // GPU threads ring the doorbell themselves: map the UAR page into the GPU as I/O memory.
    if (q->uar_gpu_db == 0) {
      std::string msg;
      const gpu::cuda_driver_api* cu = gpu::cuda_driver(&msg);
      if (cu == nullptr) {
        *why = "the UAR page cannot be mapped for GPU stores: " + msg + "; export with doorbell_mode::cpu_assisted";
        return status::not_supported;
      }
      void* base = q->uar->base_addr;
      gpu::cu::result r = cu->mem_host_register(
          base, uar_page_bytes,
          gpu::cu::host_register_iomemory | gpu::cu::host_register_devicemap | gpu::cu::host_register_portable);
      gpu::cu::deviceptr dptr = 0;
      if (r == gpu::cu::success) {
        q->uar_registered = base;
        r = cu->mem_host_get_device_pointer(&dptr, base, 0);
      }
      if (r != gpu::cu::success) {
        *why = "cuMemHostRegister(IOMEMORY) of the UAR page failed: " + gpu::describe(cu, r) +
               " (no PCIe peer-to-peer path from the GPU to the NIC?); export with doorbell_mode::cpu_assisted";
        return status::not_supported;
      }
      q->uar_gpu_db = dptr + static_cast<uint64_t>(static_cast<uint8_t*>(q->uar->reg_addr) - static_cast<uint8_t*>(base));
    }
    db = reinterpret_cast<uint64_t*>(static_cast<uintptr_t>(q->uar_gpu_db));
  }
  *out = dev::qp_handle{};
  out->sq_buf = q->wq.data() + q->rq_bytes;
  out->log_sq_wqebbs = q->log_sq;
  out->qpn = q->qpn;
  out->dbrec = reinterpret_cast<prm::qp_dbrec*>(q->dbr.data());
  out->uar_db = db;  // cpu_assisted: the CPU doorbell service rings this CPU mapping
  out->bf_reg = nullptr;
  out->bf_size = 0;
  out->db_mode = opt.db_mode;
  out->max_inline = q->max_inline;
  out->max_send_wqebbs = q->max_send_wqebbs;
  out->rq_buf = q->srq != nullptr ? nullptr : q->wq.data();  // on an SRQ: no RQ (receives: opt.srq)
  out->log_rq_wqes = q->log_rq;
  out->log_rq_stride = q->log_rq_stride;
  out->host_doorbell_hook = nullptr;  // the NIC sees the doorbell by itself
  out->host_poll_hook = nullptr;
  out->host_hook_ctx = nullptr;
  out->err_state = dev::no_error_state;
  return status::ok;
}

}  // namespace gdaki::mlx5
