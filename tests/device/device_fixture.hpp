// Host side of the device-API tests: a soft device, two protection domains (A = the
// initiator, B = the peer), registered buffers on each side, and any number of RC QP
// pairs A_i -> B_i connected in one process, with exported handles in host memory.
//
// The same test sources build once per backend (GDAKI_TEST_BACKEND, tests/device/
// CMakeLists.txt): direct (GDAKI doorbells), cpu_assisted (DBR-only handles, the soft NIC
// acts on rung doorbells only, a doorbell_service thread rings) and proxy (handles[i] is
// a proxy-backend handle whose ring a proxy thread drains into A_i through a wqe_poster).
// nic(i) is always the direct handle of A_i, for checks of the QP's own counters.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "device/device_kernels.hpp"
#include "gdaki/device/datapath.hpp"
#include "gdaki/device/dump.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/proxy/doorbell_service.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace device_test {

namespace verbs = gdaki::verbs;
namespace prm = gdaki::prm;

enum class test_backend { direct, cpu_assisted, proxy };
#ifndef GDAKI_TEST_BACKEND
#define GDAKI_TEST_BACKEND direct
#endif
inline constexpr test_backend backend = test_backend::GDAKI_TEST_BACKEND;
// Tickets count WQEBBs of the QP (direct, cpu_assisted) or descriptors (proxy); facts
// about WQE layout and ticket values hold for the first two only.
inline constexpr bool wqe_tickets = backend != test_backend::proxy;

// Page-aligned, zeroed host memory.
struct host_buffer {
  struct deleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, deleter> mem;
  size_t bytes = 0;
  explicit host_buffer(size_t n = 0) { resize(n); }
  void resize(size_t n) {
    bytes = (n + 4095) / 4096 * 4096;
    if (bytes == 0) bytes = 4096;
    mem.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)));
    std::memset(mem.get(), 0, bytes);
  }
  uint8_t* data() const { return mem.get(); }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(mem.get()); }
  uint64_t* words() const { return reinterpret_cast<uint64_t*>(mem.get()); }
};

// A registered buffer.
struct reg_buffer {
  host_buffer buf;
  verbs::mr mr;
  reg_buffer() = default;
  reg_buffer(const verbs::pd& pd, size_t n, uint32_t access) : buf(n), mr(pd, buf.data(), buf.bytes, access) {}
  local_ptr local(uint64_t off = 0) const { return {buf.addr() + off, mr.lkey()}; }
  remote_ptr remote(uint64_t off = 0) const { return {buf.addr() + off, mr.rkey()}; }
  uint8_t* data() const { return buf.data(); }
  uint64_t* words() const { return buf.words(); }
};

struct pair_options {
  uint32_t sq_wqebbs = 64;
  uint32_t cq_depth = 0;  // 0: the SQ depth (no more signalled WQEs can be outstanding)
  uint32_t max_inline = 64;
  bool connect_a = true;  // A: RESET -> RTS
  bool connect_b = true;  // B: RESET -> RTS
  verbs::qp_attr attr = {};
  gdaki::dev::doorbell_mode db_mode = gdaki::dev::doorbell_mode::db_store;
  // cpu_assisted builds: db_store becomes cpu_assisted and a doorbell service rings.
  bool doorbell_service = true;
};

// Proxy builds: each pair's QP is exported with the proxy backend (gdaki::exported_qp:
// ring + WQE poster + proxy service), and one thread drives every export's progress (a
// library-owned thread per ring would be dozens of threads on a 2-core machine).
class proxy_driver {
 public:
  explicit proxy_driver(std::vector<std::unique_ptr<gdaki::exported_qp>>* exports) : exports_(exports) {
    thread_ = std::thread([this] { run(); });
  }
  proxy_driver(const proxy_driver&) = delete;
  proxy_driver& operator=(const proxy_driver&) = delete;
  ~proxy_driver() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }

 private:
  void run() {
    uint32_t idle = 0;
    while (!stop_.load(std::memory_order_acquire)) {
      size_t n = 0;
      for (auto& e : *exports_) n += e->progress();
      if (n != 0) {
        idle = 0;
      } else if (++idle < 256) {
        gdaki::dev::arch::spin_pause(idle);
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }
  std::vector<std::unique_ptr<gdaki::exported_qp>>* exports_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One A -> B pair. A's handle is what the kernels post on.
struct qp_pair {
  verbs::cq a_scq, a_rcq, b_scq, b_rcq;
  verbs::qp a, b;
  gdaki::dev::cq_handle a_send, a_recv;
};

// Fast transport timers: ~1 ms per try, 2 retries.
inline verbs::qp_attr fast_attr() {
  verbs::qp_attr a;
  a.timeout = 8;
  a.retry_cnt = 2;
  a.min_rnr_timer = 1;
  a.rnr_retry = 3;
  return a;
}

struct world {
  verbs::device dev;
  verbs::pd pda, pdb;
  reg_buffer scratch;  // 8-byte sink for signal-add results (LOCAL_WRITE), one per QP
  std::vector<std::unique_ptr<qp_pair>> pairs;
  std::vector<qp_handle> handles;  // sized once: the kernels index it
  std::vector<std::unique_ptr<gdaki::exported_qp>> exports;  // proxy builds: one per pair
  // Declared last: stopped first, before the QPs and rings they use go away.
  std::unique_ptr<gdaki::proxy::doorbell_service> doorbells;
  std::unique_ptr<proxy_driver> driver;

  world() : dev(verbs::device::open("soft0")), pda(dev), pdb(dev) {}
  ~world() {
    driver.reset();
    doorbells.reset();
  }

  // A_i's direct handle: the QP's own counters, CQ and WQEs, whatever the backend.
  qp_handle& nic(size_t i) { return backend == test_backend::proxy ? exports[i]->nic_handle() : handles[i]; }

  // Creates n pairs with options o; handles[i] is A_i's exported handle (with scratch).
  void make_pairs(uint32_t n, const pair_options& o = {}) {
    driver.reset();
    doorbells.reset();
    exports.clear();  // before the QPs they export
    scratch = reg_buffer(pda, 64ull * n, verbs::access::local_write);
    handles.assign(n, qp_handle{});
    pairs.clear();
    for (uint32_t i = 0; i < n; ++i) {
      auto p = std::make_unique<qp_pair>();
      verbs::cq_init ci;
      ci.depth = o.cq_depth ? o.cq_depth : o.sq_wqebbs;
      p->a_scq = verbs::cq(dev, ci);
      p->a_rcq = verbs::cq(dev, ci);
      p->b_scq = verbs::cq(dev, ci);
      p->b_rcq = verbs::cq(dev, ci);
      verbs::qp_init qa;
      qa.send_cq = &p->a_scq;
      qa.recv_cq = &p->a_rcq;
      qa.sq_wqebbs = o.sq_wqebbs;
      qa.rq_wqes = 16;
      qa.max_inline = o.max_inline;
      p->a = verbs::qp(pda, qa);
      verbs::qp_init qb = qa;
      qb.send_cq = &p->b_scq;
      qb.recv_cq = &p->b_rcq;
      p->b = verbs::qp(pdb, qb);
      if (o.connect_a) verbs::connect_rc(p->a, p->b.qpn(), verbs::access::all, o.attr);
      if (o.connect_b) verbs::connect_rc(p->b, p->a.qpn(), verbs::access::all, o.attr);
      p->a_send = p->a_scq.export_handle();
      p->a_recv = p->a_rcq.export_handle();
      verbs::qp_export_options eo;
      eo.db_mode = o.db_mode;
      if (backend == test_backend::cpu_assisted && o.db_mode == gdaki::dev::doorbell_mode::db_store) {
        eo.db_mode = gdaki::dev::doorbell_mode::cpu_assisted;
      }
      handles[i] = p->a.export_handle(&p->a_send, &p->a_recv, eo);
      if (handles[i].scratch_addr == 0) {  // the soft export leaves it to the caller
        handles[i].scratch_addr = scratch.buf.addr() + 64ull * i;
        handles[i].scratch_lkey = scratch.mr.lkey();
      }
      pairs.push_back(std::move(p));
    }
    if (backend == test_backend::cpu_assisted && o.doorbell_service) {
      doorbells = std::make_unique<gdaki::proxy::doorbell_service>();
      for (const qp_handle& h : handles) {
        if (h.db_mode == gdaki::dev::doorbell_mode::cpu_assisted) {
          EXPECT_EQ(doorbells->add(h), gdaki::status::ok);
        }
      }
      EXPECT_EQ(doorbells->start(), gdaki::status::ok);
    }
    if (backend == test_backend::proxy) make_proxies();
  }

 private:
  // Re-exports each A_i with the proxy backend, as an application would: handles[i]
  // becomes the proxy handle on the export's ring; the export keeps A_i's direct handle
  // (nic(i)) for its poster.
  void make_proxies() {
    exports.clear();
    for (size_t i = 0; i < handles.size(); ++i) {
      gdaki::export_options o;
      o.backend = gdaki::backend_request::proxy;
      o.own_thread = false;  // driven by `driver` below
      o.log2_ring_slots = 8;
      o.scratch_addr = handles[i].scratch_addr;
      o.scratch_lkey = handles[i].scratch_lkey;
      auto e = std::make_unique<gdaki::exported_qp>(pairs[i]->a, &pairs[i]->a_send, &pairs[i]->a_recv, o);
      EXPECT_EQ(e->choice().name, "proxy");
      handles[i] = e->handle();
      exports.push_back(std::move(e));
    }
    driver = std::make_unique<proxy_driver>(&exports);
  }

 public:
};

inline uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

inline gdaki::status st(uint64_t v) { return static_cast<gdaki::status>(v); }

}  // namespace device_test

// Lets gtest print statuses by name.
namespace gdaki {
inline void PrintTo(status s, std::ostream* os) { *os << to_string(s); }
}  // namespace gdaki
