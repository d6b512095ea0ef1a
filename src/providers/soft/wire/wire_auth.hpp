// internal: who may talk to this process's soft wire (docs/soft-nic.md, Security). Every
// connection starts with a mutual challenge-response over a per-job secret
// (HMAC-SHA-256; the secret never crosses the wire), before any request is read:
//   client -> hello      {pid, want_cma, nonce_c}
//   server -> challenge  {nonce_s, server_proof}    or auth_nak {reason}
//   client -> auth       {client_proof}             (after checking server_proof)
//   server -> hello_ok   {cma}                      or auth_nak {reason}
// server_proof = HMAC(secret, "gdaki-soft-wire server" | nonce_c | nonce_s) and
// client_proof = HMAC(secret, "gdaki-soft-wire client" | nonce_s | nonce_c): different
// labels, so neither side's proof can be replayed as the other's, and fresh nonces on both
// sides, so no proof can be replayed on another connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sha256.hpp"

namespace gdaki::soft::wire::auth {

using nonce = std::array<uint8_t, 16>;

// Why a handshake was refused (the auth_nak body; also logged by both sides).
enum class reason : uint32_t {
  none = 0,
  no_proof = 1,      // the peer sent something other than the handshake (old or foreign client)
  zero_secret = 2,   // the peer's proof was made with an all-zero secret
  wrong_secret = 3,  // the peer's proof matches neither this job's secret nor zero
  other_user = 4,    // unix socket: the peer runs as another user id (SO_PEERCRED)
};
// The cause in words, with what to do about it.
std::string describe(reason r);

// The process's secret: set_secret()'s, else GDAKI_SOFT_SECRET, else the key file
// (config::secret_file / GDAKI_SOFT_SECRET_FILE), else a random one made once per process.
// False with *why when the configured one is unusable (bad hex, too short, all zero, a key
// file others may read).
bool current_secret(std::vector<uint8_t>* out, std::string* why);
// Parses a secret given as hex (16 to 64 bytes, surrounding whitespace ignored); `what`
// names its source in *why.
bool parse_secret_hex(const std::string& text, const std::string& what, std::vector<uint8_t>* out, std::string* why);
// Reads a key file: a regular file owned by this user with no group/other permission bits.
bool read_key_file(const std::string& path, std::vector<uint8_t>* out, std::string* why);

nonce fresh_nonce();  // getrandom
uint32_t random_u32();

digest server_proof(const std::vector<uint8_t>& secret, const nonce& c, const nonce& s);
digest client_proof(const std::vector<uint8_t>& secret, const nonce& s, const nonce& c);
bool digest_equal(const digest& a, const digest& b);  // constant time

// Both sides report a refused handshake here: to stderr (the first 20, then every 1000th,
// so a peer hammering us cannot flood the log) and as the process's last refusal, which
// tests read.
void report(const std::string& msg);
std::string last_report();
uint64_t reports();

}  // namespace gdaki::soft::wire::auth
