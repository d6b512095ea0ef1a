// internal: the ibverbs objects of the soft device. Each is a C struct that rdma-core's
// inline functions read (ibv_context, ibv_cq, ibv_qp_ex, ...) as its FIRST member, so the
// pointer an application holds converts back to ours, followed by a pointer to the C++
// state (the gdaki control-path objects and the data-path handles). The ibverbs structs
// are standard layout and the wrappers add only a pointer, so the casts are exact.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <condition_variable>

#include "gdaki/device/handles.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "gdaki/verbs/srq.hpp"

namespace gdaki::ibverbs {

struct cq_state;
struct qp_state;

// One open soft device: the gdaki device, its wire address (the GID) and the thread that
// turns new CQEs on armed CQs into completion-channel events.
struct context_state {
  verbs::device dev;
  uint8_t gid[16] = {};
  uint32_t index = 0;
  int async_fd[2] = {-1, -1};  // a pipe nobody writes: async events never happen
  std::mutex mu;               // guards armed and the notifier's lifetime
  std::condition_variable cv;
  std::vector<cq_state*> armed;
  std::thread notifier;
  bool stopping = false;
};

struct soft_context {
  verbs_context vctx;  // rdma-core finds ops and the extended ops here; ibv_context is its last field
  context_state* st;
};

struct soft_pd {
  ibv_pd pd;
  verbs::pd* obj;
};

struct soft_mr {
  ibv_mr mr;
  verbs::mr* obj;
};

struct soft_channel {
  ibv_comp_channel ch;
  int write_fd;  // the notifier writes the ibv_cq pointer of each event here; ch.fd reads it
};

// One side (send or receive) of one QP whose completions an ibv_cq reports.
struct cq_member {
  qp_state* qp;
  bool send;
};

struct cq_state {
  ibv_cq* owner = nullptr;  // the application's handle, which an event carries
  std::mutex mu;  // guards members; held while polling so a QP cannot vanish under a poll
  std::vector<cq_member> members;
  size_t next = 0;  // round-robin start, so one busy QP does not hide the others
  std::atomic<bool> armed{false};
  uint32_t events = 0;  // events delivered (ibv_get_cq_event)
};

struct soft_cq {
  ibv_cq cq;
  cq_state* st;
};

// A shared receive queue: gdaki's verbs::srq, posted and freed through the handle it keeps
// (its host_handle()), and the wr_id of each posted WQE by index (what the CQE names).
struct srq_state {
  verbs::srq obj;
  std::vector<uint64_t> wr_id;
  // One poster at a time (rdma-core's mlx5 provider takes its SRQ lock too), and a poller
  // holds it while it reads a WQE's wr_id and frees the WQE, so that no post reuses the
  // WQE before its wr_id is read.
  std::mutex mu;
  uint32_t max_sge = 0;
};

struct soft_srq {
  ibv_srq srq;
  srq_state* st;
};

// What post_send remembers per SQ slot (indexed by the WQE's first WQEBB) for its CQE.
struct send_slot {
  uint64_t wr_id;
  uint32_t byte_len;
  uint8_t wc_opcode;  // ibv_wc_opcode
  bool signaled;      // the application asked for a completion
};

struct qp_state {
  soft_context* ctx = nullptr;
  verbs::cq scq, rcq;  // private CQs: the data path wants one send CQ per exported QP
  verbs::qp q;
  // The exported handles, on the heap so their addresses stay fixed (the data path keeps
  // pointers to the CQ handles inside the QP handle).
  std::unique_ptr<dev::cq_handle> hs, hr;
  std::unique_ptr<dev::qp_handle> h;
  std::vector<send_slot> sq_slots;
  std::vector<uint64_t> rq_wr_id;
  srq_state* srq = nullptr;  // receives come from this SRQ (the QP has no RQ)
  uint32_t max_send_sge = 0, max_recv_sge = 0, max_inline = 0, max_send_wr = 0, max_recv_wr = 0;
  bool sig_all = false;
  cq_state* send_cq = nullptr;
  cq_state* recv_cq = nullptr;
  std::mutex send_mu, recv_mu;  // ibv_post_send / ibv_post_recv are thread-safe per QP
  uint8_t local_gid[16] = {};
  // ibv_qp_ex work-request builder state (ibv_wr_start .. ibv_wr_complete).
  std::vector<ibv_send_wr> wr_list;
  std::vector<std::unique_ptr<ibv_sge[]>> wr_sges;
  std::vector<std::unique_ptr<uint8_t[]>> wr_inline;
  int wr_error = 0;
};

struct soft_qp {
  ibv_qp_ex qpx;  // qpx.qp_base is the ibv_qp applications hold
  qp_state* st;
};

inline soft_context* ctx_of(ibv_context* c) { return reinterpret_cast<soft_context*>(verbs_get_ctx(c)); }
inline soft_pd* pd_of(ibv_pd* p) { return reinterpret_cast<soft_pd*>(p); }
inline soft_mr* mr_of(ibv_mr* m) { return reinterpret_cast<soft_mr*>(m); }
inline soft_cq* cq_of(ibv_cq* c) { return reinterpret_cast<soft_cq*>(c); }
inline soft_qp* qp_of(ibv_qp* q) { return reinterpret_cast<soft_qp*>(q); }
inline soft_srq* srq_of(ibv_srq* s) { return reinterpret_cast<soft_srq*>(s); }
inline soft_channel* channel_of(ibv_comp_channel* c) { return reinterpret_cast<soft_channel*>(c); }

}  // namespace gdaki::ibverbs
