// Packets per second through the soft Ethernet port between two network namespaces
// joined by a veth pair, next to the two baselines on the same veth in the same run: a
// plain TPACKET_V3 receive loop / AF_PACKET sendmmsg loop, and a UDP socket loop
// (recvmmsg / sendmmsg). Rounds interleave the three; each figure is the median of --runs.
//   receive: one generator in ns1 blasts --frames UDP frames (AF_PACKET sendmmsg); the
//            receiver in ns2 counts what arrives; rate = frames received / (last - first)
//   send:    the sender in ns1 sends --frames frames; rate = frames / elapsed
// Needs root (namespaces, packet sockets); exits 77 without.
// Usage: eth_pps [--runs N] [--frames F] [--sizes 64,1500] [--rx-slots S] [--json|--csv]
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_framework.hpp"
#include "gdaki/device/eth.hpp"
#include "gdaki/eth/packet_port.hpp"

namespace {

namespace dev = gdaki::dev;
namespace geth = gdaki::eth;
namespace fw = gdaki::benchfw;
using fw::seconds_since;
using clk = fw::clock;

constexpr uint16_t port_no = 9000;
const char* ip1 = "10.215.0.1";
const char* ip2 = "10.215.0.2";

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

struct netns_pair {
  std::string ns1, ns2, if1, if2;
  bool made = false;
  bool create() {
    const std::string tag = std::to_string(::getpid());
    ns1 = "gdaki-pps1-" + tag, ns2 = "gdaki-pps2-" + tag, if1 = "gp" + tag + "a", if2 = "gp" + tag + "b";
    made = sh("ip netns add " + ns1);
    return made && sh("ip netns add " + ns2) &&
           sh("ip link add " + if1 + " netns " + ns1 + " type veth peer name " + if2 + " netns " + ns2) &&
           sh("ip -n " + ns1 + " addr add " + ip1 + "/30 dev " + if1) &&
           sh("ip -n " + ns2 + " addr add " + ip2 + "/30 dev " + if2) && sh("ip -n " + ns1 + " link set " + if1 + " up") &&
           sh("ip -n " + ns2 + " link set " + if2 + " up");
  }
  ~netns_pair() {
    if (!made) return;
    sh("ip netns del " + ns1);
    sh("ip netns del " + ns2);
  }
};

// Runs fn with the calling thread in namespace `ns`, then returns to where it was.
void in_netns(const std::string& ns, const std::function<void()>& fn) {
  const int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) std::abort();
  ::close(fd);
  fn();
  (void)::setns(home, CLONE_NEWNET);
  ::close(home);
}

std::array<uint8_t, 6> mac_of(const std::string& ifname) {
  std::array<uint8_t, 6> m{};
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) std::memcpy(m.data(), ifr.ifr_hwaddr.sa_data, 6);
  ::close(fd);
  return m;
}

// A UDP/IPv4 frame of `bytes` from ns1 to ns2's UDP port, IP checksum computed, UDP
// checksum 0 (none), so the UDP socket baseline accepts it.
std::vector<uint8_t> udp_frame(size_t bytes, const std::array<uint8_t, 6>& src, const std::array<uint8_t, 6>& dst,
                               bool reverse) {
  std::vector<uint8_t> f(bytes, 0);
  std::memcpy(f.data(), dst.data(), 6);
  std::memcpy(f.data() + 6, src.data(), 6);
  f[12] = 0x08;
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  const uint16_t ip_len = static_cast<uint16_t>(bytes - 14), udp_len = static_cast<uint16_t>(bytes - 34);
  ip[2] = static_cast<uint8_t>(ip_len >> 8), ip[3] = static_cast<uint8_t>(ip_len);
  ip[8] = 64, ip[9] = 17;
  ::inet_pton(AF_INET, reverse ? ip2 : ip1, ip + 12);
  ::inet_pton(AF_INET, reverse ? ip1 : ip2, ip + 16);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip[10] = static_cast<uint8_t>(~sum >> 8), ip[11] = static_cast<uint8_t>(~sum);
  uint8_t* udp = ip + 20;
  udp[0] = udp[2] = static_cast<uint8_t>(port_no >> 8), udp[1] = udp[3] = static_cast<uint8_t>(port_no & 0xff);
  udp[4] = static_cast<uint8_t>(udp_len >> 8), udp[5] = static_cast<uint8_t>(udp_len);
  return f;
}

int packet_socket(const std::string& ifname) {
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = static_cast<int>(::if_nametoindex(ifname.c_str()));
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::abort();
  return fd;
}

// Sends `n` copies of `frame` with sendmmsg batches of 32 (the generator and the plain send loop).
void blast(int fd, const std::vector<uint8_t>& frame, uint64_t n) {
  mmsghdr m[32] = {};
  iovec v{const_cast<uint8_t*>(frame.data()), frame.size()};
  for (auto& x : m) x.msg_hdr.msg_iov = &v, x.msg_hdr.msg_iovlen = 1;
  for (uint64_t sent = 0; sent < n;) {
    const int r = ::sendmmsg(fd, m, static_cast<unsigned>(std::min<uint64_t>(32, n - sent)), 0);
    if (r > 0) sent += static_cast<uint64_t>(r);
  }
}

// Receive-side counting: the receiver calls got(k) as frames come; done when `idle`
// passed without any, or all `n` arrived.
struct rx_counter {
  uint64_t n, count = 0;
  clk::time_point made = clk::now(), first{}, last{};
  bool add(uint32_t k) {
    if (k == 0) return count < n && (count == 0 ? seconds_since(made) < 10 : seconds_since(last) < 0.2);
    if (count == 0) first = clk::now();
    count += k;
    last = clk::now();
    return count < n;
  }
  double rate() const {
    const double s = std::chrono::duration<double>(last - first).count();
    return s > 0 ? static_cast<double>(count) / s : 0;
  }
};

uint32_t rx_slots_opt = 4096;  // --rx-slots

// Fraction of the generator's frames the last receive measurement counted (send: 1).
double last_delivered = 1;

struct setup {
  netns_pair pair;
  std::array<uint8_t, 6> mac1{}, mac2{};
};

// One receive measurement: `receiver(counter)` runs in ns2 while the generator blasts.
double measure_rx(setup& s, size_t bytes, uint64_t n, const std::function<void(rx_counter&, std::atomic<bool>&)>& receiver) {
  rx_counter c{n};
  std::atomic<bool> ready{false};
  std::thread rx([&] { in_netns(s.pair.ns2, [&] { receiver(c, ready); }); });
  while (!ready.load()) std::this_thread::yield();
  in_netns(s.pair.ns1, [&] {
    const int fd = packet_socket(s.pair.if1);
    blast(fd, udp_frame(bytes, s.mac1, s.mac2, false), n);
    ::close(fd);
  });
  rx.join();
  last_delivered = static_cast<double>(c.count) / static_cast<double>(n);
  return c.rate();
}

double rx_gdaki(setup& s, size_t bytes, uint64_t n) {
  return measure_rx(s, bytes, n, [&](rx_counter& c, std::atomic<bool>& ready) {
    geth::port_config cfg;
    cfg.interface = s.pair.if2;
    cfg.rx_slots = rx_slots_opt;
    std::unique_ptr<geth::packet_port> port;
    std::string why;
    if (geth::packet_port::open(cfg, &port, &why) != gdaki::status::ok) std::abort();
    ready.store(true);
    dev::eth_rxq_handle& q = port->rxq(0);
    for (bool more = true; more;) {
      uint64_t first = 0;
      uint32_t k = 0;
      (void)dev::eth_rxq_receive(q, 256, 0, &first, &k);
      (void)dev::eth_rxq_release(q, first, k);
      more = c.add(k);
      if (k == 0) std::this_thread::yield();
    }
  });
}

double rx_tpacket(setup& s, size_t bytes, uint64_t n) {
  return measure_rx(s, bytes, n, [&](rx_counter& c, std::atomic<bool>& ready) {
    const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    const int v = TPACKET_V3;
    tpacket_req3 req{};
    req.tp_block_size = 1u << 20, req.tp_block_nr = 64, req.tp_frame_size = 2048;
    req.tp_frame_nr = (req.tp_block_size / 2048) * 64, req.tp_retire_blk_tov = 1;
    ::setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v));
    ::setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req));
    auto* ring = static_cast<uint8_t*>(::mmap(nullptr, size_t{64} << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    sockaddr_ll a{};
    a.sll_family = AF_PACKET, a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = static_cast<int>(::if_nametoindex(s.pair.if2.c_str()));
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ready.store(true);
    uint32_t b = 0;
    for (bool more = true; more;) {
      auto* blk = reinterpret_cast<tpacket_block_desc*>(ring + (size_t{b} << 20));
      uint32_t k = 0;
      if ((__atomic_load_n(&blk->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0) {
        k = blk->hdr.bh1.num_pkts;
        __atomic_store_n(&blk->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        b = (b + 1) % 64;
      }
      more = c.add(k);
      if (k == 0) {
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, 1);
      }
    }
    ::munmap(ring, size_t{64} << 20);
    ::close(fd);
  });
}

double rx_udp(setup& s, size_t bytes, uint64_t n) {
  return measure_rx(s, bytes, n, [&](rx_counter& c, std::atomic<bool>& ready) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int big = 64 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
    sockaddr_in a{};
    a.sin_family = AF_INET, a.sin_port = htons(port_no);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ready.store(true);
    std::vector<uint8_t> buf(64 * 2048);
    mmsghdr m[64] = {};
    iovec v[64];
    for (int i = 0; i < 64; ++i) {
      v[i] = {buf.data() + i * 2048, 2048};
      m[i].msg_hdr.msg_iov = &v[i], m[i].msg_hdr.msg_iovlen = 1;
    }
    for (bool more = true; more;) {
      const int r = ::recvmmsg(fd, m, 64, MSG_DONTWAIT, nullptr);
      more = c.add(r > 0 ? static_cast<uint32_t>(r) : 0);
      if (r <= 0) {
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, 1);
      }
    }
    ::close(fd);
    (void)bytes;
  });
}

// Send measurements, all in ns1 towards ns2.
double tx_gdaki(setup& s, size_t bytes, uint64_t n) {
  double rate = 0;
  in_netns(s.pair.ns1, [&] {
    geth::port_config cfg;
    cfg.interface = s.pair.if1;
    std::unique_ptr<geth::packet_port> port;
    std::string why;
    if (geth::packet_port::open(cfg, &port, &why) != gdaki::status::ok) std::abort();
    const std::vector<uint8_t> f = udp_frame(bytes, s.mac1, s.mac2, false);
    dev::eth_txq_handle& q = port->txq();
    const auto t0 = clk::now();
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; ++i) {
      (void)dev::eth_txq_send(q, reinterpret_cast<uint64_t>(f.data()), static_cast<uint32_t>(f.size()),
                              i + 1 == n ? dev::eth_send_flags::notify : dev::eth_send_flags::none, &pos);
      if ((i + 1) % 32 == 0 || i + 1 == n) dev::eth_txq_commit(q);
    }
    (void)dev::eth_txq_wait(q, pos);
    rate = static_cast<double>(n) / seconds_since(t0);
  });
  return rate;
}

double tx_packet(setup& s, size_t bytes, uint64_t n) {
  double rate = 0;
  in_netns(s.pair.ns1, [&] {
    const int fd = packet_socket(s.pair.if1);
    const auto t0 = clk::now();
    blast(fd, udp_frame(bytes, s.mac1, s.mac2, false), n);
    rate = static_cast<double>(n) / seconds_since(t0);
    ::close(fd);
  });
  return rate;
}

double tx_udp(setup& s, size_t bytes, uint64_t n) {
  double rate = 0;
  in_netns(s.pair.ns1, [&] {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET, to.sin_port = htons(port_no);
    ::inet_pton(AF_INET, ip2, &to.sin_addr);
    std::vector<uint8_t> payload(bytes - 42, 0);
    mmsghdr m[32] = {};
    iovec v{payload.data(), payload.size()};
    for (auto& x : m) x.msg_hdr.msg_iov = &v, x.msg_hdr.msg_iovlen = 1, x.msg_hdr.msg_name = &to,
                      x.msg_hdr.msg_namelen = sizeof(to);
    const auto t0 = clk::now();
    for (uint64_t sent = 0; sent < n;) {
      const int r = ::sendmmsg(fd, m, static_cast<unsigned>(std::min<uint64_t>(32, n - sent)), 0);
      if (r > 0) sent += static_cast<uint64_t>(r);
    }
    rate = static_cast<double>(n) / seconds_since(t0);
    ::close(fd);
  });
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ethernet packets per second: soft port vs TPACKET_V3 and UDP socket loops on one veth"};
  fw::common_options o;
  fw::add_common_options(app, o);
  uint64_t frames = 200000;
  std::vector<size_t> sizes = {64, 1500};
  app.add_option("--frames", frames, "Frames per measurement")->capture_default_str();
  app.add_option("--sizes", sizes, "Frame sizes in bytes (60..1514)")->delimiter(',');
  app.add_option("--rx-slots", rx_slots_opt, "Slots of the port's receive queue (power of two)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (::geteuid() != 0) {
    std::printf("SKIP: needs root for network namespaces and packet sockets\n");
    return 77;
  }
  setup s;
  if (!s.pair.create()) {
    std::printf("SKIP: could not create two network namespaces joined by a veth pair\n");
    return 77;
  }
  in_netns(s.pair.ns1, [&] { s.mac1 = mac_of(s.pair.if1); });
  in_netns(s.pair.ns2, [&] { s.mac2 = mac_of(s.pair.if2); });
  using fn = double (*)(setup&, size_t, uint64_t);
  const struct {
    const char* dir;
    const char* name;
    fn f;
  } methods[] = {{"rx", "gdaki_port", rx_gdaki}, {"rx", "tpacket_v3", rx_tpacket}, {"rx", "udp_socket", rx_udp},
                 {"tx", "gdaki_port", tx_gdaki}, {"tx", "af_packet", tx_packet}, {"tx", "udp_socket", tx_udp}};
  constexpr size_t m_count = sizeof(methods) / sizeof(methods[0]);
  std::vector<std::vector<std::vector<double>>> rates(sizes.size(), std::vector<std::vector<double>>(m_count));
  auto delivered = rates;
  fw::writer w(o, "eth_pps", "Ethernet packets per second: soft port vs TPACKET_V3 and UDP socket loops on one veth",
               {fw::integer("frames", frames), fw::integer("rx_slots", rx_slots_opt)});
  w.expect_steps(o.runs);
  for (uint32_t r = 0; r < o.runs; ++r) {
    w.step("round " + std::to_string(r + 1));
    for (size_t z = 0; z < sizes.size(); ++z) {
      for (size_t m = 0; m < m_count; ++m) {
        last_delivered = 1;
        rates[z][m].push_back(methods[m].f(s, std::max<size_t>(60, sizes[z]), frames));
        delivered[z][m].push_back(100 * last_delivered);
      }
    }
  }
  for (size_t z = 0; z < sizes.size(); ++z) {
    for (size_t m = 0; m < m_count; ++m) {
      w.add_row({fw::text("dir", methods[m].dir), fw::integer("bytes", sizes[z]), fw::text("path", methods[m].name),
                 fw::figure("rate", "pps", fw::summarize(rates[z][m]), 0),
                 fw::figure("delivered", "%", fw::summarize(delivered[z][m]), 1)});
    }
  }
  return w.finish();
}
