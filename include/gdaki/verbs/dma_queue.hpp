// A DMA queue: an RC QP connected to itself on one device, so that an RDMA WRITE posted
// on it copies between two registered buffers of the same PD through the NIC (loopback)
// and completes with a CQE, as device-initiated copies need (docs/design.md decision 29).
// The data path posts on it with dev::dma_memcpy (gdaki/device/dma.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include "gdaki/device/handles.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::verbs {

struct dma_queue_init {
  uint32_t depth = 256;  // SQ depth in WQEBBs (one per copy up to 1 GiB) and send CQ depth
  placement sq_ring{};   // where the SQ ring lives (GPU initiators: reachable by the GPU)
  placement cq_ring{};   // where the send CQE ring lives
  // Export of the host-placed handle (handle()): doorbell mode, host hook, auto-signal.
  qp_export_options export_options{};
};

class dma_queue {
 public:
  dma_queue() = default;
  // Creates the QP (in `p`) and its CQs (on `dev`, the device of `p`) and connects the QP to itself (RESET -> RTS, incoming
  // access REMOTE_WRITE only), then exports a handle placed in host memory for CPU
  // initiators (handle()). Throws gdaki::error as qp and cq do.
  dma_queue(const device& dev, const pd& p, const dma_queue_init& init = {});
  dma_queue(dma_queue&&) noexcept = default;
  dma_queue& operator=(dma_queue&&) noexcept = default;
  dma_queue(const dma_queue&) = delete;
  dma_queue& operator=(const dma_queue&) = delete;
  ~dma_queue() = default;

  explicit operator bool() const { return static_cast<bool>(qp_); }

  // The exported handle for CPU threads (host memory; its CQ handles live beside it and
  // stay put when the dma_queue moves). GPU initiators export the queue pair themselves
  // (gdaki::exported_qp(queue_pair(), ...)) so the handle sits where the GPU reaches it.
  dev::qp_handle& handle() { return *handle_; }

  const qp& queue_pair() const { return qp_; }
  qp& queue_pair() { return qp_; }
  const cq& send_cq() const { return send_cq_; }
  const cq& recv_cq() const { return recv_cq_; }
  uint32_t qpn() const { return qp_.qpn(); }

  // After a failed copy the queue is in ERR (like any QP, PRM 6.6): RESET, consume the
  // CQEs nobody polled, connect to itself again and re-export handle() with zeroed send
  // counters. Only for handle(): a queue exported elsewhere (GPU) is replaced by a new
  // dma_queue instead, since its CQ handle's position is its own. No thread may use
  // handle() meanwhile. Throws gdaki::error.
  void restart();

 private:
  void connect_and_export();
  qp_export_options export_options_{};
  cq send_cq_, recv_cq_;
  qp qp_;
  std::unique_ptr<dev::cq_handle> send_handle_, recv_handle_;
  std::unique_ptr<dev::qp_handle> handle_;
};

}  // namespace gdaki::verbs
