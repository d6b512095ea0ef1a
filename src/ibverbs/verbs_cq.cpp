// Completion queues and completion channels of the soft device.
//
// An ibv_cq is a view over gdaki CQs: every QP gets a private send CQ and receive CQ (the
// data path needs a send CQ per exported QP: docs/design.md 18), and an ibv_cq reports
// the completions of the QP sides attached to it. ibv_poll_cq polls those sides with the
// data path's own pollers (dev::sq_poll, dev::rq_poll) and turns each mlx5 CQE into an
// ibv_wc, as rdma-core's mlx5 provider does.
//
// Events: the soft NIC has no CQ arming (docs/soft-nic.md), so a per-context notifier
// thread watches the armed CQs. Like an armed mlx5 CQ it fires when a CQE waits at the
// consumer index (one that arrived before the arm included, so no wake-up is lost), then
// disarms; the event is the ibv_cq pointer written into the channel's pipe, which
// ibv_get_cq_event reads. The pipe's read end is the channel fd, so poll/epoll work.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/env_config.hpp"
#include "gdaki/device/cq.hpp"
#include "gdaki/device/sq.hpp"
#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

// Read once; ibv_open_device reads it first, so a malformed value fails there, naming the
// variable and the values it accepts (src/core/env_config.cpp).
bool verbs_log_errors() {
  static const bool on = env::read_bool("GDAKI_VERBS_LOG_ERRORS", false);
  return on;
}

namespace {

ibv_wc_status status_of(prm::syndrome s) {
  switch (s) {
    case prm::syndrome::none: return IBV_WC_SUCCESS;
    case prm::syndrome::local_length: return IBV_WC_LOC_LEN_ERR;
    case prm::syndrome::local_qp_op: return IBV_WC_LOC_QP_OP_ERR;
    case prm::syndrome::local_prot: return IBV_WC_LOC_PROT_ERR;
    case prm::syndrome::wr_flush: return IBV_WC_WR_FLUSH_ERR;
    case prm::syndrome::mw_bind: return IBV_WC_MW_BIND_ERR;
    case prm::syndrome::bad_resp: return IBV_WC_BAD_RESP_ERR;
    case prm::syndrome::local_access: return IBV_WC_LOC_ACCESS_ERR;
    case prm::syndrome::remote_inval_req: return IBV_WC_REM_INV_REQ_ERR;
    case prm::syndrome::remote_access: return IBV_WC_REM_ACCESS_ERR;
    case prm::syndrome::remote_op: return IBV_WC_REM_OP_ERR;
    case prm::syndrome::transport_retry_exc: return IBV_WC_RETRY_EXC_ERR;
    case prm::syndrome::rnr_retry_exc: return IBV_WC_RNR_RETRY_EXC_ERR;
    case prm::syndrome::remote_aborted: return IBV_WC_REM_ABORT_ERR;
  }
  return IBV_WC_GENERAL_ERR;
}

// GDAKI_VERBS_LOG_ERRORS=1: print every error completion (the first one names the cause;
// programs often print only the first they poll, which may be a flush of another queue).
void report_error(const qp_state* q, bool send, const ibv_wc& w, const dev::completion& c) {
  if (!verbs_log_errors()) return;
  std::fprintf(stderr, "gdaki verbs: qp 0x%06x %s wr_id %llu: ibv_wc_status %d (syndrome 0x%02x)\n", q->q.qpn(),
               send ? "send" : "recv", static_cast<unsigned long long>(w.wr_id), static_cast<int>(w.status),
               static_cast<unsigned>(c.syndrome));
}

// Moves up to n send completions of q into wc. Unsignalled WQEs that the data path's
// auto-signal rule asked a CQE for (docs/design.md 16) are consumed silently: they only
// return ring space, as the application never asked to hear about them.
int drain_send(qp_state* q, int n, ibv_wc* wc) {
  int got = 0;
  dev::qp_handle& h = *q->h;
  const uint32_t mask = dev::sq_wqebbs(h) - 1;
  dev::completion c;
  while (got < n && dev::sq_poll(h, &c) == status::ok) {
    const send_slot& s = q->sq_slots[c.wqe_counter & mask];
    if (c.ok() && !s.signaled) continue;
    ibv_wc& w = wc[got++];
    std::memset(&w, 0, sizeof w);
    w.wr_id = s.wr_id;
    w.status = status_of(c.syndrome);
    w.opcode = static_cast<ibv_wc_opcode>(s.wc_opcode);
    w.vendor_err = c.vendor_syndrome;
    w.byte_len = s.byte_len;
    w.qp_num = q->q.qpn();
    if (!c.ok()) report_error(q, true, w, c);
  }
  return got;
}

// One receive completion: rq_poll retires its WQE (an SRQ's goes back on the free list,
// so the SRQ's lock is held until its wr_id is read: no post may refill it before).
bool poll_recv(qp_state* q, dev::completion* c, uint64_t* wr_id) {
  dev::qp_handle& h = *q->h;
  if (q->srq == nullptr) {
    if (dev::rq_poll(h, c) != status::ok) return false;
    *wr_id = q->rq_wr_id[c->wqe_counter & (dev::rq_wqes(h) - 1)];
    return true;
  }
  std::lock_guard<std::mutex> lock(q->srq->mu);
  if (dev::rq_poll(h, c) != status::ok) return false;
  *wr_id = q->srq->wr_id[c->wqe_counter & (q->srq->wr_id.size() - 1)];
  return true;
}

int drain_recv(qp_state* q, int n, ibv_wc* wc) {
  int got = 0;
  dev::completion c;
  uint64_t wr_id = 0;
  while (got < n && poll_recv(q, &c, &wr_id)) {
    ibv_wc& w = wc[got++];
    std::memset(&w, 0, sizeof w);
    w.wr_id = wr_id;
    w.status = status_of(c.syndrome);
    w.vendor_err = c.vendor_syndrome;
    w.qp_num = q->q.qpn();
    w.opcode = IBV_WC_RECV;
    if (!c.ok()) {
      report_error(q, false, w, c);
      continue;
    }
    w.byte_len = c.byte_cnt;
    w.src_qp = c.src_qpn;
    if (c.opcode == prm::cqe_opcode::resp_wr_imm) w.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    if (c.opcode == prm::cqe_opcode::resp_wr_imm || c.opcode == prm::cqe_opcode::resp_send_imm) {
      w.wc_flags |= IBV_WC_WITH_IMM;
      w.imm_data = c.imm_raw;  // already in wire (network) order, as ibv_wc wants it
    }
  }
  return got;
}

// Whether a CQE waits at the consumer index of any side attached to cq. Send sides first
// let the soft NIC's wires collect responses (the poll hook), as a poll would.
bool has_completion(cq_state* cq) {
  std::lock_guard<std::mutex> lock(cq->mu);
  for (const cq_member& m : cq->members) {
    dev::qp_handle& h = *m.qp->h;
    dev::cq_handle& ch = m.send ? *m.qp->hs : *m.qp->hr;
    if (m.send && h.host_poll_hook != nullptr) h.host_poll_hook(h.host_hook_ctx);
    uint32_t tail;
    if (dev::cqe_ready(ch, dev::arch::load_acquire(&ch.ci), &tail)) return true;
  }
  return false;
}

void notifier_loop(soft_context* ctx) {
  context_state* st = ctx->st;
  std::unique_lock<std::mutex> lk(st->mu);
  uint32_t idle = 0;
  while (!st->stopping) {
    if (st->armed.empty()) {
      st->cv.wait(lk);
      idle = 0;
      continue;
    }
    bool fired = false;
    for (auto it = st->armed.begin(); it != st->armed.end();) {
      cq_state* cq = *it;
      if (!has_completion(cq)) {
        ++it;
        continue;
      }
      cq->armed.store(false, std::memory_order_release);
      it = st->armed.erase(it);
      fired = true;
      if (ibv_comp_channel* ch = cq->owner->channel; ch != nullptr) {
        ibv_cq* ev = cq->owner;
        // A full pipe drops the event: its reader is already far behind and will poll.
        const ssize_t w = write(channel_of(ch)->write_fd, &ev, sizeof ev);
        (void)w;
      }
    }
    if (fired) {
      idle = 0;
      continue;
    }
    // Back off: yield for a while after activity, then sleep in growing steps up to 100 us
    // (an armed but quiet CQ costs a wake-up every 100 us, never a spinning core).
    if (++idle < 64) {
      lk.unlock();
      std::this_thread::yield();
      lk.lock();
    } else {
      const auto us = std::min<uint32_t>(100, (idle - 63) * 5);
      st->cv.wait_for(lk, std::chrono::microseconds(us));
    }
  }
}

}  // namespace

ibv_comp_channel* soft_create_comp_channel(ibv_context* c) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  // The notifier never blocks on a full pipe (an event nobody reads is not worth a stall).
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  auto* ch = new soft_channel{};
  ch->ch.context = c;
  ch->ch.fd = fds[0];
  ch->ch.refcnt = 0;
  ch->write_fd = fds[1];
  return &ch->ch;
}

int soft_destroy_comp_channel(ibv_comp_channel* c) {
  soft_channel* ch = channel_of(c);
  if (ch->ch.refcnt != 0) return EBUSY;
  close(ch->ch.fd);
  close(ch->write_fd);
  delete ch;
  return 0;
}

ibv_cq* soft_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int vector) {
  if (cqe < 1 || vector != 0) {
    errno = soft_fail("ibv_create_cq", status::invalid,
                      "cqe " + std::to_string(cqe) + ", comp_vector " + std::to_string(vector) +
                          ": need cqe >= 1 and vector 0 (one completion vector)");
    return nullptr;
  }
  static std::atomic<uint32_t> next_handle{1};
  auto* q = new soft_cq{};
  q->st = new cq_state;
  q->st->owner = &q->cq;
  q->cq.context = c;
  q->cq.channel = ch;
  q->cq.cq_context = cq_context;
  q->cq.handle = next_handle.fetch_add(1);
  q->cq.cqe = cqe;
  pthread_mutex_init(&q->cq.mutex, nullptr);
  pthread_cond_init(&q->cq.cond, nullptr);
  if (ch != nullptr) ++ch->refcnt;
  return &q->cq;
}

int soft_destroy_cq(ibv_cq* c) {
  soft_cq* q = cq_of(c);
  {
    std::lock_guard<std::mutex> lock(q->st->mu);
    if (!q->st->members.empty()) return EBUSY;  // a QP still reports here
  }
  context_state* st = ctx_of(c->context)->st;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->armed.erase(std::remove(st->armed.begin(), st->armed.end(), q->st), st->armed.end());
  }
  if (c->channel != nullptr) --c->channel->refcnt;
  pthread_mutex_destroy(&c->mutex);
  pthread_cond_destroy(&c->cond);
  delete q->st;
  delete q;
  return 0;
}

int soft_poll_cq(ibv_cq* c, int n, ibv_wc* wc) {
  cq_state* cq = cq_of(c)->st;
  std::lock_guard<std::mutex> lock(cq->mu);
  const size_t m = cq->members.size();
  int got = 0;
  for (size_t k = 0; k < m && got < n; ++k) {
    const cq_member& mem = cq->members[(cq->next + k) % m];
    got += mem.send ? drain_send(mem.qp, n - got, wc + got) : drain_recv(mem.qp, n - got, wc + got);
  }
  if (m != 0) cq->next = (cq->next + 1) % m;
  return got;
}

int soft_req_notify_cq(ibv_cq* c, int) {
  // solicited_only is served as "any completion": a superset of the events asked for,
  // which event loops tolerate (they poll after each event); docs/verbs.md, Limits.
  soft_cq* q = cq_of(c);
  soft_context* ctx = ctx_of(c->context);
  context_state* st = ctx->st;
  std::lock_guard<std::mutex> lock(st->mu);
  if (!q->st->armed.exchange(true)) st->armed.push_back(q->st);
  if (!st->notifier.joinable()) st->notifier = std::thread(notifier_loop, ctx);
  st->cv.notify_one();
  return 0;
}

int soft_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  ibv_cq* got = nullptr;
  for (;;) {
    const ssize_t r = read(ch->fd, &got, sizeof got);
    if (r == static_cast<ssize_t>(sizeof got)) break;
    if (r < 0 && errno == EINTR) continue;
    if (r >= 0) errno = EIO;
    return -1;
  }
  *cq = got;
  *cq_context = got->cq_context;
  ++cq_of(got)->st->events;
  return 0;
}

void soft_ack_cq_events(ibv_cq* cq, unsigned n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

void soft_stop_notifier(context_state* st) {
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stopping = true;
    st->cv.notify_all();
  }
  if (st->notifier.joinable()) st->notifier.join();
}

}  // namespace gdaki::ibverbs
