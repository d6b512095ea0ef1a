// internal, tests only: faults the wire's requester side can be told to inject into its
// next request frame (tests/stress/wire_fault_stress.cpp). Nothing in the library arms
// them; the cost on the data path is one relaxed atomic load per request frame.
#pragma once

#include <atomic>
#include <cstdint>

namespace gdaki::soft::wire::test_hooks {

enum class fault : uint8_t {
  none = 0,
  drop_before_send = 1,  // shut the connection's socket down instead of sending the frame
  drop_after_send = 2,   // send the frame, then kill the connection (the answer is lost)
  corrupt_header = 3,    // send the frame with one header byte XORed (a corrupted frame)
};

// Packed: fault | header offset << 8 | XOR mask << 16. 0: nothing armed.
extern std::atomic<uint32_t> armed;

// Set: every cross-memory attach of this process to a peer (the probe and the copies)
// fails with EPERM, as Yama ptrace_scope 1 refuses a process that is not a descendant
// (tests of the fallback to frames). One relaxed load per cross-process copy.
extern std::atomic<bool> refuse_cma;

// Nanoseconds this process's wire I/O threads spent on peers that had not proved the secret
// (accepting them, their handshake frames, refusing and closing them): what the handshake
// budget bounds (wire.hpp, handshake_share). Counted, never read, by the library.
extern std::atomic<uint64_t> handshake_ns;
// Nanoseconds they spent serving authenticated peers whose last request was dropped or
// failed (a bad key, a QP in ERR, out of sequence): what the budget for failing peers
// bounds (wire.hpp, failing_share). Counted, never read, by the library.
extern std::atomic<uint64_t> failing_ns;

// Send calls (sendmsg) this process's requesters made that carried request frames: small
// requests queued while an answer is due leave together (client_conn::tx). Counted, never
// read, by the library.
extern std::atomic<uint64_t> request_sends;

// WQEs this process's remote QPs completed through the mapped short path (the executor's
// run_mapped_short) rather than the general loop. Added once per run with a plain load
// and store, not a read-modify-write (the path exists to avoid those): exact while runs
// do not overlap, as those of one QP never do (exec_mu). Counted, never read, by the
// library.
extern std::atomic<uint64_t> short_path_wqes;
// Key-table lookups the short path made because the QP's local key cache
// (soft_qp::local_key) did not hold the key: counted on that miss only. Never read by the
// library.
extern std::atomic<uint64_t> short_path_key_lookups;

// Times the mapped short path took a count in a grant's revocation slot (a new lease on a
// peer mapping, mapped_pin.hpp) rather than using the one its QP holds. Counted, never
// read, by the library.
extern std::atomic<uint64_t> short_path_leases;

// Set to N: the mapped short path, once it has checked a WRITE's local source and before
// it reads it, counts the pause in short_path_source_pauses and sleeps N microseconds, as
// a thread preempted there would (tests of deregistration against that read). One
// relaxed load per pointer WRITE the short path takes.
extern std::atomic<uint32_t> short_path_source_pause_us;
extern std::atomic<uint32_t> short_path_source_pauses;

// Set to N: the wire servers of this process close the next N connections that send a
// hello, without a word, as a server shedding handshakes under a connection flood does
// (the oldest of too many). One relaxed load per hello.
extern std::atomic<uint32_t> drop_handshakes;

// Set: the requesters of this process leave the answers that arrive in their sockets
// unread (their looks read nothing), as a requester whose peer answered and then went
// away between two of its looks does; a send that then finds the connection broken still
// reads them (wire_requester.cpp, break_locked). One relaxed load per look.
extern std::atomic<bool> hold_responses;

// Arms one fault for the next request frame any endpoint of this process sends. Replaces
// one that is still armed.
void arm(fault f, uint32_t offset = 0, uint8_t mask = 0);
// Disarms; returns what was still armed (fault::none if it was consumed).
fault disarm();

}  // namespace gdaki::soft::wire::test_hooks
