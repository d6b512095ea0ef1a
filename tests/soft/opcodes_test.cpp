// Each opcode's data effect and every field of the requester and responder CQEs, for two
// RC QPs connected in one process, posted through the real data path.
#include <numeric>
#include <vector>

#include "soft_fixture.hpp"

using namespace soft_test;
using prm::send_opcode;

namespace {

struct bufs {
  std::vector<uint8_t> src, dst;
  verbs::mr msrc, mdst;
  bufs(const verbs::pd& pd, size_t n) : src(n), dst(n) {
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
    msrc = verbs::mr(pd, src.data(), n, verbs::access::all);
    mdst = verbs::mr(pd, dst.data(), n, verbs::access::all);
  }
};

TEST(soft_opcodes, rdma_write_places_bytes_and_completes_with_a_full_req_cqe) {
  pair p({.user_index = 0x1234});
  bufs b(p.pd, 4096);
  const dev::sge s = sg(b.src.data(), 4096, b.msrc.lkey());
  const uint64_t start = p.a.h->sq_reserved;
  post_write(*p.a.h, addr(b.dst.data()), b.mdst.rkey(), &s, 1);
  const got g = wait_cqe(p.a, false);
  expect_req_cqe(g, *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), static_cast<uint16_t>(start), 4096, 0x1234);
  EXPECT_EQ(b.dst, b.src);
  EXPECT_TRUE(stays_empty(p.b, true)) << "RDMA WRITE makes no responder CQE";
}

TEST(soft_opcodes, rdma_write_inline_places_the_payload_from_the_wqe) {
  pair p;
  bufs b(p.pd, 64);
  const char msg[] = "hello, inline world: 40 bytes of payload";
  post_write_inline(*p.a.h, addr(b.dst.data() + 5), b.mdst.rkey(), msg, 40);
  const got g = wait_cqe(p.a, false);
  expect_req_cqe(g, *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), 0, 40);
  EXPECT_EQ(std::memcmp(b.dst.data() + 5, msg, 40), 0);
  EXPECT_TRUE(all_zero(b.dst.data(), 5));
  EXPECT_TRUE(all_zero(b.dst.data() + 45, 19));
}

TEST(soft_opcodes, rdma_write_gathers_several_segments_in_order) {
  pair p;
  bufs b(p.pd, 1024);
  const dev::sge s[3] = {sg(b.src.data() + 100, 10, b.msrc.lkey()), sg(b.src.data(), 300, b.msrc.lkey()),
                         sg(b.src.data() + 900, 7, b.msrc.lkey())};
  post_write(*p.a.h, addr(b.dst.data()), b.mdst.rkey(), s, 3);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), 0, 317);
  EXPECT_EQ(std::memcmp(b.dst.data(), b.src.data() + 100, 10), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 10, b.src.data(), 300), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 310, b.src.data() + 900, 7), 0);
  EXPECT_TRUE(all_zero(b.dst.data() + 317, 1024 - 317));
}

TEST(soft_opcodes, rdma_write_mixing_inline_and_pointer_segments_concatenates_them) {
  pair p;
  bufs b(p.pd, 256);
  const uint64_t s = acquire(*p.a.h, 2);
  dev::wqe_writer w(*p.a.h, s);
  w.raddr(addr(b.dst.data()), b.mdst.rkey());
  w.inline_data("HEADER", 6);
  w.data(sg(b.src.data(), 100, b.msrc.lkey()));
  const uint32_t nbb = w.finish(send_opcode::rdma_write, prm::ctrl_flags::cq_update);
  dev::sq_commit(*p.a.h, s, nbb);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), 0, 106);
  EXPECT_EQ(std::memcmp(b.dst.data(), "HEADER", 6), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 6, b.src.data(), 100), 0);
}

TEST(soft_opcodes, zero_length_write_completes_without_touching_memory) {
  pair p;
  bufs b(p.pd, 64);
  post_write(*p.a.h, addr(b.dst.data()), b.mdst.rkey(), nullptr, 0);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), 0, 0);
  EXPECT_TRUE(all_zero(b.dst.data(), 64));
}

TEST(soft_opcodes, write_imm_consumes_a_receive_and_the_responder_cqe_carries_the_immediate) {
  pair p({}, {.user_index = 77});
  bufs b(p.pd, 512);
  post_recv(*p.b.h, nullptr, 0);  // a zero-capacity receive WQE absorbs WRITE_IMM
  const dev::sge s = sg(b.src.data(), 512, b.msrc.lkey());
  const uint32_t imm = prm::to_be32(0xdeadbeef).raw;
  post_write_imm(*p.a.h, addr(b.dst.data()), b.mdst.rkey(), &s, 1, imm,
                 prm::ctrl_flags::cq_update | prm::ctrl_flags::solicited);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_write_imm, p.a.qp.qpn(), 0, 512);
  const got r = wait_cqe(p.b, true);
  expect_resp_cqe(r, *p.b.hr, prm::cqe_opcode::resp_wr_imm, p.b.qp.qpn(), p.a.qp.qpn(), 0, 512, imm, true, 77);
  EXPECT_EQ(r.c.imm_raw, imm);
  EXPECT_EQ(b.dst, b.src);
}

TEST(soft_opcodes, send_scatters_across_the_receive_list_and_reports_the_length) {
  pair p;
  bufs b(p.pd, 1024);
  const dev::sge r[3] = {sg(b.dst.data(), 100, b.mdst.lkey()), sg(b.dst.data() + 200, 100, b.mdst.lkey()),
                         sg(b.dst.data() + 500, 500, b.mdst.lkey())};
  post_recv(*p.b.h, r, 3);
  const dev::sge s[2] = {sg(b.src.data(), 150, b.msrc.lkey()), sg(b.src.data() + 400, 100, b.msrc.lkey())};
  post_send(*p.a.h, s, 2);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::send, p.a.qp.qpn(), 0, 250);
  expect_resp_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_send, p.b.qp.qpn(), p.a.qp.qpn(), 0, 250, 0,
                  false);
  std::vector<uint8_t> msg(b.src.begin(), b.src.begin() + 150);
  msg.insert(msg.end(), b.src.begin() + 400, b.src.begin() + 500);
  EXPECT_EQ(std::memcmp(b.dst.data(), msg.data(), 100), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 200, msg.data() + 100, 100), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 500, msg.data() + 200, 50), 0);
  EXPECT_TRUE(all_zero(b.dst.data() + 550, 450)) << "bytes past the message stay untouched";
  EXPECT_TRUE(all_zero(b.dst.data() + 100, 100));
}

TEST(soft_opcodes, send_imm_inline_delivers_payload_and_immediate_with_solicited_flag) {
  pair p;
  bufs b(p.pd, 64);
  const dev::sge r = sg(b.dst.data(), 64, b.mdst.lkey());
  post_recv(*p.b.h, &r, 1);
  post_recv(*p.b.h, &r, 1);
  // inline SEND first
  post_send(*p.a.h, nullptr, 0);  // zero-byte SEND: one data-less WQE
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::send, p.a.qp.qpn(), 0, 0);
  expect_resp_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_send, p.b.qp.qpn(), p.a.qp.qpn(), 0, 0, 0, false);
  const uint64_t s = acquire(*p.a.h, dev::wqebbs_send_inline(20));
  dev::wqe_writer w(*p.a.h, s);
  w.inline_data("twenty bytes exactly", 20);
  const uint32_t imm = prm::to_be32(42).raw;
  dev::sq_commit(*p.a.h, s,
                 w.finish(send_opcode::send_imm, prm::ctrl_flags::cq_update | prm::ctrl_flags::solicited, imm));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::send_imm, p.a.qp.qpn(), 1, 20);
  expect_resp_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_send_imm, p.b.qp.qpn(), p.a.qp.qpn(), 1, 20, imm,
                  true);
  EXPECT_EQ(std::memcmp(b.dst.data(), "twenty bytes exactly", 20), 0);
}

TEST(soft_opcodes, rdma_read_fetches_remote_bytes_into_the_local_scatter_list) {
  pair p;
  bufs b(p.pd, 2048);
  const dev::sge s[2] = {sg(b.dst.data(), 1000, b.mdst.lkey()), sg(b.dst.data() + 1500, 500, b.mdst.lkey())};
  post_read(*p.a.h, addr(b.src.data() + 48), b.msrc.rkey(), s, 2);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_read, p.a.qp.qpn(), 0, 1500);
  EXPECT_EQ(std::memcmp(b.dst.data(), b.src.data() + 48, 1000), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 1500, b.src.data() + 1048, 500), 0);
  EXPECT_TRUE(all_zero(b.dst.data() + 1000, 500));
  EXPECT_TRUE(stays_empty(p.b, true));
}

TEST(soft_opcodes, atomic_fetch_add_returns_the_old_value_and_adds) {
  pair p;
  alignas(8) uint64_t target[2] = {1000, 7};
  alignas(8) uint64_t result = 0;
  verbs::mr mt(p.pd, target, sizeof target, verbs::access::all);
  verbs::mr mres(p.pd, &result, 8, verbs::access::all);
  post_fa(*p.a.h, addr(&target[0]), mt.rkey(), 234, sg(&result, 8, mres.lkey()));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_fa, p.a.qp.qpn(), 0, 8);
  EXPECT_EQ(result, 1000u);
  EXPECT_EQ(target[0], 1234u);
  EXPECT_EQ(target[1], 7u);
}

TEST(soft_opcodes, atomic_compare_swap_swaps_only_when_the_word_matches) {
  pair p;
  alignas(8) uint64_t target = 5;
  alignas(8) uint64_t result[2] = {0, 0};
  verbs::mr mt(p.pd, &target, 8, verbs::access::all);
  verbs::mr mres(p.pd, result, 16, verbs::access::all);
  post_cs(*p.a.h, addr(&target), mt.rkey(), 4, 99, sg(&result[0], 8, mres.lkey()));  // mismatch
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_cs, p.a.qp.qpn(), 0, 8);
  EXPECT_EQ(result[0], 5u);
  EXPECT_EQ(target, 5u);
  post_cs(*p.a.h, addr(&target), mt.rkey(), 5, 99, sg(&result[1], 8, mres.lkey()));  // match
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_cs, p.a.qp.qpn(), 1, 8);
  EXPECT_EQ(result[1], 5u);
  EXPECT_EQ(target, 99u);
}

TEST(soft_opcodes, masked_compare_swap_of_8_and_4_bytes_follows_the_masks) {
  pair p;
  alignas(8) uint64_t t8 = 0x1122334455667788ull;
  alignas(8) uint32_t t4[2] = {0xaabbccdd, 0};
  alignas(8) uint64_t res[2] = {0, 0};
  verbs::mr m8(p.pd, &t8, 8, verbs::access::all);
  verbs::mr m4(p.pd, t4, 8, verbs::access::all);
  verbs::mr mr(p.pd, res, 16, verbs::access::all);
  // Compare only the low byte (0x88 matches), swap only the top byte.
  uint64_t s = acquire(*p.a.h, dev::wqebbs_masked_cs(8));
  dev::sq_commit(*p.a.h, s,
                 dev::prepare_masked_cs(*p.a.h, s, addr(&t8), m8.rkey(), 8, 0xffffffffffffff88ull, 0xff,
                                        0xee00000000000000ull, 0xff00000000000000ull, sg(&res[0], 8, mr.lkey()),
                                        prm::ctrl_flags::cq_update));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_masked_cs, p.a.qp.qpn(), 0, 8);
  EXPECT_EQ(res[0], 0x1122334455667788ull);
  EXPECT_EQ(t8, 0xee22334455667788ull);
  // 4 bytes: compare mask on the high half (0xaabb mismatches 0x1111): no swap.
  s = acquire(*p.a.h, dev::wqebbs_masked_cs(4));
  dev::sq_commit(*p.a.h, s,
                 dev::prepare_masked_cs(*p.a.h, s, addr(&t4[0]), m4.rkey(), 4, 0x11110000, 0xffff0000, 0x12345678,
                                        0xffffffff, sg(&res[1], 4, mr.lkey()), prm::ctrl_flags::cq_update));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_masked_cs, p.a.qp.qpn(), 2, 4);
  EXPECT_EQ(static_cast<uint32_t>(res[1]), 0xaabbccddu);
  EXPECT_EQ(t4[0], 0xaabbccddu);
}

TEST(soft_opcodes, masked_fetch_add_drops_carries_at_field_boundaries) {
  pair p;
  alignas(8) uint64_t t8 = 0x00000000ffffffffull;
  alignas(8) uint32_t t4[2] = {0x00ff00ff, 0};
  alignas(8) uint64_t res[2] = {0, 0};
  verbs::mr m8(p.pd, &t8, 8, verbs::access::all);
  verbs::mr m4(p.pd, t4, 8, verbs::access::all);
  verbs::mr mr(p.pd, res, 16, verbs::access::all);
  // Two 32-bit fields: adding 1 to each; the low field's carry is dropped.
  uint64_t s = acquire(*p.a.h, dev::wqebbs_masked_fa());
  dev::sq_commit(*p.a.h, s,
                 dev::prepare_masked_fa(*p.a.h, s, addr(&t8), m8.rkey(), 8, 0x0000000100000001ull,
                                        0x8000000080000000ull, sg(&res[0], 8, mr.lkey()), prm::ctrl_flags::cq_update));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_masked_fa, p.a.qp.qpn(), 0, 8);
  EXPECT_EQ(res[0], 0x00000000ffffffffull);
  EXPECT_EQ(t8, 0x0000000100000000ull);
  // Four 8-bit fields, 4-byte word; boundary 0 would be a plain add.
  s = acquire(*p.a.h, dev::wqebbs_masked_fa());
  dev::sq_commit(*p.a.h, s,
                 dev::prepare_masked_fa(*p.a.h, s, addr(&t4[0]), m4.rkey(), 4, 0x01010101, 0x80808080,
                                        sg(&res[1], 4, mr.lkey()), prm::ctrl_flags::cq_update));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_masked_fa, p.a.qp.qpn(), 1, 4);
  EXPECT_EQ(static_cast<uint32_t>(res[1]), 0x00ff00ffu);
  EXPECT_EQ(t4[0], 0x01000100u);
}

TEST(soft_opcodes, signaled_nop_completes_with_byte_count_zero) {
  pair p;
  post_nop(*p.a.h);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::nop, p.a.qp.qpn(), 0, 0);
}

TEST(soft_opcodes, unsignaled_wqes_execute_and_only_the_signaled_one_completes) {
  pair p;
  bufs b(p.pd, 64);
  for (uint32_t i = 0; i < 4; ++i) {
    post_write_inline(*p.a.h, addr(b.dst.data() + i * 8), b.mdst.rkey(), b.src.data() + i * 8, 8,
                      prm::ctrl_flags::ce_error_only);
  }
  const uint64_t ticket = post_write_inline(*p.a.h, addr(b.dst.data() + 32), b.mdst.rkey(), b.src.data() + 32, 8);
  const got g = wait_cqe(p.a, false);
  expect_req_cqe(g, *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), 4, 8);
  EXPECT_EQ(dev::sq_test(*p.a.h, ticket), gdaki::status::ok) << "one CQE retires every earlier WQE";
  EXPECT_EQ(std::memcmp(b.dst.data(), b.src.data(), 40), 0);
  EXPECT_TRUE(stays_empty(p.a, false));
}

TEST(soft_opcodes, wqes_straddling_the_ring_end_execute) {
  pair p({.sq_wqebbs = 8, .max_inline = 100});
  bufs b(p.pd, 256);
  // Six one-WQEBB NOPs bring pc to 6; a 100-byte inline WRITE (3 WQEBBs) then spans 6, 7, 0.
  for (int i = 0; i < 6; ++i) post_nop(*p.a.h, i == 5 ? prm::ctrl_flags::cq_update : 0);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::nop, p.a.qp.qpn(), 5, 0);
  ASSERT_EQ(dev::wqebbs_write_inline(100), 3u);
  post_write_inline(*p.a.h, addr(b.dst.data()), b.mdst.rkey(), b.src.data(), 100);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), 6, 100);
  EXPECT_EQ(std::memcmp(b.dst.data(), b.src.data(), 100), 0);
  // And a 4-SGE WRITE (2 WQEBBs) at pc 9 = slot 1; then many more laps.
  for (int lap = 0; lap < 20; ++lap) {
    const dev::sge s[4] = {sg(b.src.data(), 1, b.msrc.lkey()), sg(b.src.data() + 1, 2, b.msrc.lkey()),
                           sg(b.src.data() + 3, 3, b.msrc.lkey()), sg(b.src.data() + 6, 4, b.msrc.lkey())};
    post_write(*p.a.h, addr(b.dst.data() + 128), b.mdst.rkey(), s, 4);
    ASSERT_TRUE(wait_cqe(p.a, false).c.ok());
  }
  EXPECT_EQ(std::memcmp(b.dst.data() + 128, b.src.data(), 10), 0);
}

TEST(soft_opcodes, fenced_send_carries_the_bytes_an_earlier_read_fetched) {
  pair p;
  bufs b(p.pd, 256);
  const dev::sge rd = sg(b.dst.data(), 64, b.mdst.lkey());
  post_read(*p.a.h, addr(b.src.data()), b.msrc.rkey(), &rd, 1, 0);
  std::vector<uint8_t> landing(64);
  verbs::mr ml(p.pd, landing.data(), 64, verbs::access::all);
  const dev::sge r = sg(landing.data(), 64, ml.lkey());
  post_recv(*p.b.h, &r, 1);
  for (uint8_t fm : {prm::ctrl_flags::fence, prm::ctrl_flags::fence_ordering, prm::ctrl_flags::fence_strong_ordering,
                     prm::ctrl_flags::fence_initiator_small}) {
    const dev::sge s = sg(b.dst.data(), 64, b.mdst.lkey());
    if (fm != prm::ctrl_flags::fence) post_recv(*p.b.h, &r, 1);
    post_send(*p.a.h, &s, 1, static_cast<uint8_t>(prm::ctrl_flags::cq_update | fm));
    ASSERT_TRUE(wait_cqe(p.a, false).c.ok());
    ASSERT_TRUE(wait_cqe(p.b, true).c.ok());
    EXPECT_EQ(std::memcmp(landing.data(), b.src.data(), 64), 0) << "fence mode " << int(fm);
  }
}

TEST(soft_opcodes, responder_cqes_on_both_sides_when_each_qp_sends_to_the_other) {
  pair p;
  bufs b(p.pd, 64);
  const dev::sge ra = sg(b.dst.data(), 32, b.mdst.lkey()), rb = sg(b.dst.data() + 32, 32, b.mdst.lkey());
  post_recv(*p.a.h, &ra, 1);
  post_recv(*p.b.h, &rb, 1);
  const dev::sge sa = sg(b.src.data(), 32, b.msrc.lkey()), sb = sg(b.src.data() + 32, 32, b.msrc.lkey());
  post_send(*p.a.h, &sa, 1);
  post_send(*p.b.h, &sb, 1);
  expect_resp_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_send, p.b.qp.qpn(), p.a.qp.qpn(), 0, 32, 0, false);
  expect_resp_cqe(wait_cqe(p.a, true), *p.a.hr, prm::cqe_opcode::resp_send, p.a.qp.qpn(), p.b.qp.qpn(), 0, 32, 0, false);
  ASSERT_TRUE(wait_cqe(p.a, false).c.ok());
  ASSERT_TRUE(wait_cqe(p.b, false).c.ok());
  EXPECT_EQ(std::memcmp(b.dst.data(), b.src.data() + 32, 32), 0);
  EXPECT_EQ(std::memcmp(b.dst.data() + 32, b.src.data(), 32), 0);
}

}  // namespace
