// A UDP echo pipeline whose receive and send loops are kernels: the receive kernel takes
// batches of frames from an Ethernet receive queue (a flow rule steers UDP port 7777 to
// it) and hands each batch to the send kernel through a semaphore; the send kernel turns
// every frame into its echo and sends it. Both kernels (eth_udp_echo_kernels.hpp) run on
// CPU threads through the host grid launcher, against the soft Ethernet port.
//
//   eth_udp_echo IFACE COUNT   serve COUNT echoes on interface IFACE, then exit
//   eth_udp_echo               self-test: two network namespaces joined by a veth pair
//                              (needs root; exit 77 without), a UDP socket client in one,
//                              the pipeline in the other; checks every echo
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "eth_udp_echo_kernels.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/eth/host_semaphore.hpp"
#include "gdaki/eth/packet_port.hpp"

namespace {

constexpr uint16_t echo_port = 7777;

// Opens the port, installs the rule, runs both kernels until `count` echoes left.
// `ready` (optional) is set once the port takes frames.
int serve(const std::string& iface, uint64_t count, std::atomic<bool>* ready = nullptr) {
  gdaki::eth::port_config c;
  c.interface = iface;
  c.rx_queues = 2;  // 0: everything else (ARP, ...), 1: the echo port
  std::unique_ptr<gdaki::eth::packet_port> port;
  std::string why;
  if (gdaki::eth::packet_port::open(c, &port, &why) != gdaki::status::ok) {
    std::fprintf(stderr, "eth_udp_echo: %s\n", why.c_str());
    return 77;
  }
  gdaki::eth::flow_rule r;
  r.match.ip_proto = gdaki::eth::ip_proto_udp;
  r.match.dst_port = gdaki::eth::masked<uint16_t>{echo_port};
  r.action.queue = 1;
  uint32_t id = 0;
  if (port->steering().add_rule(r, &id) != gdaki::status::ok) return 1;
  gdaki::eth::host_semaphore sem;
  if (sem.create(4, sizeof(echo_batch)) != gdaki::status::ok) return 1;
  std::vector<uint8_t> tx_buffers(32 * 2048);
  if (ready != nullptr) ready->store(true);
  const echo_args a{&port->rxq(1), &port->txq(), sem.handle(), tx_buffers.data(), 2048, count};
  // Two grids of one warp each, alive at once, as two kernels on two streams would be.
  std::thread receiver([&] { gdaki::dev::host::launch(1, 32, [&] { echo_receive_kernel(a); }); });
  gdaki::dev::host::launch(1, 32, [&] { echo_send_kernel(a); });
  receiver.join();
  const gdaki::eth::port_stats s = port->stats();
  std::printf("eth_udp_echo: %llu echoes sent (%llu frames seen, %llu dropped by a full queue)\n",
              static_cast<unsigned long long>(s.tx_sent), static_cast<unsigned long long>(s.frames_seen),
              static_cast<unsigned long long>(s.queue_full_drops));
  return 0;
}

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

bool enter_netns(const std::string& name) {
  const int fd = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

// The client: sends `count` datagrams (a window of 16 in flight) and checks each echo.
int client(const std::string& server_ip, uint64_t count) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(echo_port);
  ::inet_pton(AF_INET, server_ip.c_str(), &to.sin_addr);
  uint64_t sent = 0, echoed = 0;
  std::vector<bool> seen(count, false);
  while (echoed < count) {
    while (sent < count && sent - echoed < 16) {
      char msg[64];
      const int n = std::snprintf(msg, sizeof(msg), "echo %llu", static_cast<unsigned long long>(sent++));
      ::sendto(fd, msg, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    }
    char buf[128] = {};
    const ssize_t n = ::recv(fd, buf, sizeof(buf) - 1, 0);
    unsigned long long i = 0;
    if (n <= 0 || std::sscanf(buf, "echo %llu", &i) != 1 || i >= count || seen[i]) {
      std::fprintf(stderr, "eth_udp_echo: client got %s after %llu echoes\n", n <= 0 ? "nothing" : "a bad echo",
                   static_cast<unsigned long long>(echoed));
      ::close(fd);
      return 1;
    }
    seen[i] = true;
    ++echoed;
  }
  ::close(fd);
  std::printf("eth_udp_echo: client got all %llu echoes back\n", static_cast<unsigned long long>(count));
  return 0;
}

int self_test(uint64_t count) {
  if (::geteuid() != 0) {
    std::printf("SKIP: the self-test creates network namespaces, which needs root\n");
    return 77;
  }
  const std::string tag = std::to_string(::getpid()), ns1 = "gdaki-echo1-" + tag, ns2 = "gdaki-echo2-" + tag;
  const std::string v1 = "ge" + tag + "a", v2 = "ge" + tag + "b";
  const std::string ip1 = "10.214.0.1", ip2 = "10.214.0.2";
  const bool made = sh("ip netns add " + ns1) && sh("ip netns add " + ns2) &&
                    sh("ip link add " + v1 + " netns " + ns1 + " type veth peer name " + v2 + " netns " + ns2) &&
                    sh("ip -n " + ns1 + " addr add " + ip1 + "/30 dev " + v1) &&
                    sh("ip -n " + ns2 + " addr add " + ip2 + "/30 dev " + v2) && sh("ip -n " + ns1 + " link set " + v1 + " up") &&
                    sh("ip -n " + ns2 + " link set " + v2 + " up");
  int rc = 77;
  if (!made) {
    std::printf("SKIP: could not create two network namespaces joined by a veth pair (iproute2 missing?)\n");
  } else {
    int server_rc = 1;
    std::atomic<bool> ready{false}, done{false};
    std::thread server([&] {
      server_rc = enter_netns(ns2) ? serve(v2, count, &ready) : 1;
      done.store(true);
    });
    const int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    while (!ready.load() && !done.load()) usleep(1000);  // datagrams before the port is bound are lost
    rc = done.load() ? server_rc : enter_netns(ns1) ? client(ip2, count) : 1;
    (void)::setns(home, CLONE_NEWNET);
    ::close(home);
    if (rc != 0) {  // the server waits for echoes that will not come: leave without it
      sh("ip netns del " + ns1);
      sh("ip netns del " + ns2);
      std::_Exit(rc);
    }
    server.join();
    rc = server_rc;
  }
  sh("ip netns del " + ns1);
  sh("ip netns del " + ns2);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3) return serve(argv[1], std::strtoull(argv[2], nullptr, 10));
  return self_test(2000);
}
