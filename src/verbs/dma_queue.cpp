// DMA queues: a self-connected RC QP and its host-placed handle (dma_queue.hpp).
#include "gdaki/verbs/dma_queue.hpp"

#include "gdaki/device/cq.hpp"
#include "gdaki/verbs/mr.hpp"

namespace gdaki::verbs {

dma_queue::dma_queue(const device& dev, const pd& p, const dma_queue_init& init)
    : export_options_(init.export_options) {
  cq_init sc;
  sc.depth = init.depth;  // every copy may be signalled: one CQE per WQEBB of the ring
  sc.ring = init.cq_ring;
  send_cq_ = cq(dev, sc);
  // RC QPs need a receive CQ; nothing is ever received here (WRITEs consume no receive).
  cq_init rc;
  rc.depth = 1;
  recv_cq_ = cq(dev, rc);
  qp_init qi;
  qi.send_cq = &send_cq_;
  qi.recv_cq = &recv_cq_;
  qi.sq_wqebbs = init.depth;
  qi.rq_wqes = 1;
  qi.max_send_sge = 1;
  qi.max_recv_sge = 1;
  qi.sq_ring = init.sq_ring;
  qp_ = qp(p, qi);
  send_handle_ = std::make_unique<dev::cq_handle>();
  recv_handle_ = std::make_unique<dev::cq_handle>();
  handle_ = std::make_unique<dev::qp_handle>();
  *send_handle_ = send_cq_.export_handle();
  *recv_handle_ = recv_cq_.export_handle();
  connect_and_export();
}

void dma_queue::connect_and_export() {
  // The peer is the QP itself: a copy's WRITE is checked by the responder side of the same
  // QP (rkey, bounds, REMOTE_WRITE), which is why the destination needs an rkey.
  connect_rc(qp_, qp_.qpn(), access::remote_write);
  *handle_ = qp_.export_handle(send_handle_.get(), recv_handle_.get(), export_options_);
}

void dma_queue::restart() {
  // After RESET the NIC writes nothing more for this QP, so the CQEs still waiting (the
  // error and flushes nobody polled) are all there is: consume them, and the CQ handle's
  // consumer index meets the NIC's producer index again. The CQ is not re-exported: a
  // fresh handle (ci = 0) would read those old CQEs as new (the NIC's count runs on).
  qp_.to_reset();
  dev::completion c;
  while (dev::cq_poll_one(*send_handle_, &c) == status::ok) {
  }
  connect_and_export();
}

}  // namespace gdaki::verbs
