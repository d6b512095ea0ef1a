// internal: wires to soft devices in other processes (same host: unix socket for control
// plus cross-process single copies) and other hosts (TCP). One endpoint per open device:
// a listener and one I/O thread (epoll) serve every incoming connection and every QP on
// them; outgoing connections are cached per remote device and shared by every QP that
// talks to it. Requests are pipelined: the executor issues up to config::wire_window of
// them per connection, and responses come back in the order the requests were sent, so
// the connection keeps its requests in flight in one FIFO (docs/soft-nic.md, Wires).
// The endpoint is defined by role, as rdma-core's rxe splits requester, responder and
// network (docs/design.md 26): wire_connection.cpp (listening, the I/O loop, accepting,
// dialling and authenticating peers), wire_requester.cpp (issue, copy_mapped, poll),
// wire_responder.cpp (serving an authenticated peer's frames); the bytes move through
// wire_transport.hpp and frames are judged by wire_frame.hpp.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../engine/wqe_parse.hpp"
#include "mapped_pin.hpp"
#include "wire_auth.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::soft {
struct soft_device;
struct soft_qp;
}  // namespace gdaki::soft

namespace gdaki::soft::shm {
struct mapping;
}  // namespace gdaki::soft::shm

namespace gdaki::soft::wire {

using address = std::array<uint8_t, 16>;

// True if `av` names a soft device of another process (a wire address that is not ours).
bool is_remote(const verbs::address& av);

struct outcome {
  enum kind : uint8_t { done, retry, fatal, rnr } what = done;
  prm::syndrome synd = prm::syndrome::none;  // done: the CQE's syndrome
  uint8_t rnr_timer = 0;
};

struct server_conn;
struct client_conn;
struct frame_hdr;

// One request in flight: issued by the executor (which holds it in the QP's list, in SQ
// order) and finished by whichever thread reads its response from the connection.
struct wire_op {
  // The executor's: which WQE this is and what its CQE needs.
  uint64_t sq_index = 0;  // qp.sq_ci of the WQE
  uint32_t nbb = 0;
  uint8_t opcode = 0;
  bool signaled = false;
  uint32_t byte_cnt = 0;
  // The response's outcome; `done` is stored last (release) by the reader.
  std::atomic<bool> done{false};
  outcome result;
  // The wire's: the request as sent and where its response's bytes go.
  uint32_t src_qpn = 0, dst_qpn = 0, psn = 0;
  uint64_t resp_len = 0;  // body bytes a successful response carries (READ data, atomic value)
  uint64_t req_len = 0;   // payload bytes the request carried (flow control)
  uint32_t pdn = 0;       // the requester's PD (the placement re-checks local keys)
  uint32_t atomic_size = 0;
  uint32_t num_sg = 0;
  std::unique_ptr<gather_entry[]> sg;  // only for responses that carry data (most ops: none)
  uint64_t sent_ms = 0;  // 0: never sent (failed before it left)
  // The executor's: when it first found this op failed with its connection (0: not yet);
  // the failure is reported once the QP's transport timer has run out (executor.cpp,
  // loss_reportable).
  uint64_t lost_ns = 0;
};

enum class issue_status : uint8_t {
  sent,  // in flight: its response finishes it
  busy,  // the connection's window is full, or it must drain first: poll, then try again
  now,   // finished at once (no peer, handshake failed, too long): see the op's result
};

class endpoint {
 public:
  explicit endpoint(soft_device& d);
  ~endpoint();  // stops the I/O thread and closes every connection
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  // Starts listening (once). Returns false with *why on failure.
  bool listen(std::string* why);
  address local_address();

  // Sends the request of WQE w (parsed; local keys checked) to the remote peer of qp
  // without waiting for the response, as request number op.psn of the QP. The caller
  // holds qp.exec_mu and the key table's shared lock (so the local buffers stay
  // registered while payload bytes are sent).
  issue_status issue(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w, const std::shared_ptr<wire_op>& op);
  // Whether qp has no live connection to its peer yet (or its connection died), and
  // connect() dials one and binds it to qp (false with *why when none could be made).
  // The executor calls connect() before it takes the key table's shared lock: a dial and
  // handshake may take up to config::wire_timeout_ms (a flooded peer sheds handshakes and
  // the client tries again), and no deregistration may wait for that. The caller holds
  // qp.exec_mu and nothing of qp is in flight.
  bool needs_connection(const soft_qp& qp) const;
  bool connect(soft_qp& qp, std::string* why);
  // Moves WRITE or READ w with one memcpy through a mapping of the target's MR that qp
  // already holds (an earlier issue() mapped it), when its connection is alive. Returns
  // copied (the WQE completed without error), dead (the peer is gone: the connection is
  // closed and the WQE fails as issue() fails it, fatal) or not_mapped (issue() handles
  // it: no such mapping, a revoked grant, a range outside it). Same locking as issue();
  // the caller also guarantees that nothing of qp is in flight, so the copy cannot
  // overtake a request (RC order).
  enum class mapped_copy_status : uint8_t { copied, dead, not_mapped };
  mapped_copy_status copy_mapped(soft_qp& qp, const wqe_reader& r, const parsed_wqe& w);
  // The short path for a run of small WRITEs and atomics (executor.cpp, run_mapped_short). Whether
  // qp's connection takes mapped copies now (bound, same host, alive, mapping enabled):
  bool maps_writes(const soft_qp& qp) const;
  // Copies len bytes (1 .. short_write_max) from src to raddr through the mapping qp
  // already holds of the MR rkey names, when that grant allows remote write and covers the
  // range; pin holds the mapping in use (the QP's lease, mapped_pin.hpp). An aligned 4- or 8-byte piece goes
  // with one release store, as the responder places it. Returns false, having done
  // nothing, in every other case: no such mapping, revoked, outside the grant, and the
  // copy that is due the dead-peer look (every 256th): the general path (copy_mapped,
  // issue) then takes that WQE and decides, with the syndromes it always gives.
  static constexpr uint32_t short_write_max = 4096;
  bool write_mapped_short(soft_qp& qp, mapped_pin& pin, uint32_t rkey, uint64_t raddr, const uint8_t* src,
                          uint32_t len);
  // The same for an 8-byte fetch-and-add (cs false: adds swap_add) or compare-and-swap
  // (cs true) on the word at raddr, aligned, under a grant with remote atomic and write
  // rights, done as execute_atomic does it (one atomic instruction on the word, host
  // order): *old gets the word's value before it.
  bool atomic_mapped_short(soft_qp& qp, mapped_pin& pin, uint32_t rkey, uint64_t raddr, bool cs, uint64_t swap_add,
                           uint64_t compare, uint64_t* old);
  // Reads the responses that have arrived on qp's connection and finishes their ops (of
  // any QP sharing the connection). When none has arrived, waits up to wait_us for one.
  // A connection that broke, or whose oldest request went unanswered for
  // config::wire_timeout_ms, finishes all its ops as fatal.
  void poll(soft_qp& qp, uint32_t wait_us);
  // The socket qp's responses arrive on (-1 if none), for a caller that waits without
  // holding the QP. The number may be stale by the time it is polled: a spurious wake-up.
  int response_fd(const soft_qp& qp) const;

  // The I/O thread's time for peers that have not proved the secret (accepting them,
  // their handshake frames, refusing and closing them) is a budget per listening socket:
  // it earns one part in handshake_share of the time that passes, holds at most
  // handshake_burst_ns, and while it is spent those peers wait (the listening socket and
  // its connections leave the epoll set). A flood of bad handshakes then takes at most
  // that share from authenticated peers, a TCP flood (another host) does not delay
  // same-host peers on the unix socket, and a burst of honest connections (a job
  // starting) goes through at once.
  static constexpr int64_t handshake_share = 8;
  static constexpr int64_t handshake_burst_ns = 20'000'000;
  // The same for authenticated peers whose last request was dropped or failed (a peer
  // guessing keys, or one whose QP is in ERR and keeps sending): one budget per endpoint,
  // earning one part in failing_share of the time, at most handshake_burst_ns. While it
  // is spent such a connection leaves the epoll set until it is earned back, so a peer of
  // the job that sends what cannot execute takes at most that share from those whose
  // requests do. An honest peer's occasional error costs it nothing: the burst covers it.
  static constexpr int64_t failing_share = 8;

 private:
  // The I/O loop (docs/soft-nic.md, Security, Availability): rounds in which every
  // connection with work gets one turn of at most frames_per_turn frames, authenticated
  // peers first; connections still proving the secret share handshakes_per_round frames,
  // at most max_unauthenticated of them are open (the oldest is dropped for a new one),
  // and each gets wire_timeout_ms to finish its handshake.
  // A whole default window (GDAKI_SOFT_WIRE_WINDOW) per turn: an honest pipelining peer's
  // burst is served, and answered with one write, in one turn.
  static constexpr int frames_per_turn = 256;
  // The turn of a connection whose last request was dropped or failed (server_conn).
  static constexpr int frames_per_unproductive_turn = 4;
  static constexpr int handshakes_per_round = 4;
  static constexpr size_t max_unauthenticated = 32;
  struct handshake_budget {
    int64_t credit_ns = handshake_burst_ns;
    int64_t at_ns = 0;
    bool parked = false;                            // the listening socket is out of the epoll set
    std::vector<std::pair<int, uint64_t>> waiting;  // connections out of it, as (fd, serial)
  };
  enum class turn : uint8_t { idle, more, closed };
  void run();
  // Earns time up to now (one part in share of what passed); true while there is some.
  static bool earn(handshake_budget& b, int64_t now_ns, int64_t share);
  static void spend(handshake_budget& b, int64_t ns, std::atomic<uint64_t>& counter);
  // While a budget is spent: its listening socket out of the epoll set (park), and back
  // in, with every connection parked meanwhile, once it has been earned again (unpark).
  void park(bool unix_sock);
  void park_connection(const server_conn& c, handshake_budget& b);
  // Both put the connections they re-arm on `serve`: one may hold whole frames already
  // read into its buffer, which no epoll event would announce.
  void unpark(bool unix_sock, std::vector<int>& serve);
  void unpark_connections(handshake_budget& b, std::vector<int>& serve);
  void accept_some(int lfd, bool unix_sock);
  void accept_one(int fd, bool unix_sock);
  // Serves up to `budget` frames that have arrived whole (their header; a peer still
  // proving the secret: the whole frame), so a frame's start never waits on a slow peer.
  turn serve_ready(server_conn& c, int budget);
  // Closes the handshakes that ran out of time; returns ms until the next one does (-1: none).
  int expire_handshakes();
  void close_conn(int fd, bool poison);
  // The responder (wire_responder.cpp): serves one frame (before the proof, through
  // handshake_frame) and answers a map request. serve_frame: false closes the connection.
  bool serve_frame(server_conn& c);
  bool answer_map(server_conn& c, const frame_hdr& h, uint32_t rkey, uint64_t deadline);
  // Authentication (wire_auth.hpp). Server: one handshake frame of a peer that has not
  // proved the secret yet (false: close); refuse() tells the peer why and logs it. Client:
  // the whole exchange on a fresh socket to the peer at address peer_addr (false: *why).
  bool handshake_frame(server_conn& c, const frame_hdr& h, uint64_t deadline);
  void refuse(server_conn& c, auth::reason why);
  // *dropped: the server closed the connection without an answer before the deadline
  // (it sheds the oldest handshakes under a flood): worth another try.
  bool handshake(int fd, bool unix_sock, const void* peer_addr, uint64_t deadline, bool* cma, std::string* why,
                 bool* dropped);
  std::string log_name() const;
  std::shared_ptr<client_conn> client(const address& a, std::string* why);

  soft_device& dev_;
  std::mutex mu_;
  std::atomic<bool> listening_{false};
  int tcp_fd_ = -1, unix_fd_ = -1, ep_fd_ = -1, stop_fd_ = -1;
  address addr_{};
  std::thread io_;
  std::unordered_map<int, std::unique_ptr<server_conn>> conns_;  // I/O thread only
  // Connections still proving the secret, oldest first, as (fd, serial): an entry whose
  // connection is gone or authenticated is skipped. I/O thread only.
  std::deque<std::pair<int, uint64_t>> handshakes_;
  size_t unauthenticated_ = 0;
  // [0] TCP, [1] unix socket (peers still proving the secret), [2] failing peers
  // (failing_share); I/O thread only.
  static constexpr size_t failing_budget = 2;
  std::array<handshake_budget, 3> budgets_;
  uint64_t next_serial_ = 0;
  std::mutex clients_mu_;
  std::map<address, std::shared_ptr<client_conn>> clients_;
};

}  // namespace gdaki::soft::wire
