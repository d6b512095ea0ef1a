// RC queue pairs: creation (SQ/RQ depth, max inline, ring placement), the state machine
// RESET -> INIT -> RTR -> RTS (and ERR, back to RESET) with the attributes each step needs,
// and export of the plain-data qp_handle the data path posts through.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gdaki/device/handles.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/memory.hpp"
#include "gdaki/verbs/pd.hpp"

namespace gdaki::verbs {

class srq;  // gdaki/verbs/srq.hpp

// Values of ibv_qp_state (PRM 6.1).
enum class qp_state : uint32_t { reset = 0, init = 1, rtr = 2, rts = 3, sqd = 4, sqe = 5, err = 6 };
const char* to_string(qp_state s);

struct qp_init {
  const cq* send_cq = nullptr;  // required; must serve this QP only for a device poller
  const cq* recv_cq = nullptr;  // required; a different CQ from send_cq for the data path
  uint32_t sq_wqebbs = 256;     // SQ depth in 64-byte WQEBBs; rounded up to a power of 2
  uint32_t rq_wqes = 256;       // RQ depth in receive WQEs; rounded up to a power of 2
                                // (ignored with srq: such a QP has no RQ)
  const verbs::srq* srq = nullptr;  // receive from this shared receive queue (same PD), not an RQ
  uint32_t max_send_sge = 4;    // largest gather list in one send WQE
  uint32_t max_recv_sge = 4;    // largest scatter list in one receive WQE (sets the stride)
  uint32_t max_inline = 64;     // largest inline payload, bytes
  placement sq_ring{};          // where the SQ ring lives (DBR and doorbell page: provider)
  placement rq_ring{};          // where the RQ ring lives
  uint32_t user_index = 0;      // written to CQE srqn_uidx (24 bits)
  // Responder scatter-to-CQE (mlx5 QPC cs_res = 1, "data 32 in CQE"): a received SEND or
  // SEND_IMM of 1..32 bytes is delivered inside its receive CQE (bytes 0..31, op_own
  // format bit 0x04, PRM 5.1) instead of the posted buffer; the poller copies it out
  // (dev::recv_poll / recv_wait do). Off by default, as GDAKI pollers expect payloads in
  // their buffers (docs/mlx5-datapath.md pitfall 11).
  bool scatter_to_cqe = false;
};

// What the provider granted at creation.
struct qp_caps {
  uint32_t sq_wqebbs = 0, rq_wqes = 0, rq_stride = 0, max_send_sge = 0, max_recv_sge = 0, max_inline = 0,
           max_send_wqebbs = 0;
};

// Path to the peer (ibv_ah_attr, reduced to what RC needs).
struct address {
  uint16_t dlid = 0;
  uint8_t port_num = 1;
  uint8_t sgid_index = 0;
  bool is_global = false;
  uint8_t dgid[16] = {};
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
  uint8_t sl = 0;
  // Connection token agreed out of band (soft provider wires: a peer is accepted only with
  // the token its QP was given at RTR). Hardware providers ignore it.
  uint8_t token[16] = {};
};

// Which qp_attr fields a modify() sets: the values of enum ibv_qp_attr_mask. The bits marked "no field" are IBA attributes that
// qp_attr does not carry: modify names them and refuses them (not_supported).
namespace qp_attr_mask {
inline constexpr uint32_t state = 1u << 0;
inline constexpr uint32_t cur_state = 1u << 1;            // no field
inline constexpr uint32_t en_sqd_async_notify = 1u << 2;  // no field
inline constexpr uint32_t access_flags = 1u << 3;
inline constexpr uint32_t pkey_index = 1u << 4;
inline constexpr uint32_t port = 1u << 5;
inline constexpr uint32_t qkey = 1u << 6;  // no field (UD only)
inline constexpr uint32_t av = 1u << 7;
inline constexpr uint32_t path_mtu = 1u << 8;
inline constexpr uint32_t timeout = 1u << 9;
inline constexpr uint32_t retry_cnt = 1u << 10;
inline constexpr uint32_t rnr_retry = 1u << 11;
inline constexpr uint32_t rq_psn = 1u << 12;
inline constexpr uint32_t max_qp_rd_atomic = 1u << 13;
inline constexpr uint32_t alt_path = 1u << 14;  // no field
inline constexpr uint32_t min_rnr_timer = 1u << 15;
inline constexpr uint32_t sq_psn = 1u << 16;
inline constexpr uint32_t max_dest_rd_atomic = 1u << 17;
inline constexpr uint32_t path_mig_state = 1u << 18;  // no field
inline constexpr uint32_t cap = 1u << 19;             // no field
inline constexpr uint32_t dest_qpn = 1u << 20;
// Required per RC transition (ibv_modify_qp(3)).
inline constexpr uint32_t reset_to_init = state | pkey_index | port | access_flags;
inline constexpr uint32_t init_to_rtr = state | av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer;
inline constexpr uint32_t rtr_to_rts = state | sq_psn | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic;
}  // namespace qp_attr_mask

struct qp_attr {
  qp_state state = qp_state::reset;
  // RESET -> INIT
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  uint32_t access_flags = 0;  // access:: flags gating incoming WRITE / READ / ATOMIC
  // INIT -> RTR
  address av;
  path_mtu mtu = path_mtu::mtu_4096;
  uint32_t dest_qp_num = 0;
  uint32_t rq_psn = 0;
  uint8_t max_dest_rd_atomic = 16;
  uint8_t min_rnr_timer = 1;  // IBA encoding: 1 = 0.01 ms ... 31 = 491.52 ms, 0 = 655.36 ms
  // RTR -> RTS
  uint32_t sq_psn = 0;
  uint8_t timeout = 14;     // 4.096 us * 2^timeout per try; 0 = wait forever
  uint8_t retry_cnt = 7;    // transport retries before TRANSPORT_RETRY_EXC
  uint8_t rnr_retry = 7;    // RNR retries before RNR_RETRY_EXC; 7 = forever
  uint8_t max_rd_atomic = 16;
};

// Options for export_handle.
struct qp_export_options {
  dev::doorbell_mode db_mode = dev::doorbell_mode::db_store;
  // Set the host doorbell hook (CPU initiators: the provider may execute the new WQEs on
  // the ringing thread). Leave on for host-placed handles; it is never called on a GPU.
  bool host_hook = true;
  // Auto-signal period in WQEBBs (dev::qp_handle::auto_signal_wqebbs): 0 = the default,
  // the largest power of two <= ring / 2 that keeps the largest WQE live; no_auto_signal
  // turns it off (the caller then signals at least every ring / 2 WQEBBs itself, or posts
  // stall once the ring is full of unsignalled WQEs).
  uint32_t auto_signal_wqebbs = 0;
  static constexpr uint32_t no_auto_signal = ~uint32_t{0};
  // Refuse a send CQ with fewer CQEs than the SQ has WQEBBs (every WQE may be signalled,
  // so that many CQEs can be outstanding). Only tests of CQ overrun turn it off.
  bool check_cq_depth = true;
  // Where the caller placed the handle of the QP's SRQ (verbs::srq::host_handle() or an
  // export_handle() copy); required for a QP created with qp_init::srq, else ignored.
  dev::srq_handle* srq = nullptr;
};

class qp {
 public:
  qp() = default;
  // Creates an RC QP in RESET. Throws gdaki::error: invalid (missing CQs, depths too
  // large, send_cq == recv_cq), not_supported (placement the provider cannot serve).
  qp(const pd& p, const qp_init& init);
  qp(qp&&) noexcept = default;
  qp& operator=(qp&&) noexcept = default;
  qp(const qp&) = delete;
  qp& operator=(const qp&) = delete;
  ~qp() = default;  // destroys the QP; once it returns the NIC no longer touches its rings

  explicit operator bool() const { return ref_ != nullptr; }
  uint32_t qpn() const { return qpn_; }
  const qp_caps& caps() const { return caps_; }

  // Applies the fields selected by `mask`. The transition from the current state to
  // attr.state must be legal and carry the attributes ibv_modify_qp(3) requires for RC.
  // Throws gdaki::error naming the QP, the transition and the cause.
  void modify(const qp_attr& attr, uint32_t mask);

  // Returns the current attributes (state included; the NIC moves a QP to ERR by itself).
  qp_attr query() const;
  qp_state state() const;

  // Convenience steps, each one modify() with the required mask.
  void to_init(uint32_t access_flags, uint8_t port = 1);
  void to_rtr(uint32_t remote_qpn, const qp_attr& attr = {});  // uses av, mtu, psn, rnr fields
  void to_rts(const qp_attr& attr = {});                       // uses psn, timeout, retries
  void to_err();
  void to_reset();

  // Returns the plain-data handle for the data path. send_cq/recv_cq are where the caller
  // placed the exported CQ handles of this QP's CQs (the data path polls them). Counters
  // start at zero, err_state = dev::no_error_state. After a return to RESET, export again.
  // Throws gdaki::error.
  dev::qp_handle export_handle(dev::cq_handle* send_cq, dev::cq_handle* recv_cq,
                               const qp_export_options& opt = {}) const;

  const std::shared_ptr<detail::object_ref>& ref() const { return ref_; }

 private:
  std::string label() const;
  std::shared_ptr<detail::object_ref> ref_;
  uint32_t qpn_ = 0;
  qp_caps caps_;
};

// Connects a local RC QP in RESET to the remote QP `remote_qpn`: INIT (with access_flags
// for incoming ops), RTR, RTS, using `attr` for the path, PSNs, timers and retries.
void connect_rc(qp& q, uint32_t remote_qpn, uint32_t access_flags, const qp_attr& attr = {});

}  // namespace gdaki::verbs
