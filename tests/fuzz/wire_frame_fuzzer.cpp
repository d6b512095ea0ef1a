// libFuzzer harness: a rogue peer's byte stream through the soft wire's frame rules
// (src/providers/soft/wire/wire_frame.cpp, the same functions endpoint::serve_frame and
// endpoint::execute call).
//
// Input byte 0 picks the side and the connection's grant:
//   bit 0: the server granted cross-process copies (cma) on this connection;
//   bit 1: client side: the stream is what a server answers (hello_ok, bind replies,
//          responses); otherwise server side: what a client sends (hello, bind, requests).
// Server side: frames are consumed as serve_frame does: header (parse_header), the
// connection state machine (server_accepts; a bind is taken as accepted, so later requests
// of that pair count as bound), and requests fed to parse_request in the same steps the
// socket reader uses (fixed body, then the iov list it asks for). Every request that
// passes is checked against the parser's promises (lengths add up to the header's, the
// iov list names exactly msg_len bytes, payload only where one belongs, bounds), and its
// payload is then "placed" into an exact-size heap target, as the responder's readv would,
// so a length the rules let through that does not match the frame is an ASan report.
// Client side: each step is 1 byte (what the request was: write, read of N bytes, atomic,
// cma read, bind; bit 7: a map) + 4 bytes N, then the reply; accepted replies' bodies are read into an
// exact-size buffer, as execute reads READ data into the local scatter list.
//
// The harness does not run a live responder (a soft device with registered memory behind
// a socket): that needs the whole soft provider compiled with clang. The rules are what
// stands between a peer and the responder's memory checks, and those checks are the
// in-process ones the wqe_parse fuzzer and the wire tests exercise (docs/reliability.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/wqe.hpp"
#include "providers/soft/wire/wire_frame.hpp"

namespace {

namespace w = gdaki::soft::wire;
using gdaki::prm::send_opcode;

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "wire_frame_fuzzer: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

struct cursor {
  const uint8_t* p;
  size_t n;
  bool take(void* out, size_t len) {
    if (n < len) return false;
    std::memcpy(out, p, len);
    p += len;
    n -= len;
    return true;
  }
  bool skip(size_t len) {
    if (n < len) return false;
    p += len;
    n -= len;
    return true;
  }
};

// One request through parse_request as serve_frame feeds it; false: the connection closes.
bool serve_request(const w::frame_hdr& h, cursor& in, bool cma_granted) {
  // Bytes of the body that arrived (a truncated frame: the reader times out on the rest).
  const size_t avail = in.n < h.length ? in.n : h.length;
  w::request_view rq;
  size_t have = 0;
  w::parse_status ps = w::parse_request(h, in.p, have, cma_granted, &rq);
  int steps = 0;
  while (ps == w::parse_status::need_more) {
    FUZZ_CHECK(rq.head_bytes > have);  // progress: the reader never loops
    FUZZ_CHECK(rq.head_bytes <= sizeof(w::request_body) + w::max_iov * sizeof(w::iov_entry));
    FUZZ_CHECK(++steps <= 2);
    if (rq.head_bytes > avail) return false;
    have = rq.head_bytes;
    ps = w::parse_request(h, in.p, have, cma_granted, &rq);
  }
  // The answer does not depend on how many more bytes of the frame were visible.
  w::request_view again;
  const w::parse_status ps2 = w::parse_request(h, in.p, avail, cma_granted, &again);
  FUZZ_CHECK(ps2 == ps);
  if (ps != w::parse_status::ok) return false;

  // The promises serve_frame and the responder rely on.
  const w::request_body& b = rq.body;
  FUZZ_CHECK(w::known_op(h.opcode));
  FUZZ_CHECK(b.n_iov <= w::max_iov);
  FUZZ_CHECK(rq.head_bytes == sizeof(w::request_body) + b.n_iov * sizeof(w::iov_entry));
  FUZZ_CHECK(uint64_t{rq.head_bytes} + rq.payload == h.length);
  FUZZ_CHECK(rq.cma == ((h.flags & w::fflag::cma) != 0));
  FUZZ_CHECK(!rq.cma || cma_granted);
  FUZZ_CHECK(rq.cma || b.n_iov == 0);
  FUZZ_CHECK(b.msg_len <= (uint64_t{1} << 31));
  if (w::is_atomic(h.opcode)) {
    FUZZ_CHECK(b.atomic_size == 4 || b.atomic_size == 8);
    FUZZ_CHECK(rq.payload == 0 && !rq.cma);
  } else {
    FUZZ_CHECK(b.atomic_size == 0);
  }
  if (rq.cma) {
    FUZZ_CHECK(w::carries_payload(h.opcode) || h.opcode == static_cast<uint8_t>(send_opcode::rdma_read));
    uint64_t sum = 0;
    for (uint32_t i = 0; i < b.n_iov; ++i) sum += rq.iov[i].len;
    FUZZ_CHECK(sum == rq.iov_total && sum == b.msg_len);  // the copy moves exactly msg_len
    FUZZ_CHECK(rq.payload == 0);
  } else {
    FUZZ_CHECK(rq.payload == (w::carries_payload(h.opcode) ? b.msg_len : 0));
  }

  // Place the payload as the responder's readv would: into a target of exactly msg_len
  // bytes (what the rkey check validated). Only what arrived; the rest would time out.
  if (!in.skip(rq.head_bytes)) return false;
  if (rq.payload != 0) {
    if (in.n < rq.payload) return false;
    std::vector<uint8_t> target(static_cast<size_t>(b.msg_len));
    std::memcpy(target.data(), in.p, static_cast<size_t>(rq.payload));
    in.skip(static_cast<size_t>(rq.payload));
  }
  return true;
}

void server_side(cursor in, bool cma_granted) {
  // The handshake's frames in order (hello, then auth); the proof itself is checked in
  // wire_connection.cpp, so the model takes any auth body as a valid proof.
  w::conn_stage stage = w::conn_stage::fresh;
  std::set<uint64_t> bound;
  for (int frames = 0; frames < 256; ++frames) {
    w::frame_hdr h{};
    if (!w::parse_header(in.p, in.n, &h)) return;
    FUZZ_CHECK(h.magic == w::frame_magic && h.version == w::frame_version && h.length <= w::max_body);
    in.skip(sizeof(h));
    if (!w::server_accepts(h, stage)) return;
    const auto t = static_cast<w::ftype>(h.type);
    const uint64_t pair = (uint64_t{h.src_qpn} << 32) | h.dst_qpn;
    const bool hello = stage == w::conn_stage::authenticated;
    if (t == w::ftype::hello) {
      FUZZ_CHECK(stage == w::conn_stage::fresh && h.length == sizeof(w::hello_body));
      if (!in.skip(sizeof(w::hello_body))) return;
      stage = w::conn_stage::challenged;
    } else if (t == w::ftype::auth) {
      FUZZ_CHECK(stage == w::conn_stage::challenged && h.length == sizeof(w::auth_body));
      if (!in.skip(sizeof(w::auth_body))) return;
      stage = w::conn_stage::authenticated;
    } else if (t == w::ftype::bind) {
      FUZZ_CHECK(hello && h.length == sizeof(w::bind_body));
      if (!in.skip(sizeof(w::bind_body))) return;
      bound.insert(pair);
    } else if (t == w::ftype::map) {
      FUZZ_CHECK(hello && h.length == sizeof(w::map_body));
      if (!bound.count(pair)) return;  // serve_frame: maps, like requests, need the pair bound
      if (!in.skip(sizeof(w::map_body))) return;
    } else {
      FUZZ_CHECK(hello && t == w::ftype::request);
      if (!bound.count(pair)) return;
      if (!serve_request(h, in, cma_granted)) return;
    }
  }
}

void client_side(cursor in) {
  w::frame_hdr rh{};
  if (!in.take(&rh, sizeof(rh))) return;
  if (!w::hello_ok_valid(rh)) return;
  FUZZ_CHECK(rh.length == sizeof(w::hello_ok_body));
  if (!in.skip(sizeof(w::hello_ok_body))) return;
  for (uint32_t step = 1; step <= 256; ++step) {
    uint8_t kind = 0;
    uint32_t n = 0;
    if (!in.take(&kind, 1) || !in.take(&n, 4)) return;
    w::frame_hdr req{};
    req.magic = w::frame_magic;
    req.version = w::frame_version;
    req.seq = step;
    req.src_qpn = 0x10;
    req.dst_qpn = 0x20;
    if (!in.take(&rh, sizeof(rh))) return;
    if (kind % 5 == 4) {
      const w::bind_reply br = w::check_bind_reply(rh, req.seq);
      if (br == w::bind_reply::bad) return;
      FUZZ_CHECK(rh.length == 0);
      continue;
    }
    if ((kind & 0x80) != 0) {
      // A map reply: nak has no body, ok exactly the fixed one (descriptors ride along).
      const w::map_reply mr = w::check_map_reply(rh, req);
      if (mr == w::map_reply::bad) return;
      FUZZ_CHECK(rh.length == (mr == w::map_reply::ok ? sizeof(w::map_ok_body) : 0));
      FUZZ_CHECK(rh.seq == req.seq && rh.src_qpn == req.src_qpn && rh.dst_qpn == req.dst_qpn);
      if (!in.skip(rh.length)) return;
      continue;
    }
    // write / read of n bytes (n < 64 KiB here) / atomic / cma read (data moved by copy).
    const uint64_t read_len = n & 0xffff;
    const uint64_t success_len = kind % 5 == 1 ? read_len : kind % 5 == 2 ? 8 : 0;
    const w::response_kind rk = w::check_response(rh, req, success_len);
    if (rk == w::response_kind::bad) return;
    if (rk != w::response_kind::done) {
      FUZZ_CHECK(rh.length == 0);
      continue;
    }
    FUZZ_CHECK(rh.length == (rh.syndrome == 0 ? success_len : 0));
    // The body lands in the local scatter list: exactly success_len bytes of it.
    std::vector<uint8_t> local(static_cast<size_t>(success_len));
    if (rh.length != 0 && !in.take(local.data(), rh.length)) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  cursor in{data + 1, size - 1};
  if (data[0] & 2) {
    client_side(in);
  } else {
    server_side(in, (data[0] & 1) != 0);
  }
  return 0;
}
