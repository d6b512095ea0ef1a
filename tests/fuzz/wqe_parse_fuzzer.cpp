// libFuzzer harness: random send-queue contents through the soft NIC's WQE parser.
//
// The input is an SQ ring plus the state around it (wqe_fuzz_input.hpp). The harness
// walks the ring the way the executor (src/providers/soft/engine/executor.cpp,
// progress_qp) does: doorbell record vs. consumer counter, parse_ctrl, the "record covers
// more than the ring / part of a WQE" producer-bug check, the wqe_index check,
// parse_segments, then the flush of the rest after the first error. Every WQE that parses
// is checked against the parser's own promises and then placed for real against a fake MR
// table (requester lkeys, responder rkeys with access rights and bounds, atomic
// alignment), through the soft NIC's placement code (copy_message, copy_scatter,
// execute_atomic), so any length or offset the parser lets through is exercised on
// ASan-guarded buffers. It must never crash, read outside the ring or loop.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "providers/soft/engine/placement.hpp"
#include "providers/soft/engine/wqe_parse.hpp"
#include "wqe_fuzz_input.hpp"

namespace {

using gdaki::prm::send_opcode;
using gdaki::prm::syndrome;
using gdaki::soft::gather_entry;
using gdaki::soft::parsed_wqe;
using gdaki::soft::wqe_reader;
using namespace gdaki_fuzz;

// A broken promise of the parser: report and abort, so libFuzzer keeps the input.
#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "wqe_parse_fuzzer: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

// The fake regions' backing memory: exactly `length` bytes each, heap-allocated per input
// so ASan flags a single byte of overrun.
struct backing {
  std::vector<uint8_t*> mem;
  backing() {
    for (const fake_region& f : fake_regions) {
      auto* p = static_cast<uint8_t*>(std::malloc(f.length));
      std::memset(p, 0x5a, f.length);
      mem.push_back(p);
    }
  }
  ~backing() {
    for (uint8_t* p : mem) std::free(p);
  }
  backing(const backing&) = delete;
  backing& operator=(const backing&) = delete;

  // The real address of [va, va + len) in the region `key` names (lkey, or rkey when
  // remote), if the key exists, grants `need` and covers the range; else nullptr. The
  // bounds test is written overflow-free, as the soft NIC's is.
  uint8_t* map(uint32_t key, bool remote, uint64_t va, uint64_t len, uint32_t need) const {
    for (uint32_t i = 0; i < fake_region_count; ++i) {
      const fake_region& f = fake_regions[i];
      const uint32_t k = remote ? (f.lkey | fake_rkey_bit) : f.lkey;
      if (k != key) continue;
      if ((f.access & need) != need) return nullptr;
      if (va < f.va || len > f.length || va - f.va > f.length - len) return nullptr;
      return mem[i] + (va - f.va);
    }
    return nullptr;
  }
};

// What the parser promises for a WQE it accepted (wqe_parse.hpp).
void check_parsed(const parsed_wqe& w, uint32_t max_inline) {
  FUZZ_CHECK(w.ds >= 1 && w.ds <= gdaki::prm::max_ds);
  FUZZ_CHECK(w.nbb == gdaki::prm::wqebbs_for_ds(w.ds) && w.nbb <= gdaki::prm::max_wqebbs_per_wqe);
  FUZZ_CHECK(w.num_sg <= gdaki::soft::max_gather && w.num_sg < w.ds + 1);
  FUZZ_CHECK(w.inline_bytes <= max_inline);
  uint64_t sum = 0, inl = 0;
  for (uint32_t i = 0; i < w.num_sg; ++i) {
    const gather_entry& g = w.sg[i];
    sum += g.length;
    if (g.is_inline) {
      inl += g.length;
      // The payload lies inside this WQE's own DS units (it is read modulo the ring).
      FUZZ_CHECK(uint64_t{g.inline_off} + g.length <= uint64_t{w.ds} * 16);
    }
  }
  FUZZ_CHECK(inl == w.inline_bytes);
  if (w.atomic_size == 0) {
    FUZZ_CHECK(sum == w.length);
  } else {
    FUZZ_CHECK(w.atomic_size == 4 || w.atomic_size == 8);
    FUZZ_CHECK(w.num_sg == 1 && !w.sg[0].is_inline && w.sg[0].length == w.atomic_size && w.length == w.atomic_size);
  }
}

// Requester checks, responder checks and placement for one parsed WQE, as the soft NIC
// does them, against the fake regions. Failed checks place nothing.
void place(const wqe_reader& r, const parsed_wqe& w, const backing& b) {
  const auto op = static_cast<send_opcode>(w.opcode);
  if (op == send_opcode::nop) return;
  const bool read_or_atomic = op == send_opcode::rdma_read || w.atomic_size != 0;
  gather_entry local[gdaki::soft::max_gather];
  for (uint32_t i = 0; i < w.num_sg; ++i) {
    local[i] = w.sg[i];
    if (local[i].is_inline || local[i].length == 0) continue;
    uint8_t* p = b.map(local[i].lkey, false, local[i].addr, local[i].length,
                       read_or_atomic ? fake_local_write : 0);
    if (p == nullptr) return;  // LOCAL_PROT_ERR
    local[i].addr = reinterpret_cast<uint64_t>(p);
  }
  switch (op) {
    case send_opcode::rdma_write:
    case send_opcode::rdma_write_imm: {
      if (w.length == 0) return;  // a zero-length WRITE does not check its rkey
      uint8_t* dst = b.map(w.rkey, true, w.raddr, w.length, fake_remote_write);
      if (dst == nullptr) return;
      const gdaki::soft::dst_piece d{dst, w.length};
      gdaki::soft::copy_message(r, local, w.num_sg, &d, 1);
      return;
    }
    case send_opcode::send:
    case send_opcode::send_imm: {
      // A receive list of two pieces, so the copy crosses a destination boundary.
      static uint8_t recv_a[100], recv_b[3000];
      if (w.length > sizeof(recv_a) + sizeof(recv_b)) return;  // LOCAL_LENGTH at the responder
      const gdaki::soft::dst_piece d[2] = {{recv_a, sizeof(recv_a)}, {recv_b, sizeof(recv_b)}};
      gdaki::soft::copy_message(r, local, w.num_sg, d, 2);
      return;
    }
    case send_opcode::rdma_read: {
      const uint8_t* src = b.map(w.rkey, true, w.raddr, w.length, fake_remote_read);
      if (src == nullptr) return;
      gdaki::soft::dst_piece d[gdaki::soft::max_gather];
      for (uint32_t i = 0; i < w.num_sg; ++i) {
        FUZZ_CHECK(!local[i].is_inline);  // the parser refuses inline in a READ
        d[i] = {reinterpret_cast<uint8_t*>(local[i].addr), local[i].length};
      }
      gdaki::soft::copy_scatter(src, w.length, d, w.num_sg);
      return;
    }
    default: {  // the four atomics
      FUZZ_CHECK(w.atomic_size != 0);
      if (w.raddr % w.atomic_size != 0) return;  // REMOTE_INVAL_REQ
      uint8_t* target = b.map(w.rkey, true, w.raddr, w.atomic_size, fake_remote_atomic);
      if (target == nullptr) return;
      const uint64_t old = gdaki::soft::execute_atomic(w, target);
      std::memcpy(reinterpret_cast<void*>(local[0].addr), &old, w.atomic_size);
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wqe_input_header h{};
  std::memcpy(&h, data, size < sizeof(h) ? size : sizeof(h));
  const uint32_t log_wqebbs = h.log_wqebbs % 7;
  const uint32_t wqebbs = 1u << log_wqebbs;
  const size_t ring_bytes = size_t{wqebbs} * 64;
  // Exactly the ring, on the heap: a read past its end is an ASan report.
  std::vector<uint8_t> ring(ring_bytes, 0);
  if (size > sizeof(h)) std::memcpy(ring.data(), data + sizeof(h), size - sizeof(h) < ring_bytes ? size - sizeof(h) : ring_bytes);
  const uint32_t dbr = h.dbr_lo | (uint32_t{h.dbr_hi} << 8);
  // The executor's counter is 64-bit and free-running; start a few laps in.
  uint64_t sq_ci = (uint64_t{3} << 16) | h.ci_lo | (uint32_t{h.ci_hi} << 8);
  const uint32_t max_inline = uint32_t{h.max_inline_div4} * 4;
  const backing b;

  bool err = false;
  // Each step consumes at least one WQEBB and the ring holds at most 64: a generous bound
  // that a looping parser would blow through.
  for (uint32_t steps = 0;; ++steps) {
    FUZZ_CHECK(steps <= 65536);
    const uint32_t n = (dbr - static_cast<uint32_t>(sq_ci)) & 0xffff;
    if (n == 0) break;
    if ((h.flags & wqe_flag_stamp_index) != 0) {
      // Byte 1..2 of the ctrl segment hold the big-endian wqe_index.
      uint8_t* ctrl = ring.data() + ((sq_ci & (wqebbs - 1)) << 6);
      ctrl[1] = static_cast<uint8_t>(sq_ci >> 8);
      ctrl[2] = static_cast<uint8_t>(sq_ci);
    }
    const wqe_reader r(ring.data(), log_wqebbs, sq_ci);
    parsed_wqe w;
    gdaki::soft::parse_ctrl(r, &w);
    FUZZ_CHECK(w.nbb >= 1 && w.nbb <= gdaki::prm::max_wqebbs_per_wqe);
    if (n > wqebbs || w.nbb > n) break;  // producer bug: LOCAL_QP_OP_ERR, the rest dropped
    if (err) {                           // flushed: only the ctrl segment is read
      sq_ci += w.nbb;
      continue;
    }
    syndrome s = syndrome::local_qp_op;
    // The executor's short parse (parse_one_segment_write) must agree with the general one
    // wherever it accepts a WQE: same syndrome (none) and the same fields.
    parsed_wqe quick;
    gdaki::soft::parse_ctrl(r, &quick);
    const bool quick_ok = gdaki::soft::parse_one_segment_write(r, max_inline, &quick);
    if (w.wqe_index == static_cast<uint16_t>(sq_ci)) s = gdaki::soft::parse_segments(r, max_inline, &w);
    if (quick_ok) {
      if (w.wqe_index == static_cast<uint16_t>(sq_ci)) FUZZ_CHECK(s == syndrome::none);
      if (s == syndrome::none) {
        FUZZ_CHECK(quick.num_sg == w.num_sg && quick.length == w.length && quick.inline_bytes == w.inline_bytes);
        FUZZ_CHECK(quick.raddr == w.raddr && quick.rkey == w.rkey && quick.atomic_size == w.atomic_size);
        for (uint32_t i = 0; i < w.num_sg; ++i) {
          FUZZ_CHECK(quick.sg[i].addr == w.sg[i].addr && quick.sg[i].length == w.sg[i].length);
          FUZZ_CHECK(quick.sg[i].lkey == w.sg[i].lkey && quick.sg[i].is_inline == w.sg[i].is_inline);
          FUZZ_CHECK(quick.sg[i].inline_off == w.sg[i].inline_off);
        }
      }
    }
    if (s == syndrome::none) {
      check_parsed(w, max_inline);
      place(r, w, b);
    } else {
      err = true;
    }
    sq_ci += w.nbb;
  }
  return 0;
}
