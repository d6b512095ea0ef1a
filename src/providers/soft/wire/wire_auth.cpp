// The wire's authentication (wire_auth.hpp): the per-job secret and the handshake proofs.
#include "wire_auth.hpp"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"

namespace gdaki::soft::wire::auth {

namespace {

struct secret_state {
  std::mutex mu;
  std::vector<uint8_t> explicit_secret;  // set_secret()
  std::vector<uint8_t> generated;        // made on first need when nothing is configured
  std::string last;
  uint64_t count = 0;
};
secret_state& state() {
  static secret_state s;
  return s;
}

void fill_random(void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n != 0) {
    const ssize_t r = ::getrandom(b, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw error(status::io_error, std::string("soft wire: getrandom: ") + std::strerror(errno));
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
}

bool all_zero(const std::vector<uint8_t>& v) {
  uint8_t d = 0;
  for (uint8_t x : v) d = static_cast<uint8_t>(d | x);
  return d == 0;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const char server_label[] = "gdaki-soft-wire server";
const char client_label[] = "gdaki-soft-wire client";

}  // namespace

std::string describe(reason r) {
  switch (r) {
    case reason::none: return "accepted";
    case reason::no_proof:
      return "no authentication (the peer did not start with the handshake: an old or foreign client)";
    case reason::zero_secret: return "zero secret (the peer's proof was made with an all-zero secret)";
    case reason::wrong_secret:
      return "wrong secret (give both processes the same GDAKI_SOFT_SECRET, key file or bootstrap secret)";
    case reason::other_user:
      return "another user id (unix-socket peers must run as the same user; set "
             "GDAKI_SOFT_ALLOW_OTHER_USERS=1 to accept any user that knows the secret)";
  }
  return "unknown reason " + std::to_string(static_cast<uint32_t>(r));
}

bool parse_secret_hex(const std::string& text, const std::string& what, std::vector<uint8_t>* out, std::string* why) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  const size_t n = e - b;
  if (n == 0) {
    *why = what + " is empty";
    return false;
  }
  if (n % 2 != 0 || n < 32 || n > 128) {
    *why = what + " must be 32 to 128 hex digits (16 to 64 bytes), not " + std::to_string(n) + " characters";
    return false;
  }
  std::vector<uint8_t> v(n / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const int hi = hex_digit(text[b + 2 * i]), lo = hex_digit(text[b + 2 * i + 1]);
    if (hi < 0 || lo < 0) {
      *why = what + " is not hex (character " + std::to_string(2 * i + (hi < 0 ? 0 : 1) + 1) + ")";
      return false;
    }
    v[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  if (all_zero(v)) {
    *why = what + " is all zero: a zero secret authenticates nobody";
    return false;
  }
  *out = std::move(v);
  return true;
}

bool read_key_file(const std::string& path, std::vector<uint8_t>* out, std::string* why) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    *why = "key file " + path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "key file " + path + " is not a regular file";
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    *why = "key file " + path + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + ")";
    return false;
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    *why = "key file " + path + " has mode " + mode + ": group or others may read it (chmod 600 " + path + ")";
    return false;
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) {
    *why = "key file " + path + ": cannot read it";
    return false;
  }
  return parse_secret_hex(ss.str(), "key file " + path, out, why);
}

bool current_secret(std::vector<uint8_t>* out, std::string* why) {
  secret_state& s = state();
  std::lock_guard lk(s.mu);
  if (!s.explicit_secret.empty()) {
    *out = s.explicit_secret;
    return true;
  }
  if (const char* v = std::getenv("GDAKI_SOFT_SECRET"); v != nullptr) {
    return parse_secret_hex(v, "GDAKI_SOFT_SECRET", out, why);
  }
  const std::string file = get_config().secret_file;
  if (!file.empty()) return read_key_file(file, out, why);
  if (s.generated.empty()) {
    s.generated.resize(32);
    fill_random(s.generated.data(), s.generated.size());
  }
  *out = s.generated;
  return true;
}

nonce fresh_nonce() {
  nonce n;
  fill_random(n.data(), n.size());
  return n;
}

uint32_t random_u32() {
  uint32_t x;
  fill_random(&x, sizeof(x));
  return x;
}

digest server_proof(const std::vector<uint8_t>& secret, const nonce& c, const nonce& s) {
  const byte_span parts[] = {{server_label, sizeof(server_label) - 1}, {c.data(), c.size()}, {s.data(), s.size()}};
  return hmac_sha256(secret.data(), secret.size(), parts, 3);
}

digest client_proof(const std::vector<uint8_t>& secret, const nonce& s, const nonce& c) {
  const byte_span parts[] = {{client_label, sizeof(client_label) - 1}, {s.data(), s.size()}, {c.data(), c.size()}};
  return hmac_sha256(secret.data(), secret.size(), parts, 3);
}

bool digest_equal(const digest& a, const digest& b) {
  uint8_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = static_cast<uint8_t>(d | (a[i] ^ b[i]));
  return d == 0;
}

void report(const std::string& msg) {
  secret_state& s = state();
  uint64_t n;
  {
    std::lock_guard lk(s.mu);
    s.last = msg;
    n = ++s.count;
  }
  if (n <= 20 || n % 1000 == 0) std::fprintf(stderr, "gdaki soft wire: %s\n", msg.c_str());
}

std::string last_report() {
  std::lock_guard lk(state().mu);
  return state().last;
}

uint64_t reports() {
  std::lock_guard lk(state().mu);
  return state().count;
}

}  // namespace gdaki::soft::wire::auth

namespace gdaki::soft {

void set_secret(const uint8_t* bytes, size_t len) {
  if (len < 16 || len > 64) {
    throw error(status::invalid, "soft::set_secret: a secret is 16 to 64 bytes, not " + std::to_string(len));
  }
  std::vector<uint8_t> v(bytes, bytes + len);
  uint8_t d = 0;
  for (uint8_t x : v) d = static_cast<uint8_t>(d | x);
  if (d == 0) throw error(status::invalid, "soft::set_secret: the secret is all zero: a zero secret authenticates nobody");
  auto& s = wire::auth::state();
  std::lock_guard lk(s.mu);
  s.explicit_secret = std::move(v);
}

std::string secret_hex() {
  std::vector<uint8_t> v;
  std::string why;
  if (!wire::auth::current_secret(&v, &why)) throw error(status::invalid, "soft wire secret: " + why);
  static const char* d = "0123456789abcdef";
  std::string t;
  for (uint8_t b : v) {
    t += d[b >> 4];
    t += d[b & 15];
  }
  return t;
}

}  // namespace gdaki::soft
