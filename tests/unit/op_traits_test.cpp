// The operation-traits table (prm/op_traits.hpp) is the one opcode list: every layer that
// reads opcodes must agree with it, for every byte an opcode field can hold.
//  - the decoder names each opcode by the table's name and prints a raddr segment exactly
//    for the opcodes the table says carry one;
//  - each builder of device/wqe.hpp writes the segments its opcode's entry promises (a
//    raddr unit, an inline or pointer data unit), and the soft NIC's parser accepts it;
//  - the parser refuses every opcode the table calls unsupported, whatever its segments;
//  - the soft wire carries exactly the opcodes the table calls remote, with payload
//    exactly where the table says the request carries one.
// Before the table each layer kept its own list (decode.cpp, wqe_parse.cpp, the responder,
// wire_frame.cpp, verbs_post.cpp); this test is what keeps a new opcode from reaching only
// some of them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/decode.hpp"
#include "gdaki/prm/op_traits.hpp"
#include "providers/soft/engine/wqe_parse.hpp"
#include "providers/soft/wire/wire_frame.hpp"
#include "unit/unit_support.hpp"

namespace {

using gdaki::dev::sge;
using gdaki::prm::op_kind;
using gdaki::prm::send_opcode;
using gdaki::prm::syndrome;
using gdaki::prm::traits_of;

// Every byte value an opcode field can hold.
template <class F>
void for_each_opcode_byte(F f) {
  for (unsigned b = 0; b < 256; ++b) f(static_cast<uint8_t>(b));
}

// Parses the WQE at WQEBB 0 of qp's ring the way the soft NIC's executor does.
syndrome parse_first(const gdaki_test::test_qp& qp, gdaki::soft::parsed_wqe* w) {
  const gdaki::soft::wqe_reader r(qp.sq.data(), qp.handle.log_sq_wqebbs, 0);
  gdaki::soft::parse_ctrl(r, w);
  return gdaki::soft::parse_segments(r, qp.handle.max_inline, w);
}

TEST(op_traits, decoder_names_every_opcode_byte_from_the_table) {
  for_each_opcode_byte([](uint8_t b) {
    SCOPED_TRACE(int{b});
    EXPECT_STREQ(gdaki::prm::to_string(static_cast<send_opcode>(b)), traits_of(b).name);
  });
}

TEST(op_traits, table_entries_are_consistent) {
  for_each_opcode_byte([](uint8_t b) {
    SCOPED_TRACE(int{b});
    const auto t = traits_of(b);
    // Operations that reach a remote address name it; those that do not, do not.
    const bool addressed = t.kind == op_kind::write || t.kind == op_kind::read || t.is_atomic();
    EXPECT_EQ(t.has_raddr, addressed);
    // A request carries payload or asks for some back, never both; only remote ops do either.
    EXPECT_FALSE(t.request_payload && t.response_payload);
    if (!t.remote()) {
      EXPECT_FALSE(t.request_payload || t.response_payload || t.consumes_recv || t.has_imm);
    }
    // Inline data is request payload; immediates are only delivered through a receive.
    if (t.inline_allowed) {
      EXPECT_TRUE(t.request_payload);
    }
    if (t.has_imm) {
      EXPECT_TRUE(t.consumes_recv);
    }
    // Every remote op except SEND needs a right granted by the responder.
    if (t.remote()) {
      EXPECT_EQ(t.right == gdaki::prm::remote_right::none, t.kind == op_kind::send);
    }
  });
}

TEST(op_traits, soft_parser_refuses_every_unsupported_opcode) {
  for_each_opcode_byte([](uint8_t b) {
    SCOPED_TRACE(int{b});
    if (traits_of(b).kind != op_kind::unsupported) return;
    // A well-formed WRITE body under the unsupported opcode byte: only the opcode is wrong.
    gdaki_test::test_qp qp{3, 3};
    uint64_t src = 7;
    const sge s{reinterpret_cast<uint64_t>(&src), 8, 0x10};
    gdaki::dev::prepare_write(qp.handle, 0, 0x1000, 0x20, &s, 1, 0);
    qp.sq.data()[3] = b;  // ctrl byte 3: the opcode
    gdaki::soft::parsed_wqe w;
    EXPECT_EQ(parse_first(qp, &w), syndrome::local_qp_op);
  });
}

// One WQE per builder, with what the table must say about the opcode the builder writes.
struct built {
  const char* builder;
  send_opcode op;
  bool inline_data;  // the builder wrote its payload inline
};

void PrintTo(const built& b, std::ostream* os) { *os << b.builder; }

class op_traits_builders : public ::testing::TestWithParam<built> {};

TEST_P(op_traits_builders, builder_layout_matches_the_table_and_the_parser_accepts_it) {
  const built c = GetParam();
  gdaki_test::test_qp qp{3, 3};
  uint64_t local = 0x1122334455667788ull;
  const sge s{reinterpret_cast<uint64_t>(&local), 8, 0x10};
  const uint64_t raddr = 0x2000;
  const uint32_t rkey = 0x30;
  auto& h = qp.handle;
  switch (c.op) {
    case send_opcode::nop: gdaki::dev::prepare_nop(h, 0, 0); break;
    case send_opcode::rdma_write:
      if (c.inline_data) {
        gdaki::dev::prepare_write_inline(h, 0, raddr, rkey, &local, 8, 0);
      } else {
        gdaki::dev::prepare_write(h, 0, raddr, rkey, &s, 1, 0);
      }
      break;
    case send_opcode::rdma_write_imm: gdaki::dev::prepare_write_imm(h, 0, raddr, rkey, &s, 1, 0x5, 0); break;
    case send_opcode::send:
      if (c.inline_data) {
        gdaki::dev::prepare_send_inline(h, 0, &local, 8, 0);
      } else {
        gdaki::dev::prepare_send(h, 0, &s, 1, 0);
      }
      break;
    case send_opcode::send_imm: gdaki::dev::prepare_send_imm(h, 0, &s, 1, 0x5, 0); break;
    case send_opcode::rdma_read: gdaki::dev::prepare_read(h, 0, raddr, rkey, &s, 1, 0); break;
    case send_opcode::atomic_fa: gdaki::dev::prepare_atomic_fa(h, 0, raddr, rkey, 1, s, 0); break;
    case send_opcode::atomic_cs: gdaki::dev::prepare_atomic_cs(h, 0, raddr, rkey, 1, 2, s, 0); break;
    case send_opcode::atomic_masked_cs:
      gdaki::dev::prepare_masked_cs(h, 0, raddr, rkey, 8, 1, ~0ull, 2, ~0ull, s, 0);
      break;
    case send_opcode::atomic_masked_fa: gdaki::dev::prepare_masked_fa(h, 0, raddr, rkey, 8, 1, 0, s, 0); break;
    default: FAIL() << "no builder case for " << c.builder;
  }
  const auto t = traits_of(c.op);
  EXPECT_EQ(qp.sq.data()[3], static_cast<uint8_t>(c.op)) << c.builder << " wrote another opcode";
  const std::string text = gdaki::prm::decode_wqe(qp.sq.data(), 8, 0);
  EXPECT_EQ(text.find("raddr:") != std::string::npos, t.has_raddr) << text;
  if (c.inline_data) {
    EXPECT_TRUE(t.inline_allowed) << c.builder << " wrote inline data the table forbids";
  }
  EXPECT_EQ(text.find("inline:") != std::string::npos, c.inline_data) << text;

  gdaki::soft::parsed_wqe w;
  ASSERT_EQ(parse_first(qp, &w), syndrome::none) << text;
  EXPECT_EQ(w.atomic_size != 0, t.is_atomic());
  EXPECT_EQ(w.inline_bytes != 0, c.inline_data);
  // The wire frames the op as a request exactly when the table calls it remote.
  namespace wire = gdaki::soft::wire;
  EXPECT_EQ(wire::known_op(static_cast<uint8_t>(c.op)), t.remote());
  EXPECT_EQ(wire::carries_payload(static_cast<uint8_t>(c.op)), t.request_payload);
  EXPECT_EQ(wire::is_atomic(static_cast<uint8_t>(c.op)), t.is_atomic());
}

INSTANTIATE_TEST_SUITE_P(
    every_builder, op_traits_builders,
    ::testing::Values(built{"prepare_nop", send_opcode::nop, false},
                      built{"prepare_write", send_opcode::rdma_write, false},
                      built{"prepare_write_inline", send_opcode::rdma_write, true},
                      built{"prepare_write_imm", send_opcode::rdma_write_imm, false},
                      built{"prepare_send", send_opcode::send, false},
                      built{"prepare_send_inline", send_opcode::send, true},
                      built{"prepare_send_imm", send_opcode::send_imm, false},
                      built{"prepare_read", send_opcode::rdma_read, false},
                      built{"prepare_atomic_fa", send_opcode::atomic_fa, false},
                      built{"prepare_atomic_cs", send_opcode::atomic_cs, false},
                      built{"prepare_masked_cs", send_opcode::atomic_masked_cs, false},
                      built{"prepare_masked_fa", send_opcode::atomic_masked_fa, false}),
    [](const ::testing::TestParamInfo<built>& i) { return std::string(i.param.builder); });

TEST(op_traits, every_supported_opcode_has_a_builder_case) {
  // The parameter list above covers each executable opcode; a new table entry without a
  // builder (or without a case here) fails this test.
  const send_opcode covered[] = {send_opcode::nop,         send_opcode::rdma_write,      send_opcode::rdma_write_imm,
                                 send_opcode::send,        send_opcode::send_imm,        send_opcode::rdma_read,
                                 send_opcode::atomic_fa,   send_opcode::atomic_cs,       send_opcode::atomic_masked_cs,
                                 send_opcode::atomic_masked_fa};
  for_each_opcode_byte([&](uint8_t b) {
    if (traits_of(b).kind == op_kind::unsupported) return;
    bool found = false;
    for (send_opcode o : covered) found |= static_cast<uint8_t>(o) == b;
    EXPECT_TRUE(found) << "opcode 0x" << std::hex << int{b} << " (" << traits_of(b).name << ") has no builder case";
  });
}

}  // namespace
