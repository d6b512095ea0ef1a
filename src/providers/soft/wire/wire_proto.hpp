// internal: the soft NIC's wire protocol (docs/wire-protocol.md). Every frame is a 32-byte
// header and `length` bytes of body. Integers are little-endian (both ends are x86-64 or
// arm64 Linux; a big-endian host would need swaps here and only here).
#pragma once

#include <cstdint>

namespace gdaki::soft::wire {

inline constexpr uint32_t frame_magic = 0x574b4447;  // "GDKW"
// 2: connections authenticate (challenge / auth / auth_nak) before anything else.
inline constexpr uint8_t frame_version = 2;
// Largest body a peer may announce: bigger frames close the connection before any byte of
// the body is read, so a hostile length cannot make us allocate or wait for gigabytes.
inline constexpr uint32_t max_body = 64u << 20;
inline constexpr uint32_t max_iov = 30;  // a WQE has at most 30 data segments

enum class ftype : uint8_t {
  hello = 1,
  hello_ok = 2,
  bind = 3,
  bind_ok = 4,
  bind_nak = 5,
  request = 6,
  response = 7,
  map = 8,      // same host: may the requester map the MR behind this rkey?
  map_ok = 9,   // yes: two memfds ride along (SCM_RIGHTS): the MR's file, the revocation table
  map_nak = 10,  // no (not alloc_shared memory, no access, not this pair's PD): use requests
  challenge = 11,  // server: its nonce and its proof of the secret (wire_auth.hpp)
  auth = 12,       // client: its proof of the secret
  auth_nak = 13    // server: refused (reason); the connection closes after it
};

namespace fflag {
inline constexpr uint16_t cma = 1;   // request: payload / READ target named by an iov list (same host)
inline constexpr uint16_t rnr = 2;   // response: RNR NAK, retry after rnr_timer
inline constexpr uint16_t drop = 4;  // response: the target QP cannot take requests (as a lost packet)
}  // namespace fflag

struct frame_hdr {
  uint32_t magic;
  uint8_t version;
  uint8_t type;  // ftype
  uint16_t flags;
  uint32_t length;  // body bytes after the header
  uint32_t src_qpn;
  uint32_t dst_qpn;
  uint32_t seq;
  uint8_t syndrome;  // response: prm::syndrome for the requester's CQE
  uint8_t opcode;    // request: send opcode
  uint8_t fm_ce_se;  // request: the WQE's flags (SE reaches the responder CQE)
  uint8_t rnr_timer;
  uint32_t reserved;
};
static_assert(sizeof(frame_hdr) == 32, "the header is 32 bytes on the wire");

struct hello_body {
  uint32_t pid;
  uint32_t want_cma;  // the client can take part in cross-process copies
  uint8_t nonce[16];  // the client's challenge to the server
  // Where the client holds `nonce` during the handshake: the server reads it with
  // process_vm_readv, so cross-process copies are tried against this very peer before
  // they are granted (a Yama policy may allow them on oneself and refuse them here).
  uint64_t probe_addr;
};
struct challenge_body {
  uint8_t nonce[16];  // the server's challenge to the client
  uint8_t proof[32];  // HMAC(secret, "gdaki-soft-wire server" | client nonce | server nonce)
};
struct auth_body {
  uint8_t proof[32];  // HMAC(secret, "gdaki-soft-wire client" | server nonce | client nonce)
};
struct auth_nak_body {
  uint32_t reason;  // auth::reason
  uint32_t reserved;
};
struct hello_ok_body {
  uint32_t cma;  // 1: the server will copy across processes for iov-list requests
  uint32_t reserved;
};

struct bind_body {
  uint8_t token[16];
};

struct map_body {
  uint32_t rkey;
  uint32_t reserved;
};
struct map_ok_body {
  uint64_t addr;      // the MR's first byte in the server's address space
  uint64_t length;
  uint64_t file_off;  // where that byte is in the MR's memfd
  uint32_t access;    // verbs::access bits granted (the MR's and the QP's together)
  uint32_t epoch;     // the grant's revocation epoch (shm::revocation_slot::epoch)
};
static_assert(sizeof(map_ok_body) == 32, "fixed map_ok body");

struct request_body {
  uint64_t raddr;
  uint64_t msg_len;
  uint64_t swap_add, compare, swap_mask, compare_mask;
  uint32_t rkey;
  uint32_t imm_raw;
  uint32_t atomic_size;  // 0, 4 or 8
  uint32_t n_iov;        // cma requests: entries of {addr, len} that follow
};
static_assert(sizeof(request_body) == 64, "fixed request body");

struct iov_entry {
  uint64_t addr;
  uint64_t len;
};

}  // namespace gdaki::soft::wire
