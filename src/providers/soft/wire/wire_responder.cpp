// The soft wire's responder: serves the frames of an authenticated peer on the device's
// I/O thread (binds, map requests for the mapped path, and requests), one turn at a time
// (wire_connection.cpp runs the loop). The responder runs a pair's requests only in
// sequence (PSN), so one that was refused (RNR, not ready) or failed holds back those
// pipelined behind it, as on an RC link. It uses the same checks as the in-process
// responder (responder_impl.hpp: live rkey, PD, bounds, MR and QP access) before it moves
// any byte, and then executes WRITE, READ, SEND and atomics through a transfer policy
// whose bytes come from the socket (readv into the validated target range) or, on one
// host, by one cross-process copy (process_vm_readv / process_vm_writev). What a frame may
// say is decided in wire_frame.cpp (also run by the wire_frame fuzzer); this file reads
// the bytes those rules ask for and acts on their answer.
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <vector>

#include "../engine/responder_impl.hpp"
#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "gdaki/verbs/mr.hpp"
#include "shm_map.hpp"
#include "wire.hpp"
#include "wire_frame.hpp"
#include "wire_internal.hpp"
#include "wire_proto.hpp"
#include "wire_test_hooks.hpp"
#include "wire_transport.hpp"

namespace gdaki::soft::wire {

using prm::syndrome;

namespace {

bool token_equal(const uint8_t* a, const uint8_t* b) {
  // Constant time: the comparison must not tell a guesser how many leading bytes matched.
  uint8_t d = 0;
  for (int i = 0; i < 16; ++i) d = static_cast<uint8_t>(d | (a[i] ^ b[i]));
  return d == 0;
}

uint64_t pair_key(uint32_t src, uint32_t dst) { return (uint64_t{src} << 32) | dst; }

// Moves the bytes of one request at the responder: from the socket, or across processes.
struct server_xfer {
  int fd;
  rx_buffer& rx;
  tx_queue& tx;
  pid_t pid;
  bool cma;
  std::span<const iov_entry> iovs;  // cma: the requester's buffers
  uint64_t payload;                    // bytes of payload in the frame
  uint64_t deadline;
  const frame_hdr& req;
  bool consumed = false;
  bool responded = false;
  bool failed = false;  // the connection is unusable (close it)
  uint64_t old = 0;
  bool has_old = false;

  bool place(const dst_piece* d, uint32_t nd) {
    std::vector<iovec> local;
    uint64_t want = cma ? 0 : payload;
    if (cma) {
      for (const iov_entry& e : iovs) want += e.len;
    }
    for (uint32_t i = 0; i < nd && want != 0; ++i) {
      const uint64_t n = d[i].length < want ? d[i].length : want;
      local.push_back({d[i].ptr, static_cast<size_t>(n)});
      want -= n;
    }
    if (cma) {
      std::vector<iovec> remote;
      uint64_t total = 0;
      for (const iov_entry& e : iovs) {
        remote.push_back({reinterpret_cast<void*>(e.addr), static_cast<size_t>(e.len)});
        total += e.len;
      }
      const ssize_t r = test_hooks::refuse_cma.load(std::memory_order_relaxed)
                            ? -1
                            : ::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
      if (r < 0 || static_cast<uint64_t>(r) != total) failed = true;
      return !failed;
    }
    consumed = true;
    if (!rx_readv(fd, rx, local.data(), static_cast<int>(local.size()), deadline)) failed = true;
    return !failed;
  }
  void read_out(const uint8_t* from, uint64_t n) {
    frame_hdr h = make_hdr(ftype::response, 0, req.src_qpn, req.dst_qpn, req.seq);
    responded = true;
    if (cma) {
      std::vector<iovec> remote;
      for (const iov_entry& e : iovs) remote.push_back({reinterpret_cast<void*>(e.addr), static_cast<size_t>(e.len)});
      iovec local{const_cast<uint8_t*>(from), static_cast<size_t>(n)};
      const ssize_t r = test_hooks::refuse_cma.load(std::memory_order_relaxed)
                            ? -1
                            : ::process_vm_writev(pid, &local, 1, remote.data(), remote.size(), 0);
      if (r < 0 || static_cast<uint64_t>(r) != n) {
        failed = true;
        return;
      }
      iovec v{&h, sizeof(h)};
      if (!send_queued(fd, tx, &v, 1, deadline)) failed = true;
      return;
    }
    h.length = static_cast<uint32_t>(n);
    iovec v[2] = {{&h, sizeof(h)}, {const_cast<uint8_t*>(from), static_cast<size_t>(n)}};
    if (!send_queued(fd, tx, v, 2, deadline)) failed = true;
  }
  void atomic_result(uint64_t v) {
    old = v;
    has_old = true;
  }
};

}  // namespace

bool endpoint::answer_map(server_conn& c, const frame_hdr& h, uint32_t rkey, uint64_t deadline) {
  // The same checks a request to this MR would pass, except the range: the peer gets the
  // whole MR (its own memfd, nothing else: design.md 19) and checks bounds itself, as the
  // rkey lets it address the whole MR anyway.
  map_ok_body ok{};
  int fds[2] = {-1, -1};
  bool granted = false;
  const uint64_t pair = pair_key(h.src_qpn, h.dst_qpn);
  if (c.unix_sock && dev_.cfg.shm_map && c.map_burned.count(pair) == 0) {
    std::shared_ptr<soft_qp> q = qps().find(h.dst_qpn);
    std::shared_lock kl(keys().lock());  // the grant and the MR's life are serialised
    if (q && q->dev == &dev_) {
      std::lock_guard lk(q->resp_mu);
      const uint32_t st = q->state.load(std::memory_order_acquire);
      const bool ready = st == static_cast<uint32_t>(verbs::qp_state::rtr) || st == static_cast<uint32_t>(verbs::qp_state::rts);
      const mr_entry* e = keys().find(rkey, true);
      if (e == nullptr || (q->pd != nullptr && e->pdn != q->pd->pdn)) c.map_burned.insert(pair);
      if (!q->destroyed && ready && q->attr.dest_qp_num == h.src_qpn && e != nullptr && e->pdn == q->pd->pdn) {
        // Remote atomic is granted too: the requester then runs atomics on the mapped word
        // itself (only through a writable grant, i.e. with remote write as well).
        const uint32_t access = e->access & q->attr.access_flags &
                                (verbs::access::remote_read | verbs::access::remote_write | verbs::access::remote_atomic);
        uint64_t off = 0;
        // A grant without remote write gets a read-only descriptor (and the requester maps
        // it read-only), so even a stray write of the peer cannot reach the memory.
        const bool writable = (access & verbs::access::remote_write) != 0;
        // An MR with remote atomic alone is not granted (as before atomics were mapped).
        if ((access & (verbs::access::remote_read | verbs::access::remote_write)) != 0 && shm::registration_file(rkey, writable, &fds[0], &off)) {
          fds[1] = shm::table_fd();
          uint32_t epoch = 0;
          if (fds[1] >= 0 && shm::grant(rkey, &epoch)) {
            q->granted_rkeys.push_back(rkey);  // taken back if q leaves RTR/RTS
            granted = true;
            ok = {e->addr, e->length, off, access, epoch};
          }
        }
      }
    }
  }
  frame_hdr r = make_hdr(granted ? ftype::map_ok : ftype::map_nak, granted ? sizeof(ok) : 0, h.src_qpn, h.dst_qpn, h.seq);
  bool sent;
  if (granted) {
    iovec v[2] = {{&r, sizeof(r)}, {&ok, sizeof(ok)}};
    sent = flush_queued(c.fd, c.tx, deadline) && send_with_fds(c.fd, v, 2, fds, 2, deadline);
  } else {
    iovec v{&r, sizeof(r)};
    sent = send_queued(c.fd, c.tx, &v, 1, deadline);
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  return sent;
}

bool endpoint::serve_frame(server_conn& c) {
  const uint64_t deadline = now_ms() + dev_.cfg.wire_timeout_ms;
  // Every rule about what a frame may say is in wire_frame.cpp (shared with the fuzzer);
  // this function only reads the bytes those rules ask for and acts on the answer.
  uint8_t raw[sizeof(frame_hdr)];
  frame_hdr h{};
  if (!rx_read(c.fd, c.rx, raw, sizeof(raw), deadline)) return false;
  if (!parse_header(raw, sizeof(raw), &h) || !server_accepts(h, c.stage)) {
    // Before authentication, anything but the handshake is refused with the reason (an
    // old client, a stranger); afterwards a bad frame just closes (the protocol's rule).
    if (c.stage != conn_stage::authenticated) refuse(c, auth::reason::no_proof);
    return false;
  }
  const auto t = static_cast<ftype>(h.type);
  if (c.stage != conn_stage::authenticated) return handshake_frame(c, h, deadline);
  if (t == ftype::bind) {
    bind_body b{};
    if (!rx_read(c.fd, c.rx, &b, sizeof(b), deadline)) return false;
    std::shared_ptr<soft_qp> q = qps().find(h.dst_qpn);
    bool ready = false;
    if (q && q->dev == &dev_) {
      std::lock_guard lk(q->resp_mu);
      const uint32_t st = q->state.load(std::memory_order_acquire);
      const bool rtr = st == static_cast<uint32_t>(verbs::qp_state::rtr) || st == static_cast<uint32_t>(verbs::qp_state::rts);
      if (!q->destroyed && rtr) {
        // A wrong token for a QP that has one closes the connection (docs/wire-protocol.md).
        if (!token_equal(b.token, q->attr.av.token)) return false;
        ready = q->attr.dest_qp_num == h.src_qpn;
      }
    }
    if (ready) c.expect[pair_key(h.src_qpn, h.dst_qpn)] = h.seq;  // the requester's next PSN
    frame_hdr r = make_hdr(ready ? ftype::bind_ok : ftype::bind_nak, 0, h.src_qpn, h.dst_qpn, h.seq);
    iovec v{&r, sizeof(r)};
    return send_queued(c.fd, c.tx, &v, 1, deadline);
  }
  const auto bound = c.expect.find(pair_key(h.src_qpn, h.dst_qpn));
  if (bound == c.expect.end()) return false;  // a request or map: bound pair only
  if (t == ftype::map) {
    map_body b{};
    if (!rx_read(c.fd, c.rx, &b, sizeof(b), deadline)) return false;
    return answer_map(c, h, b.rkey, deadline);
  }

  // Validate every field before using any of it: the fixed body first, then the iov list
  // it announces (parse_request says how many bytes it needs; at most 64 + 30 * 16).
  uint8_t head[sizeof(request_body) + max_iov * sizeof(iov_entry)];
  request_view rq;
  size_t have = 0;
  parse_status ps = parse_request(h, head, have, c.cma, &rq);
  while (ps == parse_status::need_more) {
    if (!rx_read(c.fd, c.rx, head + have, rq.head_bytes - have, deadline)) return false;
    have = rq.head_bytes;
    ps = parse_request(h, head, have, c.cma, &rq);
  }
  if (ps != parse_status::ok) return false;
  const request_body& b = rq.body;
  const bool cma = rq.cma;
  const uint64_t payload = rq.payload;
  const std::span<const iov_entry> iovs(rq.iov, b.n_iov);

  server_xfer x{c.fd, c.rx, c.tx, c.pid, cma, iovs, payload, deadline, h};
  respond_result rr{};
  // Requests of a pair run in PSN order, as on an RC link: after a request that was not
  // executed (dropped, RNR) or failed, the ones the requester had already pipelined
  // behind it are dropped until it sends that PSN again (or, after an error, never).
  bool dropped = h.seq != bound->second;
  if (!dropped) {
    std::shared_ptr<soft_qp> q = qps().find(h.dst_qpn);
    // Held while bytes move: deregistration waits for us (as for the in-process wire).
    std::shared_lock kl(keys().lock());
    std::unique_lock<std::mutex> rl;
    if (q && q->dev == &dev_) rl = std::unique_lock(q->resp_mu);
    const uint32_t st = q ? q->state.load(std::memory_order_acquire) : 0;
    if (!rl.owns_lock() || q->destroyed ||
        (st != static_cast<uint32_t>(verbs::qp_state::rtr) && st != static_cast<uint32_t>(verbs::qp_state::rts)) ||
        q->attr.dest_qp_num != h.src_qpn) {
      dropped = true;  // as a request to a QP that cannot take it: no answer but "drop"
    } else {
      parsed_wqe w;
      w.opcode = h.opcode;
      w.fm_ce_se = h.fm_ce_se;
      w.imm_raw = b.imm_raw;
      w.raddr = b.raddr;
      w.rkey = b.rkey;
      w.length = is_atomic(h.opcode) ? b.atomic_size : b.msg_len;
      w.atomic_size = b.atomic_size;
      w.swap_add = b.swap_add;
      w.compare = b.compare;
      w.swap_mask = b.swap_mask;
      w.compare_mask = b.compare_mask;
      rr = resp_detail::respond_with(h.src_qpn, w, *q, x);
    }
  }
  if (x.failed) return false;
  c.unproductive = dropped || rr.req != syndrome::none;
  if (!dropped && !rr.rnr && rr.req == syndrome::none) bound->second = h.seq + 1;
  if (!x.consumed && payload != 0 && !drain(c.fd, c.rx, payload, deadline)) return false;
  if (x.responded) return true;
  frame_hdr r = make_hdr(ftype::response, 0, h.src_qpn, h.dst_qpn, h.seq);
  r.syndrome = static_cast<uint8_t>(rr.req);
  if (dropped) r.flags |= fflag::drop;
  if (rr.rnr) {
    r.flags |= fflag::rnr;
    r.rnr_timer = rr.rnr_timer;
  }
  r.length = x.has_old && rr.req == syndrome::none ? 8 : 0;
  iovec v[2] = {{&r, sizeof(r)}, {&x.old, 8}};
  return send_queued(c.fd, c.tx, v, r.length != 0 ? 2 : 1, deadline);
}

}  // namespace gdaki::soft::wire
