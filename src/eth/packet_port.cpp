// The soft port's control path: the AF_PACKET socket and its TPACKET_V3 receive ring, the
// queues' memory, and the port thread that runs the receive and transmit sides.
#include "gdaki/eth/packet_port.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "eth/port_internal.hpp"
#include "gdaki/device/arch.hpp"

namespace gdaki::eth {

mapped_bytes::mapped_bytes(size_t bytes) : n_(bytes) {
  // Populated now, as a NIC's buffers are pinned at registration: otherwise the first pass
  // over a queue's slots takes a page fault per 4 KiB on the receive path.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  p_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}
mapped_bytes& mapped_bytes::operator=(mapped_bytes&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) ::munmap(p_, n_);
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}
mapped_bytes::~mapped_bytes() {
  if (p_ != nullptr) ::munmap(p_, n_);
}

namespace {

// Frames one turn of the receive side takes: the port thread's turn, and a CPU receiver's
// (whose queue should not be flooded before it can release anything).
constexpr size_t port_thread_budget = 1024;
constexpr size_t hook_budget = 256;

bool power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

packet_port::impl::~impl() {
  stop.store(true);
  if (thread.joinable()) thread.join();
  if (ring != nullptr) ::munmap(ring, ring_bytes);
  if (fd >= 0) ::close(fd);
}

// The port thread. Busy while frames or commits arrive; when idle it spins briefly, then
// sleeps in poll() for at most one block timeout, which is also how long a commit can
// wait to be noticed (there is no doorbell interrupt to wake us). A side that CPU
// initiators drove through the hooks within the last `handover_ns` is left to them: on a
// 2-core machine a third thread polling the same ring only takes their core.
void packet_port::impl::run() {
  constexpr uint64_t handover_ns = 2'000'000;
  uint32_t idle = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    const uint64_t now = dev::arch::clock_ns();
    const bool rx_driven = now - rx_driven_at.load(std::memory_order_relaxed) < handover_ns;
    const bool tx_driven = now - tx_driven_at.load(std::memory_order_relaxed) < handover_ns;
    const size_t work = (rx_driven ? 0 : try_receive(port_thread_budget)) + (tx_driven ? 0 : try_transmit());
    if (work != 0) {
      idle = 0;
      continue;
    }
    if (rx_driven && tx_driven) {
      (void)::poll(nullptr, 0, static_cast<int>(cfg.block_timeout_ms));  // both sides are in other hands
      continue;
    }
    if (++idle < 256) {
      dev::arch::spin_pause(idle);
      continue;
    }
    pollfd p{fd, static_cast<short>(rx_driven ? 0 : POLLIN), 0};
    (void)::poll(&p, 1, static_cast<int>(cfg.block_timeout_ms));
  }
}

status packet_port::open(const port_config& c, std::unique_ptr<packet_port>* out, std::string* why) {
  if (c.rx_queues == 0 || !power_of_two(c.rx_slots) || !power_of_two(c.tx_slots) || c.slot_bytes < 64 ||
      !power_of_two(c.capture_block_bytes) || c.capture_block_bytes < 4096 || c.capture_blocks == 0 ||
      c.default_queue >= c.rx_queues || c.block_timeout_ms == 0) {
    *why = "bad port config: queues and blocks must be non-zero, slot counts and block size powers of two";
    return status::invalid;
  }
  auto p = std::make_unique<impl>(c);
  const unsigned ifindex = ::if_nametoindex(c.interface.c_str());
  if (ifindex == 0) {
    *why = "no interface '" + c.interface + "' in this network namespace";
    return status::not_found;
  }
  p->fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (p->fd < 0) {
    const bool perm = errno == EPERM || errno == EACCES;
    *why = errno_text("socket(AF_PACKET)") + (perm ? " (needs CAP_NET_RAW)" : "");
    return perm ? status::access : status::io_error;
  }
  const int version = TPACKET_V3;
  tpacket_req3 req{};
  req.tp_block_size = c.capture_block_bytes;
  req.tp_block_nr = c.capture_blocks;
  req.tp_frame_size = 2048;  // V3 packs frames of any size; the kernel still checks this divides the block
  req.tp_frame_nr = (c.capture_block_bytes / req.tp_frame_size) * c.capture_blocks;
  req.tp_retire_blk_tov = c.block_timeout_ms;
  const int one = 1;
  if (::setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) != 0 ||
      ::setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) != 0) {
    *why = errno_text("TPACKET_V3 receive ring");
    return status::io_error;
  }
  // Our own transmissions would otherwise come back through our receive ring.
  if (::setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0) {
    *why = errno_text("PACKET_IGNORE_OUTGOING (Linux 4.20 or later)");
    return status::not_supported;
  }
  p->ring_bytes = size_t{c.capture_block_bytes} * c.capture_blocks;
  void* ring = ::mmap(nullptr, p->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
  if (ring == MAP_FAILED) {
    *why = errno_text("mmap of the receive ring");
    return status::io_error;
  }
  p->ring = static_cast<uint8_t*>(ring);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(ifindex);
  if (::bind(p->fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *why = errno_text(("bind to " + c.interface).c_str());
    return status::io_error;
  }
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, c.interface.c_str(), IFNAMSIZ - 1);
  if (::ioctl(p->fd, SIOCGIFHWADDR, &ifr) == 0) std::memcpy(p->mac.data(), ifr.ifr_hwaddr.sa_data, 6);

  p->steering = std::make_unique<steering_table>(c.rx_queues, c.default_queue, c.key);
  for (uint32_t i = 0; i < c.rx_queues; ++i) {
    auto q = std::make_unique<rx_queue>();
    q->buffers = mapped_bytes(size_t{c.rx_slots} * c.slot_bytes);
    q->completions = mapped_bytes(size_t{c.rx_slots} * sizeof(dev::eth_rx_completion));
    if (!q->buffers.ok() || !q->completions.ok()) {
      *why = "no memory for receive queue buffers";
      return status::no_memory;
    }
    q->h.buffers = q->buffers.data();
    q->h.completions = reinterpret_cast<dev::eth_rx_completion*>(q->completions.data());
    q->h.slots = c.rx_slots;
    q->h.slot_bytes = c.slot_bytes;
    q->h.queue = i;
    if (c.initiators_drive_port) {
      q->h.host_poll_hook = [](void* ctx) {
        impl* self = static_cast<impl*>(ctx);
        self->rx_driven_at.store(dev::arch::clock_ns(), std::memory_order_relaxed);
        (void)self->try_receive(hook_budget);
      };
      q->h.host_hook_ctx = p.get();
    }
    p->rx.push_back(std::move(q));
  }
  p->tx = std::make_unique<dev::eth_txq_handle>();
  p->tx_ring = mapped_bytes(size_t{c.tx_slots} * sizeof(dev::eth_tx_descriptor));
  if (!p->tx_ring.ok()) {
    *why = "no memory for the transmit ring";
    return status::no_memory;
  }
  p->tx->ring = reinterpret_cast<dev::eth_tx_descriptor*>(p->tx_ring.data());
  p->tx->slots = c.tx_slots;
  p->tx->notify_period = c.tx_slots / 2;
  if (c.initiators_drive_port) {
    p->tx->host_commit_hook = [](void* ctx) {
      impl* self = static_cast<impl*>(ctx);
      self->tx_driven_at.store(dev::arch::clock_ns(), std::memory_order_relaxed);
      (void)self->try_transmit();
    };
    p->tx->host_hook_ctx = p.get();
  }
  impl* raw = p.get();
  p->thread = std::thread([raw] { raw->run(); });
  out->reset(new packet_port(std::move(p)));
  return status::ok;
}

packet_port::packet_port(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
packet_port::~packet_port() = default;

dev::eth_rxq_handle& packet_port::rxq(uint32_t i) { return impl_->rx.at(i)->h; }
dev::eth_txq_handle& packet_port::txq() { return *impl_->tx; }
steering_table& packet_port::steering() { return *impl_->steering; }
std::array<uint8_t, 6> packet_port::mac() const { return impl_->mac; }

port_stats packet_port::stats() {
  port_stats s;
  {
    // PACKET_STATISTICS resets the kernel's counters on every read, so keep the sum.
    std::lock_guard<std::mutex> g(impl_->kernel_stats_lock);
    tpacket_stats_v3 k{};
    socklen_t len = sizeof(k);
    if (::getsockopt(impl_->fd, SOL_PACKET, PACKET_STATISTICS, &k, &len) == 0) impl_->kernel_drops += k.tp_drops;
    s.kernel_drops = impl_->kernel_drops;
  }
  s.frames_seen = impl_->frames_seen.load();
  s.rule_drops = impl_->rule_drops.load();
  s.placed = impl_->placed.load();
  for (const auto& q : impl_->rx) {
    s.queue_full_drops += dev::arch::load_relaxed(&q->h.dropped_full);
    s.oversize_drops += dev::arch::load_relaxed(&q->h.dropped_oversize);
  }
  s.tx_sent = dev::arch::load_relaxed(&impl_->tx->sent);
  s.tx_errors = dev::arch::load_relaxed(&impl_->tx->send_errors);
  return s;
}

}  // namespace gdaki::eth
