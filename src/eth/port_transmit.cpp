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
  uint64_t sent_pos = tx_done.load(std::memory_order_relaxed);
  while (sent_pos < committed) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(batch, committed - sent_pos));
    mmsghdr msgs[batch] = {};
    iovec iov[batch];
    uint64_t last_notify = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const dev::eth_tx_descriptor& d = q.ring[(sent_pos + i) & (q.slots - 1)];
      iov[i].iov_base = reinterpret_cast<void*>(d.addr);
      iov[i].iov_len = d.bytes;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      if ((d.flags & dev::eth_send_flags::notify) != 0) last_notify = sent_pos + i + 1;
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
    sent_pos += n;
    tx_done.store(sent_pos, std::memory_order_relaxed);
    sent_now += n - errors;
    arch::store_relaxed(&q.sent, arch::load_relaxed(&q.sent) + (n - errors));
    if (errors != 0) arch::store_relaxed(&q.send_errors, arch::load_relaxed(&q.send_errors) + errors);
    // Release: the frames left (their buffers may be reused) before the sender sees it.
    if (last_notify != 0) arch::store_release(&q.completed, last_notify);
  }
  return sent_now;
}

size_t packet_port::impl::try_transmit() {
  size_t sent = 0;
  for (;;) {
    if (tx_busy.test_and_set(std::memory_order_acquire)) return sent;
    sent += transmit_committed();
    tx_busy.clear(std::memory_order_release);
    // A committer that found the lock taken after our last look relies on us: look again.
    // Store->load: our unlock before our look at `committed`, against the committer's
    // raise of `committed` (a locked RMW, a full barrier on the host) before its try-lock.
    arch::local::fence_full();
    if (arch::load_acquire(&tx->committed) == tx_done.load(std::memory_order_relaxed)) return sent;
  }
}

}  // namespace gdaki::eth
