// internal: what the soft wire's role files share (wire_connection.cpp,
// wire_requester.cpp, wire_responder.cpp): the state of a connection on each side and the
// frame header builder. The endpoint that owns them is declared in wire.hpp; the bytes
// move through wire_transport.hpp.
#pragma once

#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "shm_map.hpp"
#include "wire.hpp"
#include "wire_auth.hpp"
#include "wire_frame.hpp"
#include "wire_proto.hpp"
#include "wire_transport.hpp"

namespace gdaki::soft::wire {

// An incoming connection: the responder's side, served by the device's I/O thread only.
struct server_conn {
  int fd = -1;
  bool unix_sock = false;
  pid_t pid = 0;  // the peer process (unix sockets: from the kernel, SO_PEERCRED)
  uid_t uid = 0;  // unix sockets: the peer's user id (SO_PEERCRED)
  std::string peer;  // who it is, for the log
  // Nothing but the handshake is read until the peer has proved the secret, which it must
  // do by handshake_deadline (ms).
  conn_stage stage = conn_stage::fresh;
  uint64_t serial = 0;  // this connection among all the endpoint accepted (fds are reused)
  uint64_t handshake_deadline = 0;
  auth::nonce nonce_c{}, nonce_s{};
  bool want_cma = false;
  uint64_t probe_addr = 0;  // where the peer holds nonce_c (the CMA probe reads it)
  bool cma = false;
  // (src << 32 | dst) pairs this peer proved the token for, each with the PSN of the next
  // request it may execute (the bind sets it; requests out of sequence are dropped).
  std::map<uint64_t, uint32_t> expect;
  // Pairs whose map named a key that failed its check: never answered map_ok again, so a
  // peer cannot use map frames to guess keys (a request with a bad key ends the pair
  // anyway: its responder QP moves to ERR, as on RC).
  std::set<uint64_t> map_burned;
  // Its last request was dropped or failed (a QP in ERR, a bad key, out of sequence): its
  // next turn is short, so a peer that keeps sending what cannot execute (a bug, or key
  // guessing) takes little of the I/O thread from those whose requests do.
  bool unproductive = false;
  rx_buffer rx;
  tx_queue tx;
  // The peer closed (or reset) between two frames: it left, it did not break the protocol.
  bool hung_up = false;
};

// An outgoing connection: the requester's side, cached per remote device and shared by
// every QP that talks to it.
struct client_conn {
  // The socket, the FIFO and the receive buffer. Lock order: the key table's shared lock
  // (when taken) before this.
  std::mutex mu;
  int fd = -1;
  bool cma = false;
  std::atomic<bool> dead{false};
  uint32_t seq = 0;  // binds
  // Requests sent and not yet answered, oldest first: the server answers in this order.
  std::deque<std::shared_ptr<wire_op>> fifo;
  uint64_t resp_bytes = 0;  // bytes the responses in the FIFO may still bring
  uint64_t req_bytes = 0;   // payload bytes of the requests in the FIFO
  rx_buffer rx;
  // Small requests issued while earlier requests' answers are still due (at least
  // hold_behind_sent of them, wire_requester.cpp) wait here, as TCP's Nagle algorithm
  // holds small segments while data is unacknowledged: they leave
  // together when the last answer due is read (read_responses_locked), so a stream of
  // small WRITEs costs one send per round trip, not one per WQE. `unsent` of them end the
  // FIFO.
  tx_queue tx;
  uint32_t unsent = 0;
  // When a read found no answer (steady clock, ns): a poll that may not wait skips the
  // recv for poll_gap_ns after it (endpoint::poll), read without the lock.
  std::atomic<uint64_t> empty_read_ns{0};
  // The mapped path (same host): the peer's MRs we may map, by rkey (null: asked, and the
  // peer said no), and the peer's revocation table.
  std::map<uint32_t, std::shared_ptr<shm::mapping>> maps;
  shm::revocation_slot* table = nullptr;
  void* table_map = nullptr;
  size_t table_len = 0;
  ~client_conn() {
    maps.clear();
    if (table_map != nullptr) ::munmap(table_map, table_len);
    if (fd >= 0) ::close(fd);
  }
};

// A frame's header (`static` for the reason wire_transport.hpp gives).
[[maybe_unused]] static frame_hdr make_hdr(ftype t, uint32_t len, uint32_t src, uint32_t dst, uint32_t seq) {
  frame_hdr h{};
  h.magic = frame_magic;
  h.version = frame_version;
  h.type = static_cast<uint8_t>(t);
  h.length = len;
  h.src_qpn = src;
  h.dst_qpn = dst;
  h.seq = seq;
  return h;
}

}  // namespace gdaki::soft::wire
