// Shared scaffolding for the data-path unit tests: a QP / CQ pair backed by ordinary host
// memory, and a test-side "NIC" that reads WQEs and writes CQEs. Everything the NIC side
// does is written by hand from the mlx5-datapath spec (byte offsets, owner rule,
// publishing order), never with the gdaki code under test, so that a test can catch a
// header that got the spec wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "gdaki/device/handles.hpp"
#include "gdaki/prm/decode.hpp"
#include "gdaki/status.hpp"

// GoogleTest printers (found by ADL), so failures show names instead of raw bytes.
namespace gdaki {
inline void PrintTo(status s, std::ostream* os) { *os << to_string(s); }
}  // namespace gdaki
namespace gdaki::prm {
inline void PrintTo(cqe_opcode op, std::ostream* os) { *os << to_string(op) << " (" << int(op) << ")"; }
inline void PrintTo(syndrome s, std::ostream* os) { *os << to_string(s) << " (0x" << std::hex << int(s) << std::dec << ")"; }
inline void PrintTo(send_opcode op, std::ostream* os) { *os << to_string(op) << " (" << int(op) << ")"; }
}  // namespace gdaki::prm

namespace gdaki_test {

// A 64-byte aligned, zero- or pattern-filled byte buffer.
class aligned_bytes {
 public:
  explicit aligned_bytes(size_t bytes, uint8_t fill = 0) : size_(bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, fill, rounded == 0 ? 64 : rounded);
  }
  ~aligned_bytes() { std::free(data_); }
  aligned_bytes(const aligned_bytes&) = delete;
  aligned_bytes& operator=(const aligned_bytes&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

// Spec 5.4: before the first CQE every op_own holds 0xF1 (opcode INVALID, owner 1).
inline void init_cq_ring(uint8_t* cqes, uint32_t entries) {
  std::memset(cqes, 0, static_cast<size_t>(entries) * 64);
  for (uint32_t i = 0; i < entries; ++i) cqes[i * 64 + 63] = 0xf1;
}

// A CQ in host memory, initialised as the spec says.
struct test_cq {
  explicit test_cq(uint32_t log_entries) : ring(size_t{64} << log_entries), dbrec(8) {
    init_cq_ring(ring.data(), 1u << log_entries);
    handle.cqes = reinterpret_cast<gdaki::prm::cqe64*>(ring.data());
    handle.dbrec = reinterpret_cast<gdaki::prm::cq_dbrec*>(dbrec.data());
    handle.log_cqe_cnt = log_entries;
    handle.cqn = 0x77;
    handle.ci = 0;
  }
  test_cq(const test_cq&) = delete;
  test_cq& operator=(const test_cq&) = delete;
  uint32_t entries() const { return 1u << handle.log_cqe_cnt; }
  // Starts the CQ as one that has consumed `ci` CQEs: the handle's counter and the doorbell
  // record's consumer index agree, as on a CQ that got there by polling.
  void start_at(uint64_t ci) {
    handle.ci = ci;
    handle.ci_published = ci;
    handle.dbrec->set_ci = gdaki::prm::to_be32(static_cast<uint32_t>(ci) & gdaki::prm::cq_ci_mask);
  }

  aligned_bytes ring;
  aligned_bytes dbrec;
  gdaki::dev::cq_handle handle{};
};

// An RC QP whose rings live in host memory. The SQ ring is filled with `sq_fill` so that
// tests can see which bytes a builder touched.
struct test_qp {
  static constexpr uint32_t qpn = 0xabc;

  test_qp(uint32_t log_sq_wqebbs, uint32_t log_cq_entries, uint8_t sq_fill = 0xcc, uint32_t log_rq_wqes = 2,
          uint32_t log_rq_stride = 6)
      : sq(size_t{64} << log_sq_wqebbs, sq_fill),
        rq(size_t{1} << (log_rq_wqes + log_rq_stride), 0xcc),
        dbrec(8),
        uar(64),
        send_cq(log_cq_entries),
        recv_cq(log_cq_entries) {
    auto& h = handle;
    h.sq_buf = sq.data();
    h.log_sq_wqebbs = log_sq_wqebbs;
    h.qpn = qpn;
    h.dbrec = reinterpret_cast<gdaki::prm::qp_dbrec*>(dbrec.data());
    h.uar_db = reinterpret_cast<uint64_t*>(uar.data());
    h.bf_reg = nullptr;
    h.bf_size = 0;
    h.db_mode = gdaki::dev::doorbell_mode::db_store;
    h.max_inline = 44;
    h.max_send_wqebbs = 16;
    h.rq_buf = rq.data();
    h.log_rq_wqes = log_rq_wqes;
    h.log_rq_stride = log_rq_stride;
    h.send_cq = &send_cq.handle;
    h.recv_cq = &recv_cq.handle;
    h.host_doorbell_hook = nullptr;
    h.host_poll_hook = nullptr;
    h.host_hook_ctx = nullptr;
    h.err_state = gdaki::dev::no_error_state;  // what the control path sets at creation
  }
  test_qp(const test_qp&) = delete;
  test_qp& operator=(const test_qp&) = delete;

  uint32_t sq_wqebbs() const { return 1u << handle.log_sq_wqebbs; }

  aligned_bytes sq;
  aligned_bytes rq;
  aligned_bytes dbrec;
  aligned_bytes uar;
  test_cq send_cq;
  test_cq recv_cq;
  gdaki::dev::qp_handle handle{};
};

// ---------------------------------------------------------------------------------------
// Hand-written byte helpers (spec conventions: BE = most significant byte first).
// ---------------------------------------------------------------------------------------

inline void put_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline uint32_t get_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline uint16_t get_be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

// Reads a 32-bit word the data path publishes with a release store (DBR words).
inline uint32_t acquire_word(const void* p) {
  return __atomic_load_n(static_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE);
}

// ---------------------------------------------------------------------------------------
// The test NIC's CQE writer, spec 5.1, 5.3 and 5.4.
// ---------------------------------------------------------------------------------------

struct nic_cqe {
  uint8_t opcode = 0;          // CQE opcode (0 REQ, 2 RESP_SEND, 13 REQ_ERR, ...)
  uint16_t wqe_counter = 0;    // REQ: first WQEBB of the WQE; RESP: RQ index
  uint8_t wqe_opcode = 0;      // REQ/REQ_ERR: opcode of the send WQE
  uint32_t qpn = test_qp::qpn;
  uint32_t byte_cnt = 0;       // REQ/RESP
  uint32_t src_qpn = 0;        // RESP
  uint8_t imm[4] = {0, 0, 0, 0};  // RESP with immediate: raw wire bytes
  bool se = false;
  uint8_t syndrome = 0;        // REQ_ERR/RESP_ERR
  uint8_t vendor_syndrome = 0;
};

// Writes the p-th CQE (p free-running from 0) of a CQ of 2^log_entries entries: bytes
// 0..59 first, then bytes 60..63 (wqe_counter BE16, signature, op_own with owner bit
// (p >> k) & 1) as one aligned 32-bit release store.
inline void nic_write_cqe(uint8_t* cq_ring, uint32_t log_entries, uint64_t p, const nic_cqe& f) {
  uint8_t* c = cq_ring + ((p & ((uint64_t{1} << log_entries) - 1)) * 64);
  uint8_t body[60] = {};
  const bool error = f.opcode == 13 || f.opcode == 14;
  if (error) {
    body[54] = f.vendor_syndrome;
    body[55] = f.syndrome;
    put_be32(body + 56, (uint32_t{f.wqe_opcode} << 24) | (f.qpn & 0xffffff));  // s_wqe_opcode_qpn
  } else {
    put_be32(body + 24, f.src_qpn & 0xffffff);  // flags_rqpn
    std::memcpy(body + 36, f.imm, 4);           // imm_inval_pkey, raw
    put_be32(body + 44, f.byte_cnt);
    put_be32(body + 56, (uint32_t{f.wqe_opcode} << 24) | (f.qpn & 0xffffff));  // sop_drop_qpn
  }
  std::memcpy(c, body, sizeof body);
  const uint8_t owner = static_cast<uint8_t>((p >> log_entries) & 1);
  const uint8_t tail_bytes[4] = {static_cast<uint8_t>(f.wqe_counter >> 8), static_cast<uint8_t>(f.wqe_counter), 0,
                                 static_cast<uint8_t>((f.opcode << 4) | (f.se ? 0x02 : 0) | owner)};
  uint32_t tail;
  std::memcpy(&tail, tail_bytes, 4);
  __atomic_store_n(reinterpret_cast<uint32_t*>(c + 60), tail, __ATOMIC_RELEASE);
}

// ---------------------------------------------------------------------------------------
// The test NIC's send-queue reader (spec 3.5): acquire the DBR snd word, walk every WQE it
// exposes WQEBB by WQEBB modulo the ring, and complete signalled ones with a REQ CQE.
// ---------------------------------------------------------------------------------------

struct nic_wqe_view {
  uint64_t first_wqebb;   // the NIC's own free-running position
  uint8_t opmod, opcode;
  uint16_t wqe_index;
  uint32_t qpn;
  uint32_t ds;
  uint8_t fm_ce_se;
  // 16-byte unit i of the WQE, fetched modulo the ring.
  std::vector<uint8_t> bytes;  // ds * 16 bytes, gathered across the ring end
};

struct test_nic {
  uint8_t* sq_ring;
  uint32_t sq_wqebbs;
  const void* dbr_snd;  // the QP DBR's snd word
  uint8_t* cq_ring;
  uint32_t log_cq;
  uint64_t sq_ci = 0;   // WQEBBs consumed
  uint64_t cq_pi = 0;   // CQEs produced
  std::string error;    // first protocol violation seen

  // New WQEBBs exposed by the DBR (spec 3.5). Sets error when more than a ring's worth.
  uint32_t pending() {
    const uint8_t* w = static_cast<const uint8_t*>(dbr_snd);
    const uint32_t word = acquire_word(w);
    uint8_t b[4];
    std::memcpy(b, &word, 4);
    if (b[0] != 0 || b[1] != 0) error = "DBR snd high 16 bits not zero";
    const uint16_t dbr16 = static_cast<uint16_t>((b[2] << 8) | b[3]);
    const uint32_t n = static_cast<uint16_t>(dbr16 - static_cast<uint16_t>(sq_ci));
    if (n > sq_wqebbs && error.empty()) error = "DBR exposes more than a ring of WQEBBs";
    return n;
  }

  // Reads the WQE at sq_ci (which must be exposed: `available` WQEBBs). Returns false and
  // sets error on a malformed WQE.
  bool read_wqe(uint32_t available, nic_wqe_view* v) {
    const uint8_t* ctrl = sq_ring + (sq_ci & (sq_wqebbs - 1)) * 64;
    v->first_wqebb = sq_ci;
    v->opmod = ctrl[0];
    v->wqe_index = get_be16(ctrl + 1);
    v->opcode = ctrl[3];
    v->qpn = get_be32(ctrl + 4) >> 8;
    v->ds = ctrl[7] & 0x3f;
    v->fm_ce_se = ctrl[11];
    if (v->ds == 0) return fail("DS 0");
    if ((v->ds + 3) / 4 > available) return fail("WQE longer than the exposed WQEBBs");
    if (v->wqe_index != static_cast<uint16_t>(sq_ci)) return fail("ctrl wqe_index != sq_ci & 0xffff");
    v->bytes.resize(v->ds * 16);
    for (uint32_t u = 0; u < v->ds; ++u) {
      const uint64_t unit = sq_ci * 4 + u;
      std::memcpy(&v->bytes[u * 16], sq_ring + (unit & (sq_wqebbs * 4 - 1)) * 16, 16);
    }
    return true;
  }

  // Completes the WQE just read: sq_ci moves past it, and a REQ CQE is written when its CE
  // bits ask for one (2 or 3).
  void complete(const nic_wqe_view& v) {
    sq_ci += (v.ds + 3) / 4;
    if (((v.fm_ce_se >> 2) & 3) >= 2) {
      nic_cqe c;
      c.opcode = 0;
      c.wqe_counter = v.wqe_index;
      c.wqe_opcode = v.opcode;
      c.qpn = v.qpn;
      nic_write_cqe(cq_ring, log_cq, cq_pi++, c);
    }
  }

  bool fail(const char* why) {
    if (error.empty()) error = why;
    return false;
  }

  // Runs every exposed WQE; returns how many were executed.
  uint32_t run() {
    uint32_t n = pending(), done = 0;
    while (n > 0 && error.empty()) {
      nic_wqe_view v;
      if (!read_wqe(n, &v)) break;
      const uint32_t nbb = (v.ds + 3) / 4;
      complete(v);
      n -= nbb;
      ++done;
    }
    return done;
  }
};

inline test_nic make_nic(test_qp& qp) {
  return test_nic{qp.sq.data(), qp.sq_wqebbs(), &qp.dbrec.data()[4], qp.send_cq.ring.data(),
                  qp.send_cq.handle.log_cqe_cnt, 0, 0, {}};
}

}  // namespace gdaki_test
