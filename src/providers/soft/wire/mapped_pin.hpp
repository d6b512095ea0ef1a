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

#include <cstdint>
#include <memory>

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
  uint64_t bytes = 0;
  bool held() const { return m[0] != nullptr || m[1] != nullptr; }
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
