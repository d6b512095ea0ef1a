// The proxy's own mlx5 WQE writer: a poster (proxy/poster.hpp) that executes descriptors
// by posting WQEs through the direct data path (ops.hpp, sq.hpp) on exported direct QP
// handles of any provider that consumes mlx5 WQEs (soft, mlx5). The proxy thread is then
// the only poster on those QPs. Keys in descriptors are the QP's own lkeys/rkeys (both
// sides share one verbs domain, so no translation). Host-only. docs/proxy.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gdaki/device/handles.hpp"
#include "gdaki/proxy/poster.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

class wqe_poster final : public poster {
 public:
  // peers[i] serves descriptors with peer == i: a direct-backend handle in host-reachable
  // memory, used by this poster alone from now on (signal adds need its scratch buffer).
  // max_pending bounds operations posted and not yet reported (post answers again above).
  explicit wqe_poster(std::vector<dev::qp_handle*> peers, uint32_t max_pending = 1024);

  // Returns ok, again (the peer's send queue or the pending table is full), invalid (no
  // such peer, a proxy-backend peer handle, or arguments the QP rejects) or not_supported
  // (fence / quiet, which the proxy service implements itself).
  status post(const descriptor& d, uint64_t cookie) override;

  // Reports finished operations in the order they were posted (RC send queues complete in
  // order, and keeping one order across peers keeps counter-based tickets exact).
  size_t poll(completion* out, size_t max) override;

  const char* name() const override { return "wqe"; }

 private:
  struct pending {
    uint64_t ticket;  // the data-path ticket on peers_[peer]
    uint64_t cookie;
    uint16_t peer;
  };
  std::vector<dev::qp_handle*> peers_;
  std::vector<pending> fifo_;  // ring of max_pending entries, sized once (no allocation later)
  uint64_t head_ = 0, tail_ = 0;  // free-running; occupancy tail_ - head_
};

}  // namespace gdaki::proxy
