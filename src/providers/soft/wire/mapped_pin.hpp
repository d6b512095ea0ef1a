// internal: the peer MRs' mappings a QP's mapped short path holds in use. A mapping is
// used under its grant's revocation slot (shm_map.hpp): the user count keeps the owner's
// deregistration waiting while a copy may still land. Counting in and out on every
// doorbell were two locked instructions on a line shared with every other process that
// writes into that MR, so a QP keeps its count across doorbells as a lease (soft_qp::
// short_pin) and gives it back when:
// - a run finds the grant revoked (the owner then waits for exactly that: revalidate(),
//   at the start of every run);
// - pin_bytes_max bytes went through it since it was taken (the owner waits for at most
//   one run's copies past that);
// - its engine sweeps it, lease_ns after the engine first saw it held (engine.cpp): an
//   idle QP keeps no owner waiting for longer, a busy one re-takes it once per lease;
// - the QP is reset, moved to another peer, reconnected, destroyed or moved to ERR.
// A thread that holds a QP's exec_mu gives that QP's lease back before it waits in
// shm::revoke for peers' counts: a peer doing the same at the same time waits for ours,
// and the sweep that would free it needs the exec_mu we hold.
// A peer process killed while it holds a lease leaves its count behind, as one killed in
// the middle of a copy always did: the owner's deregistration then waits
// shm::revoke_wait_ms.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace gdaki::soft {
namespace shm {
struct mapping;
}
namespace wire {

struct mapped_pin {
  static constexpr uint64_t pin_bytes_max = uint64_t{1} << 20;
  static constexpr uint64_t lease_ns = 1'000'000;
  // Two at a time, the most recently pinned first: a put with signal goes to a data window
  // and a signal window, alternately.
  std::shared_ptr<shm::mapping> m[2];
  // For each, the grant's key and epoch words in the owner's revocation slot and what
  // they held when it was pinned: the check every run makes, inline, without a call
  // (out of line it was 37 instructions of a 695-instruction 8-byte WRITE).
  struct grant_words {
    const std::atomic<uint32_t>* key = nullptr;
    const std::atomic<uint32_t>* epoch = nullptr;
    uint32_t key_then = 0, epoch_then = 0;
    bool revoked() const {
      return key->load(std::memory_order_relaxed) != key_then || epoch->load(std::memory_order_relaxed) != epoch_then;
    }
  } g[2];
  uint64_t bytes = 0;
  bool held() const { return m[0] != nullptr || m[1] != nullptr; }
  // Whether a held mapping's grant was revoked since it was pinned. Relaxed: our count
  // keeps the owner waiting until we give it back, so a revocation seen a run late costs
  // the owner that run, nothing else.
  bool stale() const { return (m[0] != nullptr && g[0].revoked()) || (m[1] != nullptr && g[1].revoked()); }
  // Pins m (a count already taken in its grant's slot) as the most recent of the two,
  // giving back the older one's count if both were held.
  void take(std::shared_ptr<shm::mapping> mapping);
  void release();
  // Gives back the mappings whose grant was revoked since they were pinned.
  void revalidate();
  mapped_pin() = default;
  mapped_pin(const mapped_pin&) = delete;
  mapped_pin& operator=(const mapped_pin&) = delete;
  ~mapped_pin() { release(); }
};

}  // namespace wire
}  // namespace gdaki::soft
