// RDMA WRITE bandwidth between two processes over the soft NIC's shared-memory and TCP
// wires, next to the two ceilings they are measured against in the same run: one-thread
// memcpy and a raw TCP stream over 127.0.0.1. Each figure is the median of --runs runs.
// Usage: wire_bw [--runs N] [--mib-per-run M] [--sizes B,...] [--depth D] [--cq-mod K] [--only shm|map|tcp] [--json|--csv]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gdaki/device/datapath.hpp"
#include "gdaki/oob/tcp_exchange.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "bench_framework.hpp"

namespace {

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;
namespace fw = gdaki::benchfw;
using clk = fw::clock;

// Message sizes measured (--sizes); the targets are stated for these two.
std::vector<size_t> sizes = {64 * 1024, 1u << 20};
constexpr size_t buf_bytes = 1u << 20;  // the largest message (--sizes is checked against it)

struct blob {
  uint8_t address[16];
  uint32_t qpn, rkey;
  uint64_t buf;
};

struct node {
  verbs::device d;
  verbs::pd pd;
  verbs::cq scq, rcq;
  verbs::qp qp;
  // The registered buffer: plain memory (the shm wire then moves data by cross-process
  // copies) or alloc_shared() memory (the peer maps it and copies with memcpy).
  bool shared = false;
  std::vector<uint8_t> plain;
  uint8_t* buf = nullptr;
  verbs::mr mr;
  dev::cq_handle hs{}, hr{};
  dev::qp_handle h{};
  node(const char* wire, bool shared_memory) : shared(shared_memory) {
    if (shared) {
      buf = static_cast<uint8_t*>(gdaki::soft::alloc_shared(buf_bytes));
    } else {
      plain.assign(buf_bytes, 0);
      buf = plain.data();
    }
    std::memset(buf, 1, buf_bytes);
    gdaki::soft::config c = gdaki::soft::get_config();
    c.wire = wire;
    gdaki::soft::set_config(c);
    d = verbs::device::open("soft0");
    pd = verbs::pd(d);
    verbs::cq_init ci;
    ci.depth = 256;
    scq = verbs::cq(d, ci);
    rcq = verbs::cq(d, ci);
    verbs::qp_init qi;
    qi.send_cq = &scq;
    qi.recv_cq = &rcq;
    qi.sq_wqebbs = 256;
    qp = verbs::qp(pd, qi);
    mr = verbs::mr(pd, buf, buf_bytes, verbs::access::all);
  }
  ~node() {
    mr = verbs::mr();
    if (shared) gdaki::soft::free_shared(buf);
  }
  node(const node&) = delete;
  node& operator=(const node&) = delete;
  blob mine() const {
    blob b{};
    const auto a = gdaki::soft::local_address(d);
    std::memcpy(b.address, a.data(), 16);
    b.qpn = qp.qpn();
    b.rkey = mr.rkey();
    b.buf = reinterpret_cast<uint64_t>(buf);
    return b;
  }
  void connect(const blob& peer) {
    verbs::qp_attr a;
    a.av.is_global = true;
    std::memcpy(a.av.dgid, peer.address, 16);
    std::memset(a.av.token, 0x42, 16);  // a benchmark: any agreed value
    verbs::connect_rc(qp, peer.qpn, verbs::access::all, a);
    hs = scq.export_handle();
    hr = rcq.export_handle();
    h = qp.export_handle(&hs, &hr);
  }
};

std::vector<uint8_t> bytes_of(const blob& b) {
  std::vector<uint8_t> v(sizeof(b));
  std::memcpy(v.data(), &b, sizeof(b));
  return v;
}
blob blob_of(const std::vector<uint8_t>& v) {
  blob b{};
  std::memcpy(&b, v.data(), std::min(v.size(), sizeof(b)));
  return b;
}

// GB/s of `count` WRITEs of `size` bytes, keeping `depth` of them posted (as perftest's
// ib_write_bw keeps tx_depth) and asking for a CQE on every `cq_mod`-th one (as its
// --cq-mod, default 100 there): a CQE is polled only when `depth` are out. The depth is
// above the wire's window (config::wire_window), so the posting thread spends its waits
// inside the doorbell, blocked on the socket, as a blocking send() would, rather than
// spinning on the CQ against the peer for the CPU.
double write_run(node& n, const blob& t, size_t size, size_t count, size_t depth, size_t cq_mod) {
  const dev::local_ptr src{reinterpret_cast<uint64_t>(n.buf), n.mr.lkey()};
  const auto t0 = clk::now();
  size_t posted = 0, completed = 0, since_cqe = 0;
  std::vector<size_t> covers;  // WQEs each outstanding CQE completes, oldest first
  size_t next_cover = 0;
  auto reap = [&] {
    dev::completion c{};
    while (dev::sq_poll(n.h, &c) != gdaki::status::ok) dev::arch::spin_pause(0);
    if (!c.ok()) {
      std::fprintf(stderr, "wire_bw: WRITE failed (syndrome %u)\n", static_cast<unsigned>(c.syndrome));
      return false;
    }
    completed += covers[next_cover++];
    return true;
  };
  while (completed < count) {
    if (posted < count && posted - completed < depth) {
      ++posted;
      ++since_cqe;
      const bool signal = since_cqe == cq_mod || posted == count || posted - completed == depth;
      // The device API's put, as a kernel thread that owns the QP would call it (the sole
      // poster: sharing::exclusive reserves without an atomic, as a one-thread
      // ibv_post_send does on a single-threaded context).
      uint64_t ticket = 0;
      if (dev::put<dev::scope_thread, dev::sharing::exclusive>(n.h, {t.buf, t.rkey}, src, size, &ticket,
                                                              signal ? dev::op_flags::none : dev::op_flags::unsignaled,
                                                              5'000'000'000ull) != gdaki::status::ok) {
        std::fprintf(stderr, "wire_bw: put failed\n");
        return 0;
      }
      if (signal) {
        covers.push_back(since_cqe);
        since_cqe = 0;
      }
      continue;
    }
    if (!reap()) return 0;
  }
  return static_cast<double>(size * count) / fw::seconds_since(t0) / 1e9;
}

// One-thread memcpy of `size` bytes, `count` times, between two page-aligned buffers that
// stay in place, as the WRITEs' source and target do (alloc_shared() memory is page
// aligned; a copy whose target is not 64-byte aligned runs up to a quarter slower here,
// which would flatter the wire): the shared-memory wire's ceiling.
struct memcpy_ceiling {
  uint8_t* a = static_cast<uint8_t*>(std::aligned_alloc(4096, buf_bytes));
  uint8_t* b = static_cast<uint8_t*>(std::aligned_alloc(4096, buf_bytes));
  memcpy_ceiling() {
    std::memset(a, 1, buf_bytes);
    std::memset(b, 2, buf_bytes);
  }
  ~memcpy_ceiling() {
    std::free(a);
    std::free(b);
  }
  memcpy_ceiling(const memcpy_ceiling&) = delete;
  memcpy_ceiling& operator=(const memcpy_ceiling&) = delete;
  double run(size_t size, size_t count) {
    const auto t0 = clk::now();
    for (size_t k = 0; k < count; ++k) {
      std::memcpy(b, a, size);
      asm volatile("" : : "r"(b) : "memory");  // keep every copy
    }
    return static_cast<double>(size * count) / fw::seconds_since(t0) / 1e9;
  }
};

// The ceiling measured alone, before any soft device exists in the process.
void memcpy_bench(int runs, size_t bytes_per_run, std::vector<fw::stats>& out) {
  memcpy_ceiling mc;
  for (size_t si = 0; si < sizes.size(); ++si) {
    const size_t count = std::max<size_t>(16, bytes_per_run / sizes[si]);
    std::vector<double> r;
    for (int i = 0; i < runs; ++i) r.push_back(mc.run(sizes[si], count));
    out[si] = fw::summarize(r);
  }
}

// WRITE runs over `wire`; with `ceiling`, each run follows a memcpy run of the same size in
// the same process, so both figures come from the same minutes of a shared machine.
void wire_bench(const char* wire, bool shared, int runs, size_t bytes_per_run, size_t depth, size_t cq_mod,
                std::vector<fw::stats>& out, std::vector<fw::stats>* ceiling = nullptr) {
  gdaki::oob::tcp_exchange srv = gdaki::oob::tcp_exchange::listen("127.0.0.1");
  const uint16_t port = srv.port();
  (void)gdaki::soft::secret_hex();  // made before the fork: both processes share the job's secret
  const pid_t child = ::fork();
  if (child == 0) {
    int rc = 0;
    try {
      node t(wire, shared);
      gdaki::oob::tcp_exchange x = gdaki::oob::tcp_exchange::connect("127.0.0.1", port);
      const blob peer = blob_of(x.recv());
      t.connect(peer);
      x.send(bytes_of(t.mine()));
      (void)x.recv(60000);  // serve until the initiator is done
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  {
    node n(wire, shared);
    srv.accept();
    srv.send(bytes_of(n.mine()));
    const blob t = blob_of(srv.recv());
    n.connect(t);
    for (size_t si = 0; si < sizes.size(); ++si) {
      const size_t count = std::max<size_t>(16, bytes_per_run / sizes[si]);
      write_run(n, t, sizes[si], 16, depth, cq_mod);  // warm-up: connection, page faults
      std::vector<double> r, m;
      memcpy_ceiling mc;
      for (int i = 0; i < runs; ++i) {
        if (ceiling != nullptr) m.push_back(mc.run(sizes[si], count));
        r.push_back(write_run(n, t, sizes[si], count, depth, cq_mod));
      }
      out[si] = fw::summarize(r);
      if (ceiling != nullptr) (*ceiling)[si] = fw::summarize(m);
    }
    srv.send({});
  }
  int st = 0;
  ::waitpid(child, &st, 0);
}

// A raw TCP stream over 127.0.0.1 to a child that reads into a 1 MiB buffer; the time
// ends when the child has read every byte (it answers with one byte).
void tcp_bench(int runs, size_t bytes_per_run, std::vector<fw::stats>& out) {
  for (size_t si = 0; si < sizes.size(); ++si) {
    const size_t size = sizes[si];
    const size_t count = std::max<size_t>(16, bytes_per_run / size);
    std::vector<double> r;
    for (int i = 0; i < runs; ++i) {
      const int l = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
      ::listen(l, 1);
      socklen_t sl = sizeof(sa);
      ::getsockname(l, reinterpret_cast<sockaddr*>(&sa), &sl);
      const pid_t child = ::fork();
      if (child == 0) {
        const int fd = ::accept(l, nullptr, nullptr);
        std::vector<uint8_t> buf(size);
        size_t got = 0;
        while (got < size * count) {
          const ssize_t n = ::recv(fd, buf.data(), std::min(size, size * count - got), 0);
          if (n <= 0) ::_exit(1);
          got += static_cast<size_t>(n);
        }
        const char one = 1;
        (void)!::send(fd, &one, 1, 0);
        ::_exit(0);
      }
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      std::vector<uint8_t> buf(size, 3);
      const auto t0 = clk::now();
      for (size_t k = 0; k < count; ++k) {
        size_t sent = 0;
        while (sent < size) {
          const ssize_t n = ::send(fd, buf.data() + sent, size - sent, 0);
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
      }
      char ack = 0;
      (void)!::recv(fd, &ack, 1, MSG_WAITALL);
      r.push_back(static_cast<double>(size * count) / fw::seconds_since(t0) / 1e9);
      ::close(fd);
      ::close(l);
      int st = 0;
      ::waitpid(child, &st, 0);
    }
    out[si] = fw::summarize(r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  fw::common_options o;
  size_t mib = 512;
  size_t depth = 128;
  size_t cq_mod = 16;
  std::string only = "all";
  CLI::App app{"WRITE bandwidth between two processes over the shm and TCP wires, with memcpy and raw TCP"};
  fw::add_common_options(app, o);
  app.add_option("--mib-per-run", mib, "MiB written per run and size")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--sizes", sizes, "message sizes in bytes (the targets are stated for 65536 and 1048576)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--depth", depth, "WRITEs kept posted (the SQ holds 256)")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--cq-mod", cq_mod, "ask for a CQE on every N-th WRITE (1 = every one)")
      ->check(CLI::Range(1, 128))
      ->capture_default_str();
  app.add_option("--only", only, "measure one wire and its ceiling: shm (both paths), map (mapped path), tcp, or all")
      ->check(CLI::IsMember({"all", "shm", "map", "tcp"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const int runs = static_cast<int>(o.runs);
  const size_t bytes = mib << 20;
  for (size_t b : sizes) {
    if (b == 0 || b > buf_bytes) {
      std::fprintf(stderr, "wire_bw: --sizes: %zu bytes is outside 1 .. %zu\n", b, buf_bytes);
      return 2;
    }
  }
  const size_t ns = sizes.size();
  std::vector<fw::stats> shm(ns), shm_cma(ns), tcp(ns), mc(ns), mc_alone(ns), mc_inter(ns), raw(ns);
  const bool all = only == "all", shm_too = all || only == "shm" || only == "map";
  fw::writer w(o, "wire_bw", "WRITE bandwidth between two processes over the shm and TCP wires",
               {fw::text("only", only), fw::integer("mib_per_run", mib), fw::integer("depth", depth),
                fw::integer("cq_mod", cq_mod)},
               {{"bw", "GB/s (1e9 bytes per second)"}});
  w.expect_steps(5);
  // The memcpy ceiling twice: alone first, then run by run between the mapped WRITE runs;
  // the ratio is taken against the higher of the two medians (the stricter target).
  w.step("memcpy alone");
  if (shm_too) memcpy_bench(runs, bytes, mc_alone);
  w.step("raw tcp");
  if (all || only == "tcp") tcp_bench(runs, bytes, raw);
  w.step("shm wire, mapped path");
  if (shm_too) wire_bench("shm", true, runs, bytes, depth, cq_mod, shm, &mc_inter);
  for (size_t si = 0; si < ns; ++si) mc[si] = mc_alone[si].median >= mc_inter[si].median ? mc_alone[si] : mc_inter[si];
  w.step("shm wire, cross-process copies");
  if (all || only == "shm") wire_bench("shm", false, runs, bytes, depth, cq_mod, shm_cma);
  w.step("tcp wire");
  if (all || only == "tcp") wire_bench("tcp", false, runs, bytes, depth, cq_mod, tcp);
  // shm: the target's MR in alloc_shared() memory (mapped path); shm_cma: plain memory
  // (cross-process copies by the target). The shm ratio is the mapped path's.
  const auto ratio = [](const fw::stats& a, const fw::stats& b) { return b.median > 0 ? a.median / b.median : 0.0; };
  for (size_t si = 0; si < ns; ++si) {
    w.add_row({fw::integer("bytes", sizes[si]), fw::figure("shm_write", "GB/s", shm[si], 2),
               fw::figure("shm_cma_write", "GB/s", shm_cma[si], 2), fw::figure("memcpy", "GB/s", mc[si], 2),
               fw::number("shm_ratio", ratio(shm[si], mc[si]), 2), fw::figure("tcp_write", "GB/s", tcp[si], 2),
               fw::figure("raw_tcp", "GB/s", raw[si], 2), fw::number("tcp_ratio", ratio(tcp[si], raw[si]), 2),
               fw::figure("memcpy_alone", "GB/s", mc_alone[si], 2),
               fw::figure("memcpy_between_runs", "GB/s", mc_inter[si], 2)});
  }
  return w.finish();
}
