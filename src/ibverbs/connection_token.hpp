// internal: the soft wire's connection token for a QP pair, derived from what both ends
// already know at RTR (both GIDs and both QPNs), because ibverbs programs exchange only
// GID, QPN and PSN out of band and have nowhere to carry a 16-byte token.
//
// The token is the same on both ends (the endpoints are put in a fixed order first), so
// the requester's bind matches the token the responder was given. It is NOT a secret:
// anyone who knows the four values can compute it. What keeps strangers off the wire is
// the job secret every connection proves first (docs/soft-nic.md, Security); the token
// only ties a bind to the pair the two programs connected (docs/verbs.md, Addressing).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace gdaki::ibverbs {

inline void connection_token(const uint8_t gid_a[16], uint32_t qpn_a, const uint8_t gid_b[16], uint32_t qpn_b,
                             uint8_t out[16]) {
  uint8_t a[20], b[20];
  std::memcpy(a, gid_a, 16);
  std::memcpy(a + 16, &qpn_a, 4);
  std::memcpy(b, gid_b, 16);
  std::memcpy(b + 16, &qpn_b, 4);
  const bool swap = std::memcmp(a, b, sizeof a) > 0;
  const uint8_t* first = swap ? b : a;
  const uint8_t* second = swap ? a : b;
  // Two independent 64-bit FNV-1a streams with splitmix64 finalisers: well mixed, cheap,
  // and deterministic across hosts and builds.
  auto mix = [&](uint64_t h) {
    for (const uint8_t* p : {first, second}) {
      for (int i = 0; i < 20; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    }
    h += 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
  };
  const uint64_t lo = mix(0xcbf29ce484222325ull), hi = mix(0x6c62272e07bb0142ull);
  std::memcpy(out, &lo, 8);
  std::memcpy(out + 8, &hi, 8);
}

}  // namespace gdaki::ibverbs
