// A hand-written wire client for tests that play a hostile or broken peer: it speaks the
// frames of docs/wire-protocol.md byte by byte (no library requester), so it can send what
// the library never would: a forged QPN, a guessed key, a proof made with the wrong secret.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../src/providers/soft/wire/wire_auth.hpp"
#include "../../src/providers/soft/wire/wire_proto.hpp"

namespace rogue {

namespace wp = gdaki::soft::wire;
namespace wa = gdaki::soft::wire::auth;

// TCP to the address's IPv4 and port (bytes 4-9); -1 if refused.
inline int dial(const uint8_t* address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  std::memcpy(&sa.sin_addr.s_addr, address + 4, 4);
  sa.sin_port = htons(static_cast<uint16_t>((address[8] << 8) | address[9]));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The same-host socket of soft<dev> in process pid (abstract: "\0gdaki-soft-<pid>-<dev>").
// Uses no allocation, so a forked child of a threaded process may call it.
inline int dial_unix(pid_t pid, unsigned dev) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un su{};
  su.sun_family = AF_UNIX;
  const int n = std::snprintf(su.sun_path + 1, sizeof(su.sun_path) - 1, "gdaki-soft-%d-%u", static_cast<int>(pid), dev);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&su), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline void send_all(int fd, const void* p, size_t n) { (void)!::send(fd, p, n, MSG_NOSIGNAL); }

// A frame's header and body in one send: as two small sends on TCP, Nagle would hold the
// body back until the header's delayed ACK (about 40 ms), which the library never pays
// (it writes frames whole, with TCP_NODELAY).
template <class Body>
void send_frame(int fd, const wp::frame_hdr& h, const Body& b) {
  uint8_t f[sizeof(h) + sizeof(b)];
  std::memcpy(f, &h, sizeof(h));
  std::memcpy(f + sizeof(h), &b, sizeof(b));
  send_all(fd, f, sizeof(f));
}

// Reads exactly n bytes within 3 s; false on EOF, error or time-out.
inline bool recv_all(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (n != 0) {
    pollfd q{fd, POLLIN, 0};
    if (std::chrono::steady_clock::now() > end || ::poll(&q, 1, 100) < 0) return false;
    if ((q.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// True if the server closes the connection within 3 s (reads and drops what it sends).
inline bool server_closes(int fd) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char b[256];
      const ssize_t r = ::recv(fd, b, sizeof(b), 0);
      if (r <= 0) {
        ::close(fd);
        return true;
      }
    }
  }
  ::close(fd);
  return false;
}

inline wp::frame_hdr hdr(wp::ftype t, uint32_t len, uint32_t src = 0, uint32_t dst = 0, uint32_t seq = 0) {
  wp::frame_hdr h{};
  h.magic = wp::frame_magic;
  h.version = wp::frame_version;
  h.type = static_cast<uint8_t>(t);
  h.length = len;
  h.src_qpn = src;
  h.dst_qpn = dst;
  h.seq = seq;
  return h;
}

// What the server said to our handshake.
struct handshake_result {
  bool answered = false;      // a well-formed answer came (else the server just closed)
  bool accepted = false;      // hello_ok
  wa::reason refused = wa::reason::none;  // auth_nak's reason
  bool server_proof_ok = false;           // the challenge proved `secret` (unset if none came)
  bool cma = false;                       // hello_ok granted cross-process copies
};

// How the hello asks for cross-process copies: not at all, with a probe address that
// holds the nonce (as the library sends), or with one that does not.
enum class cma_ask : uint8_t { no, honest_probe, bad_probe };

// hello, then (if challenged) auth with a proof made from `secret`. The connection stays
// open after acceptance; the caller closes it otherwise.
inline handshake_result handshake(int fd, const std::vector<uint8_t>& secret, cma_ask cma = cma_ask::no) {
  handshake_result out;
  const wa::nonce nc = wa::fresh_nonce();
  const wp::frame_hdr h = hdr(wp::ftype::hello, sizeof(wp::hello_body));
  wp::hello_body b{static_cast<uint32_t>(::getpid()), cma != cma_ask::no ? 1u : 0u, {}, 0};
  std::memcpy(b.nonce, nc.data(), 16);
  static const uint8_t decoy[16] = {1, 2, 3};
  b.probe_addr = cma == cma_ask::honest_probe ? reinterpret_cast<uint64_t>(b.nonce) : reinterpret_cast<uint64_t>(decoy);
  send_frame(fd, h, b);
  wp::frame_hdr r{};
  if (!recv_all(fd, &r, sizeof(r))) return out;
  if (r.type == static_cast<uint8_t>(wp::ftype::auth_nak)) {
    wp::auth_nak_body nb{};
    out.answered = recv_all(fd, &nb, sizeof(nb));
    out.refused = static_cast<wa::reason>(nb.reason);
    return out;
  }
  wp::challenge_body cb{};
  if (r.type != static_cast<uint8_t>(wp::ftype::challenge) || !recv_all(fd, &cb, sizeof(cb))) return out;
  wa::nonce ns;
  std::memcpy(ns.data(), cb.nonce, 16);
  gdaki::soft::wire::digest sp;
  std::memcpy(sp.data(), cb.proof, 32);
  out.server_proof_ok = wa::digest_equal(sp, wa::server_proof(secret, nc, ns));
  const wp::frame_hdr ah = hdr(wp::ftype::auth, sizeof(wp::auth_body));
  wp::auth_body ab{};
  const auto cp = wa::client_proof(secret, ns, nc);
  std::memcpy(ab.proof, cp.data(), 32);
  send_frame(fd, ah, ab);
  if (!recv_all(fd, &r, sizeof(r))) return out;
  if (r.type == static_cast<uint8_t>(wp::ftype::auth_nak)) {
    wp::auth_nak_body nb{};
    out.answered = recv_all(fd, &nb, sizeof(nb));
    out.refused = static_cast<wa::reason>(nb.reason);
    return out;
  }
  wp::hello_ok_body ob{};
  out.answered = r.type == static_cast<uint8_t>(wp::ftype::hello_ok) && recv_all(fd, &ob, sizeof(ob));
  out.accepted = out.answered;
  out.cma = ob.cma != 0;
  return out;
}

// This process's secret, as the library holds it.
inline std::vector<uint8_t> own_secret() {
  std::vector<uint8_t> s;
  std::string why;
  wa::current_secret(&s, &why);
  return s;
}

// An authenticated TCP connection to the address (-1 if refused).
inline int authenticated(const uint8_t* address) {
  const int fd = dial(address);
  if (fd < 0) return -1;
  if (!handshake(fd, own_secret()).accepted) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace rogue
