// The soft wire's frame rules (wire_frame.hpp). Pure functions: no socket, no device, no
// allocation, so the fuzzer (tests/fuzz/wire_frame_fuzzer.cpp) can run them on anything.
#include "wire_frame.hpp"

#include <cstring>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/op_traits.hpp"
#include "gdaki/prm/wqe.hpp"

namespace gdaki::soft::wire {


// From the opcode traits table (prm/op_traits.hpp): the wire keeps no opcode list of its own.
bool is_atomic(uint8_t op) { return prm::traits_of(op).is_atomic(); }
bool carries_payload(uint8_t op) { return prm::traits_of(op).request_payload; }
bool known_op(uint8_t op) { return prm::traits_of(op).remote(); }

bool header_ok(const frame_hdr& h) { return h.magic == frame_magic && h.version == frame_version && h.length <= max_body; }

bool parse_header(const uint8_t* p, size_t len, frame_hdr* out) {
  if (len < sizeof(frame_hdr)) return false;
  std::memcpy(out, p, sizeof(frame_hdr));
  return header_ok(*out);
}

bool server_accepts(const frame_hdr& h, conn_stage stage) {
  const bool authed = stage == conn_stage::authenticated;
  switch (static_cast<ftype>(h.type)) {
    case ftype::hello:
      return stage == conn_stage::fresh && h.length == sizeof(hello_body);
    case ftype::auth:
      return stage == conn_stage::challenged && h.length == sizeof(auth_body);
    case ftype::bind:
      return authed && h.length == sizeof(bind_body);
    case ftype::request:
      return authed;
    case ftype::map:
      return authed && h.length == sizeof(map_body);
    default:
      return false;  // replies (and unknown types) never go to a server
  }
}

parse_status parse_request(const frame_hdr& h, const uint8_t* body, size_t len, bool cma_granted, request_view* out) {
  out->head_bytes = sizeof(request_body);
  if (h.length < sizeof(request_body)) return parse_status::bad;
  if (len < sizeof(request_body)) return parse_status::need_more;
  request_body& b = out->body;
  std::memcpy(&b, body, sizeof(b));
  if (!known_op(h.opcode) || b.n_iov > max_iov) return parse_status::bad;
  const bool cma = (h.flags & fflag::cma) != 0;
  if (cma && !cma_granted) return parse_status::bad;
  if (!cma && b.n_iov != 0) return parse_status::bad;
  if (is_atomic(h.opcode) ? (b.atomic_size != 4 && b.atomic_size != 8) : b.atomic_size != 0) return parse_status::bad;
  const uint64_t rest = h.length - sizeof(b);
  const uint64_t list_bytes = uint64_t{b.n_iov} * sizeof(iov_entry);
  if (rest < list_bytes) return parse_status::bad;
  out->head_bytes = static_cast<uint32_t>(sizeof(b) + list_bytes);
  if (len < out->head_bytes) return parse_status::need_more;
  std::memcpy(out->iov, body + sizeof(b), list_bytes);
  uint64_t iov_total = 0;
  for (uint32_t i = 0; i < b.n_iov; ++i) {
    const uint64_t l = out->iov[i].len;
    // Each piece bounded (4 GiB) and the sum checked for wrap, before msg_len is compared.
    if (l > max_body * uint64_t{64} || iov_total + l < iov_total) return parse_status::bad;
    iov_total += l;
  }
  // The list must name exactly msg_len bytes: the responder moves what the list names
  // but reports msg_len (an empty list with msg_len != 0 would "complete" bytes it never
  // moved).
  if (cma && iov_total != b.msg_len) return parse_status::bad;
  const uint64_t payload = rest - list_bytes;
  const bool expect_payload = carries_payload(h.opcode) && !cma;
  if (payload != (expect_payload ? b.msg_len : 0)) return parse_status::bad;
  // Cross-process copies carry bulk bytes only: a payload request's, or READ's response.
  if (cma && !carries_payload(h.opcode) && prm::traits_of(h.opcode).kind != prm::op_kind::read) return parse_status::bad;
  if (b.msg_len > (uint64_t{1} << 31)) return parse_status::bad;
  out->cma = cma;
  out->iov_total = iov_total;
  out->payload = payload;
  return parse_status::ok;
}

bool hello_ok_valid(const frame_hdr& rh) {
  return header_ok(rh) && rh.type == static_cast<uint8_t>(ftype::hello_ok) && rh.length == sizeof(hello_ok_body);
}

handshake_reply check_challenge(const frame_hdr& rh) {
  if (!header_ok(rh)) return handshake_reply::bad;
  if (rh.type == static_cast<uint8_t>(ftype::challenge) && rh.length == sizeof(challenge_body)) {
    return handshake_reply::challenge;
  }
  if (rh.type == static_cast<uint8_t>(ftype::auth_nak) && rh.length == sizeof(auth_nak_body)) return handshake_reply::refused;
  return handshake_reply::bad;
}

handshake_reply check_auth_reply(const frame_hdr& rh) {
  if (hello_ok_valid(rh)) return handshake_reply::accepted;
  if (header_ok(rh) && rh.type == static_cast<uint8_t>(ftype::auth_nak) && rh.length == sizeof(auth_nak_body)) {
    return handshake_reply::refused;
  }
  return handshake_reply::bad;
}

map_reply check_map_reply(const frame_hdr& rh, const frame_hdr& req) {
  if (!header_ok(rh) || rh.seq != req.seq || rh.src_qpn != req.src_qpn || rh.dst_qpn != req.dst_qpn) return map_reply::bad;
  if (rh.type == static_cast<uint8_t>(ftype::map_nak)) return rh.length == 0 ? map_reply::nak : map_reply::bad;
  if (rh.type == static_cast<uint8_t>(ftype::map_ok)) return rh.length == sizeof(map_ok_body) ? map_reply::ok : map_reply::bad;
  return map_reply::bad;
}

bind_reply check_bind_reply(const frame_hdr& rh, uint32_t seq) {
  if (!header_ok(rh) || rh.length != 0 || rh.seq != seq) return bind_reply::bad;
  if (rh.type == static_cast<uint8_t>(ftype::bind_nak)) return bind_reply::nak;  // peer QP not ready yet
  return rh.type == static_cast<uint8_t>(ftype::bind_ok) ? bind_reply::ok : bind_reply::bad;
}

response_kind check_response(const frame_hdr& rh, const frame_hdr& req, uint64_t success_len) {
  if (!header_ok(rh) || rh.type != static_cast<uint8_t>(ftype::response) || rh.seq != req.seq || rh.src_qpn != req.src_qpn ||
      rh.dst_qpn != req.dst_qpn) {
    return response_kind::bad;
  }
  if (rh.flags & fflag::drop) return rh.length == 0 ? response_kind::drop : response_kind::bad;
  if (rh.flags & fflag::rnr) return rh.length == 0 ? response_kind::rnr : response_kind::bad;
  const uint64_t expect = rh.syndrome == static_cast<uint8_t>(prm::syndrome::none) ? success_len : 0;
  return rh.length == expect ? response_kind::done : response_kind::bad;
}

}  // namespace gdaki::soft::wire
