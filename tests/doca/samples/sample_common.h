/*
 * What the three DOCA-shaped samples share, in the shape of DOCA's own samples' common
 * file: argument parsing, the out-of-band exchange over a TCP socket, the second process
 * (the program starts itself again as the peer), and the host set-up through DOCA's host
 * API only (GPU handle, high-level QPs, memory, connection), plus the kernel launcher
 * (gdaki's host grid on CPU threads; a CUDA launch is not written: no GPU path yet).
 */
#ifndef GDAKI_DOCA_SAMPLE_COMMON_H
#define GDAKI_DOCA_SAMPLE_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../doca_connect.h"
#include "doca_gpunetio_device.h"
#include "doca_gpunetio_high_level.h"
#include "doca_gpunetio_host.h"
#include "doca_verbs.h"
#include "gdaki/device/host_grid.hpp"
#include "gdaki_doca_ext.h"

extern char** environ;

#define SAMPLE_HD __host__ __device__

namespace sample {

struct args {
  std::string role = "initiator";
  int port = 0;
  std::string scope = "thread";     // thread | warp
  std::string sharing = "gpu";      // exclusive | cta | gpu
  std::string handler = "auto";     // auto | db | bf | proxy
  uint32_t blocks = 2, threads = 32, iters = 200, size = 1024, runs = 3;
};

inline bool parse(int argc, char** argv, args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--role") a->role = v;
    else if (k == "--port") a->port = std::atoi(v.c_str());
    else if (k == "--scope") a->scope = v;
    else if (k == "--sharing") a->sharing = v;
    else if (k == "--handler") a->handler = v;
    else if (k == "--blocks") a->blocks = static_cast<uint32_t>(std::atoi(v.c_str()));
    else if (k == "--threads") a->threads = static_cast<uint32_t>(std::atoi(v.c_str()));
    else if (k == "--iters") a->iters = static_cast<uint32_t>(std::atoi(v.c_str()));
    else if (k == "--size") a->size = static_cast<uint32_t>(std::atoi(v.c_str()));
    else if (k == "--runs") a->runs = static_cast<uint32_t>(std::atoi(v.c_str()));
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return false;
    }
  }
  if ((argc - 1) % 2 != 0) return false;
  return (a->scope == "thread" || a->scope == "warp") &&
         (a->sharing == "exclusive" || a->sharing == "cta" || a->sharing == "gpu") &&
         (a->handler == "auto" || a->handler == "db" || a->handler == "bf" || a->handler == "proxy");
}

inline doca_gpu_dev_verbs_nic_handler handler_of(const args& a) {
  if (a.handler == "db") return DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB;
  if (a.handler == "bf") return DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_BF;
  if (a.handler == "proxy") return DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY;
  return DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO;
}

// How many QPs the sharing mode needs: one per posting unit.
inline uint32_t qps_needed(const args& a) {
  if (a.sharing == "gpu") return 1;
  if (a.sharing == "cta") return a.blocks;
  const uint32_t per_block = a.scope == "warp" ? (a.threads + 31) / 32 : a.threads;
  return a.blocks * per_block;
}

#define SAMPLE_CHECK(expr)                                                                          \
  do {                                                                                              \
    doca_error_t e_ = (expr);                                                                       \
    if (e_ != DOCA_SUCCESS) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, doca_error_get_name(e_)); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

/* ---- out-of-band exchange: one TCP connection, fixed-size messages ------------------------ */
struct oob {
  int listen_fd = -1, fd = -1;
  int port = 0;
  static bool all(ssize_t (*io)(int, void*, size_t, int), int fd, void* p, size_t n) {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
      const ssize_t r = io(fd, b, n, 0);
      if (r <= 0) return false;
      b += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  static ssize_t send_io(int f, void* p, size_t n, int fl) { return ::send(f, p, n, fl | MSG_NOSIGNAL); }
  static ssize_t recv_io(int f, void* p, size_t n, int fl) { return ::recv(f, p, n, fl); }
  void listen_any() {
    listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(listen_fd, 1) != 0 ||
        ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      std::perror("oob listen");
      std::exit(1);
    }
    port = ntohs(sa.sin_port);
  }
  void accept_one() {
    fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) std::exit(1);
  }
  void connect_to(int p) {
    for (int i = 0; i < 200; ++i) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(p));
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return;
      ::close(fd);
      ::usleep(50000);
    }
    std::fprintf(stderr, "oob: cannot connect to port %d\n", p);
    std::exit(1);
  }
  template <typename T>
  void send(const T& v) {
    if (!all(send_io, fd, const_cast<T*>(&v), sizeof(T))) std::exit(1);
  }
  template <typename T>
  T recv() {
    T v{};
    if (!all(recv_io, fd, &v, sizeof(T))) std::exit(1);
    return v;
  }
  ~oob() {
    if (fd >= 0) ::close(fd);
    if (listen_fd >= 0) ::close(listen_fd);
  }
};

inline pid_t spawn_peer(int argc, char** argv, int port) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) words.emplace_back(argv[i]);
  words.insert(words.end(), {"--role", "target", "--port", std::to_string(port)});
  std::vector<char*> av{const_cast<char*>("/proc/self/exe")};
  for (auto& w : words) av.push_back(w.data());
  av.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, av.data(), environ) != 0) return -1;
  return pid;
}

inline int reap(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return 1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The job secret both processes' soft wires prove (docs/soft-nic.md): made here if unset,
// inherited by the peer through the environment.
inline void ensure_secret() {
  if (std::getenv("GDAKI_SOFT_SECRET") != nullptr) return;
  std::random_device rd;
  std::string hex;
  for (int i = 0; i < 64; ++i) hex += "0123456789abcdef"[rd() & 15];
  ::setenv("GDAKI_SOFT_SECRET", hex.c_str(), 0);
}

/* ---- one process's DOCA set-up ---------------------------------------------------------- */
constexpr uint32_t max_qps = 128;

struct blob {
  struct doca_verbs_gid gid;
  uint8_t token[16];
  uint32_t nqps;
  uint32_t qpn[max_qps];
  uint64_t buf;
  uint32_t rkey;
};

struct side {
  doca_gpu_t* gpu = nullptr;
  ibv_pd* pd = nullptr;
  doca_dev_t* dev = nullptr;
  std::vector<doca_gpu_verbs_qp_hl*> qps;
  doca_gpu_dev_verbs_qp* flat = nullptr;
  doca_gpu_verbs_service_t service = nullptr;
  void* buf = nullptr;
  size_t bytes = 0;
  gdaki_doca_mr* mr = nullptr;
  uint32_t lkey = 0, rkey = 0;

  // with_service: a progress service rings for CPU-proxy QPs; false: the program calls
  // doca_gpu_verbs_cpu_proxy_progress itself.
  void open(uint32_t nqps, doca_gpu_dev_verbs_nic_handler handler, size_t buffer_bytes, bool with_service = true) {
    SAMPLE_CHECK(doca_gpu_create("0000:00:00.0", &gpu));
    SAMPLE_CHECK(gdaki_doca_pd_open("soft0", &pd));
    SAMPLE_CHECK(doca_verbs_dev_open(pd, &dev));
    for (uint32_t i = 0; i < nqps; ++i) {
      doca_gpu_verbs_qp_init_attr_hl at{};
      at.gpu_dev = gpu;
      at.net_dev = dev;
      at.ibpd = pd;
      at.sq_nwqe = 256;
      at.nic_handler = handler;
      doca_gpu_verbs_qp_hl* q = nullptr;
      SAMPLE_CHECK(doca_gpu_verbs_create_qp_hl(&at, &q));
      qps.push_back(q);
    }
    if (with_service && handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY) {  // a CPU thread rings for the kernels
      SAMPLE_CHECK(doca_gpu_verbs_create_service(&service));
      for (auto* q : qps) SAMPLE_CHECK(doca_gpu_verbs_service_monitor_qp(service, q->qp_gverbs));
    }
    SAMPLE_CHECK(doca_gpu_verbs_qp_flat_list_create_hl(qps.data(), nqps, &flat));
    bytes = buffer_bytes;
    void* cpu = nullptr;
    SAMPLE_CHECK(doca_gpu_mem_alloc(gpu, bytes, 0, DOCA_GPU_MEM_TYPE_GPU_CPU, &buf, &cpu));
    SAMPLE_CHECK(gdaki_doca_mr_register(pd, buf, bytes,
                                        GDAKI_DOCA_ACCESS_LOCAL_WRITE | GDAKI_DOCA_ACCESS_REMOTE_WRITE |
                                            GDAKI_DOCA_ACCESS_REMOTE_READ | GDAKI_DOCA_ACCESS_REMOTE_ATOMIC,
                                        &mr, &lkey, &rkey));
  }
  blob describe(const uint8_t* token) const {
    blob b{};
    SAMPLE_CHECK(gdaki_doca_query_gid(pd, &b.gid));
    std::memcpy(b.token, token, 16);
    b.nqps = static_cast<uint32_t>(qps.size());
    for (size_t i = 0; i < qps.size(); ++i) b.qpn[i] = doca_verbs_qp_get_qpn(qps[i]->qp);
    b.buf = reinterpret_cast<uint64_t>(buf);
    b.rkey = rkey;
    return b;
  }
  void connect(const blob& peer) {
    for (size_t i = 0; i < qps.size(); ++i) {
      SAMPLE_CHECK(doca_test_connect(dev, qps[i]->qp, peer.qpn[i], &peer.gid, peer.token));
    }
  }
  void close() {
    if (service != nullptr) SAMPLE_CHECK(doca_gpu_verbs_destroy_service(service));
    SAMPLE_CHECK(gdaki_doca_mr_deregister(mr));
    SAMPLE_CHECK(doca_gpu_mem_free(gpu, buf));
    SAMPLE_CHECK(doca_gpu_verbs_qp_flat_list_destroy_hl(flat));
    for (auto* q : qps) SAMPLE_CHECK(doca_gpu_verbs_destroy_qp_hl(q));
    SAMPLE_CHECK(doca_verbs_dev_close(dev));
    SAMPLE_CHECK(gdaki_doca_pd_close(pd));
    SAMPLE_CHECK(doca_gpu_destroy(gpu));
  }
};

inline uint32_t be32(uint32_t v) { return __builtin_bswap32(v); }

template <typename Fn>
void launch(uint32_t blocks, uint32_t threads, Fn&& fn) {
  gdaki::dev::host::launch({blocks, 1, 1}, {threads, 1, 1}, fn);
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// median, min, max of the runs, then one JSON line.
inline void report(const char* name, const char* unit, std::vector<double> v, const args& a) {
  std::sort(v.begin(), v.end());
  const double med = v[v.size() / 2];
  std::printf("%s (%s, scope %s, sharing %s, handler %s, size %u): median %.3f min %.3f max %.3f %s over %zu runs\n",
              name, "CPU threads on the soft NIC", a.scope.c_str(), a.sharing.c_str(), a.handler.c_str(), a.size, med,
              v.front(), v.back(), unit, v.size());
  std::printf("{\"sample\":\"%s\",\"scope\":\"%s\",\"sharing\":\"%s\",\"handler\":\"%s\",\"size\":%u,\"unit\":\"%s\","
              "\"median\":%.4f,\"min\":%.4f,\"max\":%.4f}\n",
              name, a.scope.c_str(), a.sharing.c_str(), a.handler.c_str(), a.size, unit, med, v.front(), v.back());
}

}  // namespace sample

#endif
