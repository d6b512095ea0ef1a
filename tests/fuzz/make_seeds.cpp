// Writes the seed corpora of the fuzzers (tests/fuzz/corpus/<fuzzer>/): valid inputs
// built with the data path's own WQE builders (gdaki/device/wqe.hpp), descriptor
// builders (gdaki/proxy/descriptor.hpp) and the wire's frame structs (wire_proto.hpp), so
// the fuzzers start from what real producers write. Run once by hand when a format
// changes; the output is committed:
//   clang++ -std=c++20 -Iinclude -Isrc -Itests/fuzz tests/fuzz/make_seeds.cpp -o /tmp/make_seeds
//   /tmp/make_seeds tests/fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gdaki/device/wqe.hpp"
#include "gdaki/proxy/descriptor.hpp"
#include "providers/soft/wire/wire_proto.hpp"
#include "wqe_fuzz_input.hpp"

namespace {

using namespace gdaki_fuzz;
namespace dev = gdaki::dev;
namespace prm = gdaki::prm;
namespace proxy = gdaki::proxy;

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

// One SQ ring being filled from counter `ci`, as a QP's producer would.
struct ring_seed {
  uint32_t log_wqebbs;
  uint16_t ci;
  uint32_t max_inline;
  std::vector<uint8_t> ring;
  dev::qp_handle qp{};
  uint64_t pc;
  ring_seed(uint32_t log, uint16_t start, uint32_t inl)
      : log_wqebbs(log), ci(start), max_inline(inl), ring(64u << log, 0), pc(start) {
    qp.sq_buf = ring.data();
    qp.log_sq_wqebbs = log;
    qp.qpn = 0x000123;
    qp.max_inline = inl;
  }
  std::vector<uint8_t> bytes() const {
    wqe_input_header h{};
    h.log_wqebbs = static_cast<uint8_t>(log_wqebbs);
    h.dbr_lo = static_cast<uint8_t>(pc);
    h.dbr_hi = static_cast<uint8_t>(pc >> 8);
    h.ci_lo = static_cast<uint8_t>(ci);
    h.ci_hi = static_cast<uint8_t>(ci >> 8);
    h.max_inline_div4 = static_cast<uint8_t>(max_inline / 4);
    std::vector<uint8_t> out(sizeof(h));
    std::memcpy(out.data(), &h, sizeof(h));
    out.insert(out.end(), ring.begin(), ring.end());
    return out;
  }
};

constexpr uint8_t sig = prm::ctrl_flags::cq_update;
const fake_region& local_r = fake_regions[0];
const fake_region& remote_r = fake_regions[1];
const fake_region& ro_r = fake_regions[2];
const fake_region& atom_r = fake_regions[3];
uint32_t rkey(const fake_region& f) { return f.lkey | fake_rkey_bit; }

// Appends one WQE of kind k (0..13) at the ring's producer counter.
void add_wqe(ring_seed& s, int k) {
  const dev::sge l8{local_r.va + 64, 8, local_r.lkey};
  const dev::sge l4{local_r.va + 72, 4, local_r.lkey};
  const dev::sge two[2] = {{local_r.va, 100, local_r.lkey}, {local_r.va + 512, 300, local_r.lkey}};
  const uint8_t payload[40] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  uint32_t n = 0;
  switch (k) {
    case 0: n = dev::prepare_nop(s.qp, s.pc, sig); break;
    case 1: n = dev::prepare_write(s.qp, s.pc, remote_r.va + 128, rkey(remote_r), two, 2, sig); break;
    case 2: n = dev::prepare_write_inline(s.qp, s.pc, remote_r.va + 8, rkey(remote_r), payload, 40, sig); break;
    case 3: n = dev::prepare_write_imm(s.qp, s.pc, remote_r.va, rkey(remote_r), two, 1, 0x11223344, sig); break;
    case 4: n = dev::prepare_write(s.qp, s.pc, remote_r.va, rkey(remote_r), nullptr, 0, sig); break;  // zero length
    case 5: n = dev::prepare_read(s.qp, s.pc, ro_r.va + 256, rkey(ro_r), two, 2, sig); break;
    case 6: n = dev::prepare_atomic_fa(s.qp, s.pc, atom_r.va + 8, rkey(atom_r), 5, l8, sig); break;
    case 7: n = dev::prepare_atomic_cs(s.qp, s.pc, atom_r.va + 16, rkey(atom_r), 0, 9, l8, sig); break;
    case 8: n = dev::prepare_masked_cs(s.qp, s.pc, atom_r.va + 32, rkey(atom_r), 8, 1, ~0ull, 2, ~0ull, l8, sig); break;
    case 9: n = dev::prepare_masked_cs(s.qp, s.pc, atom_r.va + 40, rkey(atom_r), 4, 1, 0xff, 2, 0xff, l4, sig); break;
    case 10: n = dev::prepare_masked_fa(s.qp, s.pc, atom_r.va + 48, rkey(atom_r), 8, 3, 0x80008000ull, l8, sig); break;
    case 11: n = dev::prepare_masked_fa(s.qp, s.pc, atom_r.va + 60, rkey(atom_r), 4, 3, 0x8080, l4, sig); break;
    case 12: n = dev::prepare_send(s.qp, s.pc, two, 2, sig); break;
    case 13: n = dev::prepare_send_inline(s.qp, s.pc, payload, 33, sig); break;
    // The shapes the executor's short parse takes (parse_one_segment_write): one pointer
    // segment, and inline payloads that fill one and two 16-byte units.
    case 14: n = dev::prepare_write(s.qp, s.pc, remote_r.va + 256, rkey(remote_r), &l8, 1, sig); break;
    case 15: n = dev::prepare_write_inline(s.qp, s.pc, remote_r.va + 16, rkey(remote_r), payload, 8, sig); break;
    default: n = dev::prepare_write_inline(s.qp, s.pc, remote_r.va + 24, rkey(remote_r), payload, 20, sig); break;
  }
  s.pc += n;
}
constexpr int wqe_kinds = 17;

void wqe_seeds(const std::string& dir) {
  const char* names[wqe_kinds] = {"nop",        "write_2sge",  "write_inline", "write_imm", "write_zero",
                                  "read_2sge",  "atomic_fa",   "atomic_cs",    "masked_cs64", "masked_cs32",
                                  "masked_fa64", "masked_fa32", "send_2sge",    "send_inline", "write_1sge",
                                  "write_inline8", "write_inline20"};
  for (int k = 0; k < wqe_kinds; ++k) {
    ring_seed s(3, 0x0102, 64);
    add_wqe(s, k);
    write_file(dir + "/" + names[k], s.bytes());
  }
  // Every kind back to back in a 64-WQEBB ring, starting 3 WQEBBs before both the ring end
  // and the 16-bit counter wrap, so WQEs straddle both.
  ring_seed all(6, 0xfffd, 64);
  for (int k = 0; k < wqe_kinds; ++k) add_wqe(all, k);
  write_file(dir + "/all_kinds_wrapping", all.bytes());
}

void descriptor_seeds(const std::string& dir) {
  const proxy::descriptor kinds[] = {
      proxy::make_put(0, 0x2000, 1, 0x1000, 2, 4096, 0),
      proxy::make_put_inline(1, 0x2008, 1, 0x0102030405060708ull, 0x1112131415161718ull, 13, 1),
      proxy::make_get(0, 0x1000, 2, 0x2000, 1, 64, 2, proxy::desc_flags::fence),
      proxy::make_signal(0, 0x3000, 3, false, 1, 3),
      proxy::make_signal(0, 0x3000, 3, true, 7, proxy::no_counter),
      proxy::make_put_signal(0, 0x2000, 1, 0x1000, 2, 256, 0x3000, 3, false, 1, 0),
      proxy::make_put_signal(0, 0x2000, 1, 0x1000, 2, 256, 0x3000, 3, true, 9, 1),
      proxy::make_fetch_add(2, 0x3008, 3, 1, 0x1040, 2, 2),
      proxy::make_compare_swap(2, 0x3010, 3, 0, 5, 0x1048, 2, 3),
      proxy::make_barrier(false, 0),
      proxy::make_barrier(true, 1),
  };
  // A script per descriptor kind: config byte, "sealed" + the body, a few steps and
  // "finish ok" commands (see proxy_descriptor_fuzzer.cpp for the command set).
  int i = 0;
  std::vector<uint8_t> mixed = {0x25};  // 4 slots, batch 2, 2 in flight
  for (const proxy::descriptor& d : kinds) {
    std::vector<uint8_t> one = {0x25, 0};
    const auto* b = reinterpret_cast<const uint8_t*>(&d);
    one.insert(one.end(), b, b + 64);
    one.insert(one.end(), {3, 4, 3});
    write_file(dir + "/" + proxy::to_string(d.op) + "_" + std::to_string(i++), one);
    mixed.push_back(static_cast<uint8_t>(i % 3 == 0 ? 1 + 7 * (3 * i) : 0));  // every third torn (cmd % 7 == 1)
    mixed.insert(mixed.end(), b, b + 64);
    mixed.insert(mixed.end(), {3, 4, 3});
  }
  write_file(dir + "/mixed_with_torn", mixed);
}

// ---- wire frames (wire_frame_fuzzer.cpp: byte 0, then the stream) ----------------------

namespace wire = gdaki::soft::wire;
using prm::send_opcode;

template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof(T));
}

wire::frame_hdr frame(wire::ftype t, uint32_t len, uint32_t seq, uint32_t src = 0x10, uint32_t dst = 0x20) {
  wire::frame_hdr h{};
  h.magic = wire::frame_magic;
  h.version = wire::frame_version;
  h.type = static_cast<uint8_t>(t);
  h.length = len;
  h.src_qpn = src;
  h.dst_qpn = dst;
  h.seq = seq;
  return h;
}

void hello_bind(std::vector<uint8_t>& out, uint32_t src = 0x10, uint32_t dst = 0x20) {
  put(out, frame(wire::ftype::hello, sizeof(wire::hello_body), 0, 0, 0));
  put(out, wire::hello_body{1234, 1, {}, 0});
  put(out, frame(wire::ftype::auth, sizeof(wire::auth_body), 0, 0, 0));
  put(out, wire::auth_body{});
  put(out, frame(wire::ftype::bind, sizeof(wire::bind_body), 1, src, dst));
  wire::bind_body b{};
  for (int i = 0; i < 16; ++i) b.token[i] = static_cast<uint8_t>(0xa0 + i);
  put(out, b);
}

// One request as endpoint::execute builds it: opcode, message length, atomic size, and
// with cma an iov list of `pieces` entries instead of the payload.
void request(std::vector<uint8_t>& out, send_opcode op, uint64_t len, uint32_t atomic_size, uint32_t seq, uint32_t pieces = 0) {
  const auto o = static_cast<uint8_t>(op);
  const bool payload = op == send_opcode::rdma_write || op == send_opcode::rdma_write_imm || op == send_opcode::send ||
                       op == send_opcode::send_imm;
  wire::request_body b{};
  b.raddr = 0x7f0000001000ull;
  b.rkey = 0x1234;
  b.imm_raw = 0x55667788;
  b.msg_len = atomic_size != 0 ? 0 : len;
  b.atomic_size = atomic_size;
  b.swap_add = 5;
  b.compare = 7;
  b.swap_mask = ~0ull;
  b.compare_mask = ~0ull;
  b.n_iov = pieces;
  uint32_t body = sizeof(b) + pieces * static_cast<uint32_t>(sizeof(wire::iov_entry));
  if (pieces == 0 && payload) body += static_cast<uint32_t>(len);
  wire::frame_hdr h = frame(wire::ftype::request, body, seq);
  h.opcode = o;
  h.fm_ce_se = prm::ctrl_flags::cq_update;
  if (pieces != 0) h.flags = wire::fflag::cma;
  put(out, h);
  put(out, b);
  uint64_t left = len;
  for (uint32_t i = 0; i < pieces; ++i) {
    const uint64_t l = i + 1 == pieces ? left : len / pieces;
    put(out, wire::iov_entry{0x7f0000100000ull + i * 0x10000ull, l});
    left -= l;
  }
  if (pieces == 0 && payload) {
    for (uint64_t i = 0; i < len; ++i) out.push_back(static_cast<uint8_t>(i));
  }
}

void wire_seeds(const std::string& dir) {
  {
    std::vector<uint8_t> s = {0};
    put(s, frame(wire::ftype::hello, sizeof(wire::hello_body), 0, 0, 0));
    put(s, wire::hello_body{1234, 0, {}, 0});
    write_file(dir + "/hello", s);
  }
  {
    std::vector<uint8_t> s = {0};
    hello_bind(s);
    write_file(dir + "/hello_bind", s);
  }
  struct kind {
    const char* name;
    send_opcode op;
    uint64_t len;
    uint32_t atomic_size;
  };
  const kind kinds[] = {
      {"write", send_opcode::rdma_write, 100, 0},        {"write_imm", send_opcode::rdma_write_imm, 17, 0},
      {"write_zero", send_opcode::rdma_write, 0, 0},     {"send", send_opcode::send, 64, 0},
      {"send_imm", send_opcode::send_imm, 3, 0},         {"read", send_opcode::rdma_read, 4096, 0},
      {"atomic_cs", send_opcode::atomic_cs, 8, 8},       {"atomic_fa", send_opcode::atomic_fa, 8, 8},
      {"masked_cs32", send_opcode::atomic_masked_cs, 4, 4}, {"masked_fa64", send_opcode::atomic_masked_fa, 8, 8},
  };
  std::vector<uint8_t> all = {0};
  hello_bind(all);
  uint32_t seq = 2;
  for (const kind& k : kinds) {
    std::vector<uint8_t> s = {0};
    hello_bind(s);
    request(s, k.op, k.len, k.atomic_size, 2);
    write_file(dir + "/request_" + k.name, s);
    request(all, k.op, k.len, k.atomic_size, seq++);
  }
  write_file(dir + "/all_requests", all);
  // cma (same host, copies granted: byte 0 bit 0): WRITE and READ named by iov lists.
  for (const kind& k : {kinds[0], kinds[5]}) {
    std::vector<uint8_t> s = {1};
    hello_bind(s);
    request(s, k.op, 65536 + 12, 0, 2, 3);
    write_file(dir + "/cma_" + std::string(k.name) + "_iov3", s);
  }
  {
    // Two pairs on one connection, cma and plain requests interleaved.
    std::vector<uint8_t> s = {1};
    hello_bind(s);
    put(s, frame(wire::ftype::bind, sizeof(wire::bind_body), 2, 0x11, 0x21));
    put(s, wire::bind_body{});
    request(s, send_opcode::send, 30, 0, 3, 30);
    request(s, send_opcode::rdma_write, 10, 0, 4);
    request(s, send_opcode::atomic_fa, 8, 8, 5);
    write_file(dir + "/cma_two_pairs", s);
  }
  // Client side (byte 0 bit 1): hello_ok, then steps of {kind, n} + reply (+ body).
  {
    std::vector<uint8_t> s = {2};
    put(s, frame(wire::ftype::hello_ok, sizeof(wire::hello_ok_body), 0, 0, 0));
    put(s, wire::hello_ok_body{1, 0});
    auto step = [&](uint8_t k, uint32_t n, wire::frame_hdr r, uint32_t body) {
      s.push_back(k);
      put(s, n);
      put(s, r);
      for (uint32_t i = 0; i < body; ++i) s.push_back(static_cast<uint8_t>(i * 7));
    };
    uint32_t q = 1;
    step(4, 0, frame(wire::ftype::bind_ok, 0, q++), 0);                   // bind ok
    step(4, 0, frame(wire::ftype::bind_nak, 0, q++), 0);                  // bind nak
    step(0, 0, frame(wire::ftype::response, 0, q++), 0);                  // write done
    step(1, 300, frame(wire::ftype::response, 300, q++), 300);            // read data
    step(2, 0, frame(wire::ftype::response, 8, q++), 8);                  // atomic old value
    step(3, 4096, frame(wire::ftype::response, 0, q++), 0);               // cma read done
    wire::frame_hdr rnr = frame(wire::ftype::response, 0, q++);
    rnr.flags = wire::fflag::rnr;
    rnr.rnr_timer = 3;
    step(0, 0, rnr, 0);
    wire::frame_hdr drop = frame(wire::ftype::response, 0, q++);
    drop.flags = wire::fflag::drop;
    step(1, 64, drop, 0);
    wire::frame_hdr err = frame(wire::ftype::response, 0, q++);
    err.syndrome = static_cast<uint8_t>(prm::syndrome::remote_access);
    step(1, 64, err, 0);
    write_file(dir + "/client_responses", s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  wqe_seeds(root + "/wqe_parse");
  descriptor_seeds(root + "/proxy_descriptor");
  wire_seeds(root + "/wire_frame");
  return 0;
}
