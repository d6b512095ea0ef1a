// internal: the validation rules of the soft wire's frames (docs/wire-protocol.md), as pure
// functions of bytes. The wire's role files (wire_connection.cpp, wire_requester.cpp,
// wire_responder.cpp) read frames from a socket and ask these functions whether to go on;
// tests/fuzz/wire_frame_fuzzer.cpp feeds them arbitrary bytes. Keeping the rules here, and
// only here, is what makes the fuzzer test the code the responder runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire_proto.hpp"

namespace gdaki::soft::wire {

bool is_atomic(uint8_t op);
bool carries_payload(uint8_t op);  // WRITE, WRITE_IMM, SEND, SEND_IMM
bool known_op(uint8_t op);         // an opcode the wire carries at all

// Copies the 32-byte header at p into *out and checks magic, version and the body limit.
// False if len < 32 or a check fails (the connection is then closed before any body byte
// is read).
bool parse_header(const uint8_t* p, size_t len, frame_hdr* out);
bool header_ok(const frame_hdr& h);

// The server's state machine, per connection: hello exactly once and first, then auth
// (the answer to the server's challenge), then binds, maps and requests. Checks type and
// the fixed body sizes; a request also needs its pair bound, which the caller checks (the
// bound set is connection state). Anything else closes the connection.
enum class conn_stage : uint8_t { fresh, challenged, authenticated };
bool server_accepts(const frame_hdr& h, conn_stage stage);

// A request whose head (fixed body + iov list) passed every check.
struct request_view {
  request_body body{};
  iov_entry iov[max_iov]{};
  bool cma = false;
  uint64_t iov_total = 0;   // cma: bytes the iov list names (== body.msg_len)
  uint64_t payload = 0;     // payload bytes that follow the head in the frame
  uint32_t head_bytes = 0;  // sizeof(request_body) + n_iov entries
};

enum class parse_status : uint8_t { ok, bad, need_more };

// Validates a request frame's body head: known opcode, n_iov <= max_iov, the cma flag
// only where the connection was granted cross-process copies and iov lists only with it,
// atomic_size 4/8 for atomics and 0 otherwise, iov lengths bounded and adding up to
// msg_len without overflow, payload == msg_len for payload-carrying non-cma requests and
// 0 otherwise, cma only for payload ops and READ, msg_len <= 2^31. `body` holds the first
// `len` bytes of the body (len may be shorter or longer than the head): need_more sets
// out->head_bytes to what must be available; a socket reader calls it again with that
// many. The answer for a given frame does not depend on how many extra bytes are given.
parse_status parse_request(const frame_hdr& h, const uint8_t* body, size_t len, bool cma_granted, request_view* out);

// The requester's checks of a server's reply.
bool hello_ok_valid(const frame_hdr& rh);
// The server's first answer: a challenge, or a refusal (auth_nak, 8-byte body); bad: neither.
enum class handshake_reply : uint8_t { bad, challenge, accepted, refused };
handshake_reply check_challenge(const frame_hdr& rh);
// The answer to auth: accepted (hello_ok, hello_ok_valid), or a refusal.
handshake_reply check_auth_reply(const frame_hdr& rh);
// A reply to map request `req`: ok (a map_ok_body follows, with two descriptors), nak, or
// bad (close the connection).
enum class map_reply : uint8_t { bad, ok, nak };
map_reply check_map_reply(const frame_hdr& rh, const frame_hdr& req);
enum class bind_reply : uint8_t { bad, ok, nak };
bind_reply check_bind_reply(const frame_hdr& rh, uint32_t seq);
// A response to request `req`: bad (close the connection), drop (as a lost packet), rnr
// (retry after rh.rnr_timer) or done (rh.syndrome is the CQE's; `rh.length` body bytes
// follow: success_len on success, else none).
enum class response_kind : uint8_t { bad, drop, rnr, done };
response_kind check_response(const frame_hdr& rh, const frame_hdr& req, uint64_t success_len);

}  // namespace gdaki::soft::wire
