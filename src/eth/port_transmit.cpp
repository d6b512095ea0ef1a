// The port's transmit side: descriptors up to the doorbell (`committed`) go to the
// interface in batches of one sendmmsg call; a notified descriptor advances `completed`
// once its batch has left.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "eth/port_internal.hpp"
#include "gdaki/device/arch.hpp"

namespace gdaki::eth {

namespace arch = dev::arch;

size_t packet_port::impl::transmit_committed() {
  dev::eth_txq_handle& q = *tx;
  // Acquire pairs with eth_txq_commit: the descriptors below the doorbell are written.
  const uint64_t committed = arch::load_acquire(&q.committed);
  size_t sent_now = 0;
  constexpr uint32_t batch = 64;
  while (tx_done < committed) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(batch, committed - tx_done));
    mmsghdr msgs[batch] = {};
    iovec iov[batch];
    uint64_t last_notify = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const dev::eth_tx_descriptor& d = q.ring[(tx_done + i) & (q.slots - 1)];
      iov[i].iov_base = reinterpret_cast<void*>(d.addr);
      iov[i].iov_len = d.bytes;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      if ((d.flags & dev::eth_send_flags::notify) != 0) last_notify = tx_done + i + 1;
    }
    uint32_t done = 0, errors = 0;
    while (done < n) {
      const int r = ::sendmmsg(fd, msgs + done, n - done, 0);
      if (r > 0) {
        done += static_cast<uint32_t>(r);
      } else if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)) {
        continue;  // the interface is busy: a NIC would hold the descriptor too
      } else {
        ++done;  // this frame is refused (too long, link down): count it and go on
        ++errors;
      }
    }
    tx_done += n;
    sent_now += n - errors;
    arch::store_relaxed(&q.sent, arch::load_relaxed(&q.sent) + (n - errors));
    if (errors != 0) arch::store_relaxed(&q.send_errors, arch::load_relaxed(&q.send_errors) + errors);
    // Release: the frames left (their buffers may be reused) before the sender sees it.
    if (last_notify != 0) arch::store_release(&q.completed, last_notify);
  }
  return sent_now;
}

}  // namespace gdaki::eth
