// The soft wire's requester. It runs on the executor's thread: it sends one request frame
// per WQE without waiting, up to the window (config::wire_window requests and
// wire_window_bytes of payload per connection), numbering each QP's requests (PSN); any
// thread progressing a QP of the connection reads the responses, which come in request
// order (the connection's FIFO), and finishes their ops. Payload bytes move once: from the
// requester's registered memory into the socket (writev), or, on one host, by one
// cross-process copy the responder makes, or by one memcpy through a mapping of the peer's
// MR (the mapped path, docs/soft-nic.md). Connections are dialled and authenticated in
// wire_connection.cpp.
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "../engine/executor.hpp"
#include "../engine/placement.hpp"
#include "../engine/wqe_parse.hpp"
#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "gdaki/verbs/mr.hpp"
#include "shm_map.hpp"
#include "stream_copy.hpp"
#include "wire.hpp"
#include "wire_frame.hpp"
#include "wire_internal.hpp"
#include "wire_proto.hpp"
#include "wire_test_hooks.hpp"
#include "wire_transport.hpp"

namespace gdaki::soft::wire {

using prm::send_opcode;
using prm::syndrome;

namespace {

// The connection broke, or its peer stopped answering: every request in flight on it
// fails (the executor turns that into TRANSPORT_RETRY_EXC and flushes). Caller holds mu.
void kill_locked(client_conn& c) {
  c.dead.store(true, std::memory_order_release);
  ::shutdown(c.fd, SHUT_RDWR);
  for (const std::shared_ptr<wire_op>& op : c.fifo) {
    op->result = {outcome::fatal};
    op->done.store(true, std::memory_order_release);
  }
  c.fifo.clear();
  c.tx.bytes.clear();
  c.unsent = 0;
  c.resp_bytes = 0;
  c.req_bytes = 0;
}

constexpr uint64_t response_overhead = sizeof(frame_hdr);
// After a read that found no answer, a look that may not wait skips the recv this long
// (endpoint::poll says why).
constexpr uint64_t poll_gap_ns = 2000;
// Small requests wait in the connection's queue only behind this many sent and unanswered
// (client_conn::tx). Behind one, a short exchange (a WRITE, then the READ that checks it;
// a put, then its signal) would make its second request wait a round trip. A stream of
// small WRITEs has far more than this in flight, so it still leaves in batches.
constexpr size_t hold_behind_sent = 4;
// Response bytes the requests in flight may bring back at most. The server writes every
// response in full before it reads the next request; as long as what it owes us fits in
// the socket buffers, it never blocks on us, so it keeps reading, so our sends never block
// on it: no deadlock even though requests and responses share one connection.
constexpr uint64_t response_budget = 64 * 1024;

// Places the data of a successful READ response (or an atomic's old value) where the WQE
// said, after checking again that those local buffers are still registered: the user may
// have deregistered them while the request was in flight (as on a NIC: a local
// protection error).
bool place_response(client_conn& c, wire_op& op, uint64_t len, uint64_t deadline, syndrome* s) {
  bool keys_ok = true;
  for (uint32_t i = 0; i < op.num_sg; ++i) {
    const gather_entry& g = op.sg[i];
    if (g.length != 0 && !keys().local_range_ok(g.lkey, op.pdn, g.addr, g.length, true)) keys_ok = false;
  }
  if (!keys_ok) {
    *s = syndrome::local_prot;
    return drain(c.fd, c.rx, len, deadline);
  }
  if (op.atomic_size != 0) {
    uint64_t old = 0;
    if (!rx_read(c.fd, c.rx, &old, 8, deadline)) return false;
    // Host order, as the in-process wire (IBV_ATOMIC_HCA mode, PRM 6.4).
    std::memcpy(reinterpret_cast<void*>(op.sg[0].addr), &old, op.atomic_size);
    return true;
  }
  iovec out[max_gather];
  int n = 0;
  for (uint32_t i = 0; i < op.num_sg; ++i) out[n++] = {reinterpret_cast<void*>(op.sg[i].addr), op.sg[i].length};
  return rx_readv(c.fd, c.rx, out, n, deadline);
}

// How read_responses_locked reads. `look`: one recv, then the requests queued behind the
// answers go out. `drain`: the connection broke under a send; every answer the peer sent
// before it went is read (recv until the socket is empty or ends), and nothing is sent.
enum class read_mode { look, drain };

// Reads every response that has arrived and finishes its op. Caller holds the key table's
// shared lock and c.mu. Returns how many ops it finished.
uint32_t read_responses_locked(client_conn& c, uint32_t timeout_ms, read_mode mode = read_mode::look) {
  if (mode == read_mode::look && test_hooks::hold_responses.load(std::memory_order_relaxed)) [[unlikely]] {
    return 0;
  }
  uint32_t got = 0;
  bool filled = false;
  uint64_t deadline = 0;  // read from the clock once, when first needed
  while (!c.dead.load(std::memory_order_relaxed)) {
    if (c.rx.size() == 0) {
      // One recv per look: another would mostly find nothing (a syscall for EAGAIN).
      if (filled && mode == read_mode::look) break;
      filled = true;
      const int f = rx_fill(c.fd, c.rx);
      if (f < 0) {
        kill_locked(c);
        break;
      }
      if (f == 0) {
        if (got == 0) c.empty_read_ns.store(now_ns(), std::memory_order_relaxed);
        break;
      }
    }
    if (deadline == 0) deadline = now_ms() + timeout_ms;
    frame_hdr rh{};
    if (c.fifo.size() <= c.unsent || !rx_read(c.fd, c.rx, &rh, sizeof(rh), deadline)) {
      kill_locked(c);  // bytes nobody asked for (no request sent), or a response cut short
      break;
    }
    std::shared_ptr<wire_op> op = c.fifo.front();
    frame_hdr req = make_hdr(ftype::request, 0, op->src_qpn, op->dst_qpn, op->psn);
    const response_kind rk = check_response(rh, req, op->resp_len);
    if (rk == response_kind::bad) {
      kill_locked(c);
      break;
    }
    outcome o{outcome::done};
    if (rk == response_kind::drop) o = {outcome::retry};
    if (rk == response_kind::rnr) o = {outcome::rnr, syndrome::none, rh.rnr_timer};
    if (rk == response_kind::done) {
      o.synd = static_cast<syndrome>(rh.syndrome);
      if (rh.length != 0 && !place_response(c, *op, rh.length, deadline, &o.synd)) {
        kill_locked(c);
        break;
      }
    }
    c.fifo.pop_front();
    c.resp_bytes -= op->resp_len + response_overhead;
    c.req_bytes -= op->req_len;
    op->result = o;
    op->done.store(true, std::memory_order_release);
    ++got;
  }
  // Every request sent has its answer: the small requests queued meanwhile go now,
  // together (flushing at each answer would send one or two each on a fast peer).
  if (mode == read_mode::look && got != 0 && c.unsent != 0 && c.fifo.size() == c.unsent &&
      !c.dead.load(std::memory_order_relaxed)) {
    if (!flush_queued(c.fd, c.tx, now_ms() + timeout_ms)) kill_locked(c);
    c.unsent = 0;
    test_hooks::request_sends.fetch_add(1, std::memory_order_relaxed);
  }
  return got;
}

// A send (or a copy into the peer's memory) found the connection broken: the peer closed
// it or died. The answers it sent before it went may still sit in our socket, unread;
// they are read first, as a NIC has the ACKs that arrived before its peer went, and only
// the requests left unanswered fail. (Killed at once, an ACK a moment from being read was
// lost with them: rdma-core's ibv_srq_pingpong, whose server exits as soon as it has its
// counts, then saw a SEND the server had received fail.) Caller holds the key table's
// shared lock and c.mu.
void break_locked(client_conn& c, uint32_t timeout_ms) {
  if (!c.dead.load(std::memory_order_relaxed)) (void)read_responses_locked(c, timeout_ms, read_mode::drain);
  kill_locked(c);
}

// Asks the peer whether we may map the MR behind rkey (same host, nothing in flight on
// the connection, so the reply is the next frame and nothing sits in rx). Caches the
// answer. Returns the mapping, or null (not mappable: use requests). False in *alive if
// the connection broke.
shm::mapping* map_peer_mr(client_conn& c, uint32_t rkey, uint32_t src, uint32_t dst, uint32_t seq, uint64_t deadline,
                          bool* alive) {
  *alive = true;
  auto it = c.maps.find(rkey);
  if (it != c.maps.end()) return it->second.get();
  if (!c.fifo.empty() || c.rx.size() != 0) return nullptr;  // ask later, when quiet
  frame_hdr h = make_hdr(ftype::map, sizeof(map_body), src, dst, seq);
  map_body b{rkey, 0};
  iovec v[2] = {{&h, sizeof(h)}, {&b, sizeof(b)}};
  frame_hdr rh{};
  int fds[2] = {-1, -1};
  if (!writev_full(c.fd, v, 2, deadline) || recv_with_fds(c.fd, &rh, sizeof(rh), fds, 2, deadline) < 0) {
    *alive = false;
    return nullptr;
  }
  const map_reply mr = check_map_reply(rh, h);
  std::shared_ptr<shm::mapping> m;
  if (mr == map_reply::ok) {
    map_ok_body ok{};
    int more[2] = {-1, -1};
    const int n_more = recv_with_fds(c.fd, &ok, sizeof(ok), more, 2, deadline);
    if (n_more < 0) {
      *alive = false;
    } else {
      for (int i = 0; i < n_more; ++i) {
        if (fds[1] < 0) fds[fds[0] < 0 ? 0 : 1] = more[i];
        else ::close(more[i]);
      }
    }
    if (*alive && fds[0] >= 0 && fds[1] >= 0 && ok.length != 0) {
      if (c.table == nullptr) {
        void* t = ::mmap(nullptr, size_t{shm::table_slots} * sizeof(shm::revocation_slot), PROT_READ | PROT_WRITE,
                         MAP_SHARED, fds[1], 0);
        if (t != MAP_FAILED) {
          c.table = static_cast<shm::revocation_slot*>(t);
          c.table_map = t;
          c.table_len = size_t{shm::table_slots} * sizeof(shm::revocation_slot);
        }
      }
      const uint32_t slot = (rkey >> 8) - 2;
      auto mp = std::make_shared<shm::mapping>();
      void* base = c.table != nullptr && (rkey >> 8) >= 2 && slot < shm::table_slots
                       ? shm::map_file(fds[0], ok.file_off, ok.length, (ok.access & verbs::access::remote_write) != 0,
                                       &mp->map_addr, &mp->map_len)
                       : nullptr;
      if (base != nullptr) {
        mp->base = static_cast<uint8_t*>(base);
        mp->remote_addr = ok.addr;
        mp->length = ok.length;
        mp->access = ok.access;
        mp->rkey = rkey;
        mp->epoch = ok.epoch;
        mp->slot = &c.table[slot];
        m = std::move(mp);
      }
    }
  } else if (mr == map_reply::bad) {
    *alive = false;
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!*alive) return nullptr;
  c.maps[rkey] = m;
  return m.get();
}

enum class mapped_result : uint8_t { copied, out_of_range, revoked, dead };

// Whether w may go through a mapping of the target MR: an RDMA WRITE (no immediate), a
// READ or an atomic (the target word is memory both processes map, and every soft-NIC
// atomic is a compare-and-swap on the word, so one made here is atomic against the
// peer's engine and CPUs as one made there).
bool mapped_opcode(const parsed_wqe& w) {
  const auto op = static_cast<send_opcode>(w.opcode);
  return op == send_opcode::rdma_write || op == send_opcode::rdma_read || w.atomic_size != 0;
}

// A WRITE (no immediate), READ or atomic through a mapping: one memcpy per gather entry
// (an atomic: one compare-and-swap on the target word, its original value into the local
// result buffer), under a user count the owner's deregistration waits for. The local
// buffers were checked (and stay registered: the caller holds the key table's shared
// lock).
// WRITE data of stream_min bytes or more (0: never) goes with plain or streaming stores,
// whichever has been faster into this MR (stream_copy.hpp).
// Counts this copier into m's revocation slot, then checks that the grant is still the
// one m was made under (revoke() stores first, then waits for the count: seq_cst on both
// sides, Dekker style), so the owner's deregistration cannot finish while we copy. False,
// with the count taken back, when it was revoked. The caller releases the count after its
// copies (users.fetch_sub, release).
bool enter_grant(const shm::mapping& m) {
  m.slot->users.fetch_add(1, std::memory_order_seq_cst);
  if (m.slot->key.load(std::memory_order_seq_cst) != m.rkey || m.slot->epoch.load(std::memory_order_seq_cst) != m.epoch) {
    m.slot->users.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  return true;
}

mapped_result mapped_copy(int fd, uint32_t& copies, shm::mapping& m, const wqe_reader& r, const parsed_wqe& w,
                          uint32_t stream_min) {
  const bool atomic = w.atomic_size != 0;
  const bool write = w.opcode == static_cast<uint8_t>(send_opcode::rdma_write);
  // Outside the grant: the peer's responder reports the error, over the frame path. An
  // atomic needs the right to atomics and a writable mapping (granted with remote write);
  // a misaligned one is the responder's REMOTE_INVAL_REQ, so it goes there too.
  const uint32_t need = atomic ? verbs::access::remote_atomic | verbs::access::remote_write
                        : write ? verbs::access::remote_write
                                : verbs::access::remote_read;
  if ((m.access & need) != need) return mapped_result::out_of_range;
  if (atomic && w.raddr % w.atomic_size != 0) return mapped_result::out_of_range;
  if (w.raddr < m.remote_addr || w.length > m.length || w.raddr - m.remote_addr > m.length - w.length) {
    return mapped_result::out_of_range;
  }
  // Nothing else crosses this connection while we copy, so a dead peer shows only as EOF:
  // look every 256 copies (one syscall), which bounds what "completes" after a crash.
  if ((++copies & 255) == 0) {
    char x;
    const ssize_t n = ::recv(fd, &x, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return mapped_result::dead;
  }
  if (!enter_grant(m)) return mapped_result::revoked;  // deregistered: the peer's responder says so
  if (atomic) {
    // Host order, as the other wires (IBV_ATOMIC_HCA mode, PRM 6.4); a 4-byte original is
    // the low half, the first 4 bytes on a little-endian host.
    const uint64_t old = execute_atomic(w, m.base + (w.raddr - m.remote_addr));
    std::memcpy(reinterpret_cast<void*>(w.sg[0].addr), &old, w.atomic_size);
    m.slot->users.fetch_sub(1, std::memory_order_release);
    return mapped_result::copied;
  }
  uint8_t* remote = m.base + (w.raddr - m.remote_addr);
  for (uint32_t i = 0; i < w.num_sg; ++i) {
    const gather_entry& g = w.sg[i];
    if (g.length == 0) continue;
    if (!write) {
      std::memcpy(reinterpret_cast<void*>(g.addr), remote, g.length);
    } else if (g.is_inline) {
      r.copy_out(g.inline_off, remote, g.length);
    } else if (stream_min != 0 && g.length >= stream_min) {
      chosen_copy(m.stores, remote, reinterpret_cast<const void*>(g.addr), g.length);
    } else {
      std::memcpy(remote, reinterpret_cast<const void*>(g.addr), g.length);
    }
    remote += g.length;
  }
  m.slot->users.fetch_sub(1, std::memory_order_release);
  return mapped_result::copied;
}

}  // namespace

endpoint::mapped_copy_status endpoint::copy_mapped(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w) {
  if (!qp.wire_bound || w.length == 0 || !dev_.cfg.shm_map) return mapped_copy_status::not_mapped;
  if (!mapped_opcode(w)) return mapped_copy_status::not_mapped;
  client_conn* c = qp.wire_conn.get();  // the QP's own reference keeps it (we hold exec_mu)
  if (c == nullptr || !c->cma || c->dead.load(std::memory_order_acquire)) return mapped_copy_status::not_mapped;
  for (const auto& m : qp.wire_maps) {
    if (m->rkey != w.rkey) continue;
    const mapped_result mr = mapped_copy(c->fd, qp.wire_copies, *m, r, w, dev_.cfg.shm_stream_min);
    if (mr == mapped_result::copied) return mapped_copy_status::copied;
    if (mr == mapped_result::dead) {
      std::lock_guard lk(c->mu);
      break_locked(*c, dev_.cfg.wire_timeout_ms);
      return mapped_copy_status::dead;
    }
    return mapped_copy_status::not_mapped;  // revoked or outside the grant: issue() tells the responder
  }
  return mapped_copy_status::not_mapped;
}

void mapped_pin::release() {
  for (std::shared_ptr<shm::mapping>& p : m) {
    if (p != nullptr) p->slot->users.fetch_sub(1, std::memory_order_release);
    p.reset();
  }
  bytes = 0;
}

void mapped_pin::revalidate() {
  for (int i = 0; i < 2; ++i) {
    if (m[i] != nullptr && g[i].revoked()) {
      m[i]->slot->users.fetch_sub(1, std::memory_order_release);
      m[i].reset();
    }
  }
  if (m[0] == nullptr) {
    std::swap(m[0], m[1]);
    std::swap(g[0], g[1]);
  }
}

void mapped_pin::take(std::shared_ptr<shm::mapping> mapping) {
  if (m[1] != nullptr) m[1]->slot->users.fetch_sub(1, std::memory_order_release);
  m[1] = std::move(m[0]);
  g[1] = g[0];
  g[0] = {&mapping->slot->key, &mapping->slot->epoch, mapping->rkey, mapping->epoch};
  m[0] = std::move(mapping);
}

bool endpoint::maps_writes(const soft_qp& qp) const {
  if (!qp.wire_bound || !dev_.cfg.shm_map) return false;
  const client_conn* c = qp.wire_conn.get();
  return c != nullptr && c->cma && !c->dead.load(std::memory_order_acquire);
}

namespace {

// The byte at raddr through the mapping qp holds of the MR rkey names, for len bytes, when
// the grant has every right in `need` and covers the range; null otherwise. pin holds the
// mapping in use from the first call on (write_mapped_short says why).
uint8_t* pinned_target(soft_qp& qp, mapped_pin& pin, uint32_t rkey, uint64_t raddr, uint32_t len, uint32_t need) {
  // The dead-peer look is mapped_copy's (one syscall per 256 copies): that copy goes there.
  if (((qp.wire_copies + 1) & 255) == 0) return nullptr;
  shm::mapping* m = pin.m[0].get();
  if (m == nullptr || m->rkey != rkey) {
    if (pin.m[1] != nullptr && pin.m[1]->rkey == rkey) {
      std::swap(pin.m[0], pin.m[1]);
      std::swap(pin.g[0], pin.g[1]);
    } else {
      const std::shared_ptr<shm::mapping>* found = nullptr;
      for (const auto& x : qp.wire_maps) {
        if (x->rkey == rkey) {
          found = &x;
          break;
        }
      }
      if (found == nullptr) return nullptr;
      if (!enter_grant(**found)) return nullptr;  // revoked: issue() forgets the mapping and asks the responder
      test_hooks::short_path_leases.fetch_add(1, std::memory_order_relaxed);
      pin.take(*found);
    }
    m = pin.m[0].get();
  }
  if ((m->access & need) != need || raddr < m->remote_addr || len > m->length ||
      raddr - m->remote_addr > m->length - len) {
    return nullptr;  // outside the grant: the peer's responder reports it
  }
  ++qp.wire_copies;
  pin.bytes += len;
  return m->base + (raddr - m->remote_addr);
}

}  // namespace

bool endpoint::write_mapped_short(soft_qp& qp, mapped_pin& pin, uint32_t rkey, uint64_t raddr, const uint8_t* src,
                                  uint32_t len) {
  uint8_t* to = pinned_target(qp, pin, rkey, raddr, len, verbs::access::remote_write);
  if (to == nullptr) return false;
  place_piece(to, src, len);
  if (pin.bytes >= mapped_pin::pin_bytes_max) pin.release();
  return true;
}

bool endpoint::atomic_mapped_short(soft_qp& qp, mapped_pin& pin, uint32_t rkey, uint64_t raddr, bool cs,
                                   uint64_t swap_add, uint64_t compare, uint64_t* old) {
  // A misaligned target is the responder's REMOTE_INVAL_REQ: the general path sends it there.
  if (raddr % 8 != 0) return false;
  uint8_t* to =
      pinned_target(qp, pin, rkey, raddr, 8, verbs::access::remote_atomic | verbs::access::remote_write);
  if (to == nullptr) return false;
  auto* word = reinterpret_cast<uint64_t*>(to);
  *old = cs ? compare_swap_word(word, compare, swap_add) : fetch_add_word(word, swap_add);
  return true;
}

bool endpoint::needs_connection(const soft_qp& qp) const {
  const client_conn* c = qp.wire_conn.get();
  return c == nullptr || c->dead.load(std::memory_order_acquire);
}

bool endpoint::connect(soft_qp& qp, std::string* why) {
  if (!listening_.load(std::memory_order_acquire) && !listen(why)) return false;
  // The executor retires every op of a dead connection (fatal) before it issues again, so
  // nothing of this QP is in flight on the old one. Its lease goes before the dial, which
  // may take wire_timeout_ms while a peer's deregistration waits for it.
  qp.release_short_pin();
  address a;
  std::memcpy(a.data(), qp.attr.av.dgid, 16);
  std::shared_ptr<client_conn> c = client(a, why);
  if (!c) return false;
  qp.wire_conn = std::move(c);
  qp.wire_bound = false;
  qp.wire_maps.clear();  // mappings belong to the old connection
  return true;
}

issue_status endpoint::issue(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w, const std::shared_ptr<wire_op>& op) {
  auto finish_now = [&op](outcome o) {
    op->result = o;
    op->done.store(true, std::memory_order_release);
    return issue_status::now;
  };
  std::string why;
  if (needs_connection(qp)) {
    // The executor dialled already, before it took the key table's lock, and failed: the
    // peer is gone (or nobody listens there). Otherwise dial now.
    const bool failed = qp.wire_dial_failed;
    qp.wire_dial_failed = false;
    if (failed || !connect(qp, &why)) return finish_now({outcome::fatal});
  }
  std::shared_ptr<client_conn> c = qp.wire_conn;
  // Same host, the peer's MR in alloc_shared() memory: copy it ourselves. Only when every
  // earlier WQE of this QP has completed, so the copy cannot overtake one still on the
  // wire (RC order). A mapping this QP used before needs no lock (the QP's own cache);
  // the first use of an rkey asks the peer, under the connection's lock, below.
  const bool mappable = mapped_opcode(w) && c->cma && dev_.cfg.shm_map && w.length != 0 &&
                        (qp.wire_ops.empty() || qp.wire_ops.back()->done.load(std::memory_order_acquire));
  bool revoked = false;
  if (mappable && qp.wire_bound) {
    for (size_t i = 0; i < qp.wire_maps.size(); ++i) {
      shm::mapping& m = *qp.wire_maps[i];
      if (m.rkey != w.rkey) continue;
      const mapped_result mr = mapped_copy(c->fd, qp.wire_copies, m, r, w, dev_.cfg.shm_stream_min);
      if (mr == mapped_result::copied) return finish_now({outcome::done, syndrome::none});
      if (mr == mapped_result::revoked) {
        qp.release_short_pin();  // it may hold this one: the owner waits for it
        qp.wire_maps.erase(qp.wire_maps.begin() + static_cast<std::ptrdiff_t>(i));
        revoked = true;
      }
      if (mr == mapped_result::dead) {
        std::lock_guard lk(c->mu);
        break_locked(*c, dev_.cfg.wire_timeout_ms);
        return finish_now({outcome::fatal});
      }
      break;
    }
  }
  std::lock_guard lk(c->mu);
  if (c->dead.load(std::memory_order_relaxed)) return finish_now({outcome::fatal});
  if (revoked) c->maps.erase(w.rkey);  // a new MR may get this rkey's slot: ask again then
  // Read from the clock only when something may wait (the mapped path never does).
  uint64_t deadline_at = 0;
  auto deadline = [&] {
    if (deadline_at == 0) deadline_at = now_ms() + dev_.cfg.wire_timeout_ms;
    return deadline_at;
  };
  auto fail = [&] {
    break_locked(*c, dev_.cfg.wire_timeout_ms);
    return finish_now({outcome::fatal});
  };
  const uint32_t src = qp.qpn, dst = qp.attr.dest_qp_num;
  if (!qp.wire_bound) {
    // The bind's reply must be the next frame we read: wait until nothing is in flight.
    if (!c->fifo.empty()) return issue_status::busy;
    // The bind carries our next PSN: the responder expects it from this pair.
    frame_hdr h = make_hdr(ftype::bind, sizeof(bind_body), src, dst, op->psn);
    bind_body b{};
    std::memcpy(b.token, qp.attr.av.token, 16);
    iovec v[2] = {{&h, sizeof(h)}, {&b, sizeof(b)}};
    frame_hdr rh{};
    if (!writev_full(c->fd, v, 2, deadline()) || !rx_read(c->fd, c->rx, &rh, sizeof(rh), deadline())) return fail();
    const bind_reply br = check_bind_reply(rh, h.seq);
    if (br == bind_reply::nak) return finish_now({outcome::retry});  // peer QP not ready yet
    if (br != bind_reply::ok) return fail();
    qp.wire_bound = true;
  }
  if (mappable && !revoked) {
    bool in_cache = false;
    for (const auto& m : qp.wire_maps) in_cache = in_cache || m->rkey == w.rkey;
    bool alive = true;
    shm::mapping* m = in_cache ? nullptr : map_peer_mr(*c, w.rkey, src, dst, op->psn, deadline(), &alive);
    if (!alive) return fail();
    if (m != nullptr) {
      qp.wire_maps.push_back(c->maps[w.rkey]);
      const mapped_result mr = mapped_copy(c->fd, qp.wire_copies, *m, r, w, dev_.cfg.shm_stream_min);
      if (mr == mapped_result::copied) return finish_now({outcome::done, syndrome::none});
      if (mr == mapped_result::dead) return fail();
      if (mr == mapped_result::revoked) {
        qp.wire_maps.pop_back();
        c->maps.erase(w.rkey);
      }
    }
  }
  const uint32_t window = dev_.cfg.wire_window == 0 ? 1 : dev_.cfg.wire_window;
  if (c->fifo.size() >= window) return issue_status::busy;

  const bool atomic = w.atomic_size != 0;
  const bool read = w.opcode == static_cast<uint8_t>(send_opcode::rdma_read);
  const bool payload_op = carries_payload(w.opcode);
  bool all_pointers = true;
  for (uint32_t i = 0; i < w.num_sg; ++i) all_pointers = all_pointers && !w.sg[i].is_inline;
  const bool cma = c->cma && (payload_op || read) && all_pointers && w.length >= dev_.cfg.shm_single_copy_min;
  if (!cma && w.length > max_body - sizeof(request_body)) return finish_now({outcome::done, syndrome::local_length});
  const uint64_t resp_len = read && !cma ? w.length : atomic ? 8 : 0;
  // A response bigger than the budget goes alone: nothing else in flight with it.
  if (!c->fifo.empty() && c->resp_bytes + resp_len + response_overhead > response_budget) return issue_status::busy;
  const uint64_t req_len = payload_op && !cma ? w.length : 0;  // bytes in the socket
  if (c->fifo.size() >= 2 && c->req_bytes + req_len > dev_.cfg.wire_window_bytes) return issue_status::busy;

  frame_hdr h = make_hdr(ftype::request, sizeof(request_body), src, dst, op->psn);
  h.opcode = w.opcode;
  h.fm_ce_se = w.fm_ce_se;
  request_body b{};
  b.raddr = w.raddr;
  b.rkey = w.rkey;
  b.imm_raw = w.imm_raw;
  b.msg_len = atomic ? 0 : w.length;
  b.atomic_size = w.atomic_size;
  b.swap_add = w.swap_add;
  b.compare = w.compare;
  b.swap_mask = w.swap_mask;
  b.compare_mask = w.compare_mask;
  iovec v[2 + max_gather];
  iov_entry list[max_gather];
  uint8_t inl[1024];
  int nv = 2;
  if (cma) {
    h.flags |= fflag::cma;
    for (uint32_t i = 0; i < w.num_sg; ++i) {
      if (w.sg[i].length == 0) continue;
      list[b.n_iov++] = {w.sg[i].addr, w.sg[i].length};
    }
    h.length += b.n_iov * static_cast<uint32_t>(sizeof(iov_entry));
    v[nv++] = {list, b.n_iov * sizeof(iov_entry)};
  } else if (payload_op) {
    // Straight from the registered buffers (no staging copy); inline bytes from the WQE.
    uint32_t inl_used = 0;
    for (uint32_t i = 0; i < w.num_sg; ++i) {
      const gather_entry& g = w.sg[i];
      if (g.length == 0) continue;
      if (g.is_inline) {
        if (inl_used + g.length > sizeof(inl)) return finish_now({outcome::done, syndrome::local_qp_op});
        r.copy_out(g.inline_off, inl + inl_used, g.length);
        v[nv++] = {inl + inl_used, g.length};
        inl_used += g.length;
      } else {
        v[nv++] = {reinterpret_cast<void*>(g.addr), g.length};
      }
    }
    h.length += static_cast<uint32_t>(w.length);
  }
  v[0] = {&h, sizeof(h)};
  v[1] = {&b, sizeof(b)};
  // Test-only faults (wire_test_hooks.hpp): one relaxed load when nothing is armed.
  frame_hdr corrupted;
  bool drop_after_send = false;
  bool hooked = false;
  if (test_hooks::armed.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    hooked = true;
    const uint32_t hook = test_hooks::armed.exchange(0, std::memory_order_acq_rel);
    switch (static_cast<test_hooks::fault>(hook & 0xff)) {
      case test_hooks::fault::drop_before_send:
        ::shutdown(c->fd, SHUT_RDWR);
        break;
      case test_hooks::fault::drop_after_send:
        drop_after_send = true;
        break;
      case test_hooks::fault::corrupt_header:
        // The copy on the wire is corrupted; h stays what we meant, as on a real link.
        corrupted = h;
        reinterpret_cast<uint8_t*>(&corrupted)[((hook >> 8) & 0xff) % sizeof(frame_hdr)] ^= static_cast<uint8_t>(hook >> 16);
        v[0] = {&corrupted, sizeof(corrupted)};
        break;
      default:
        break;
    }
  }
  // A small frame waits in the connection's queue while hold_behind_sent requests already
  // sent are unanswered (client_conn::tx); with fewer, it goes now, so a lone WQE (a
  // latency test) or a short exchange never waits. A frame a test fault touched goes at
  // once, so the fault lands as it says.
  // Before the first frame waits, look once for the answers due (they may be in the
  // socket already, unread): a ping-pong's next WRITE must not wait for an answer that came
  // long ago until some thread happens to read it.
  if (!hooked && c->unsent == 0 && !c->fifo.empty() &&
      now_ns() - c->empty_read_ns.load(std::memory_order_relaxed) >= poll_gap_ns) {
    (void)read_responses_locked(*c, dev_.cfg.wire_timeout_ms);
    if (c->dead.load(std::memory_order_relaxed)) return finish_now({outcome::fatal});
  }
  const bool hold = c->fifo.size() - c->unsent >= hold_behind_sent;
  if (hooked || !hold) {
    if (!send_queued(c->fd, c->tx, v, nv, deadline()) || !flush_queued(c->fd, c->tx, deadline())) return fail();
    c->unsent = 0;
    test_hooks::request_sends.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (!send_queued(c->fd, c->tx, v, nv, deadline())) return fail();
    if (c->tx.bytes.empty()) {  // a large frame, or a full queue, took the queue with it
      c->unsent = 0;
      test_hooks::request_sends.fetch_add(1, std::memory_order_relaxed);
    } else {
      ++c->unsent;
    }
  }

  op->src_qpn = src;
  op->dst_qpn = dst;
  op->resp_len = resp_len;
  op->pdn = qp.pd->pdn;
  op->atomic_size = w.atomic_size;
  op->num_sg = 0;
  if (resp_len != 0) {
    op->num_sg = w.num_sg;
    op->sg = std::make_unique<gather_entry[]>(w.num_sg);
    for (uint32_t i = 0; i < w.num_sg; ++i) op->sg[i] = w.sg[i];
  }
  op->sent_ms = now_ms();
  op->req_len = req_len;
  c->fifo.push_back(op);
  c->resp_bytes += resp_len + response_overhead;
  c->req_bytes += req_len;
  // Test-only: the connection breaks with this request sent and its answer unread. Killed
  // here, not just shut down: a shutdown still lets the answers already queued in the
  // socket be read, so on a fast peer the fault sometimes did not happen (CI, shm wire:
  // "fault drop_after_send failed no pair").
  if (drop_after_send) kill_locked(*c);
  return issue_status::sent;
}

int endpoint::response_fd(const soft_qp& qp) const { return qp.wire_conn ? qp.wire_conn->fd : -1; }

void endpoint::poll(soft_qp& qp, uint32_t wait_us) {
  std::shared_ptr<client_conn> c = qp.wire_conn;
  if (!c) return;
  // A poster rings for every WQE and the executor then looks for answers without waiting:
  // a recv each time, mostly to learn that nothing came (answers come a round trip after
  // their batch), was two syscalls per 8-byte WRITE over TCP. A NIC's CQ poll is a memory
  // read; ours is a syscall, so after one that found nothing the next non-waiting look is
  // put off for poll_gap_ns (answers are then seen at most that late; a caller that waits
  // is not put off).
  if (wait_us == 0 && now_ns() - c->empty_read_ns.load(std::memory_order_relaxed) < poll_gap_ns) return;
  const uint32_t timeout_ms = dev_.cfg.wire_timeout_ms;
  for (int round = 0; round < 2; ++round) {
    {
      std::shared_lock kl(keys().lock());  // READ data lands in registered memory
      std::lock_guard lk(c->mu);
      if (c->dead.load(std::memory_order_relaxed) || read_responses_locked(*c, timeout_ms) != 0 || c->fifo.empty()) return;
      if (now_ms() - c->fifo.front()->sent_ms > timeout_ms) {
        kill_locked(*c);  // the peer stopped answering (dead process, dropped link)
        return;
      }
    }
    if (round == 1 || wait_us == 0) return;
    // Wait without the lock: other QPs on this connection keep sending meanwhile.
    pollfd p{c->fd, POLLIN, 0};
    const timespec ts{0, static_cast<long>(wait_us) * 1000};
    (void)::ppoll(&p, 1, &ts, nullptr);
  }
}

}  // namespace gdaki::soft::wire
