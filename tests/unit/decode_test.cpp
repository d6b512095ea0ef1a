// The WQE / CQE decoder (gdaki/prm/decode.hpp, src/core/decode.cpp): opcode, fields and
// syndrome names in its output, on hand-written spec bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "gdaki/prm/decode.hpp"
#include "unit/unit_support.hpp"

namespace {

using ::testing::HasSubstr;
using gdaki::prm::decode_cqe;
using gdaki::prm::decode_wqe;

// Spec 2.7 worked example.
const uint8_t kWorkedExample[48] = {
    0x00, 0x01, 0x05, 0x08, 0x00, 0x0a, 0xbc, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x00, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x10, 0x00, 0x55, 0x66, 0x77, 0x88, 0x00, 0x00, 0x7f, 0x00, 0xaa, 0xbb, 0xcc, 0x00,
};

std::string err_cqe_text(uint8_t opcode, uint8_t syndrome) {
  uint8_t cqe[64] = {};
  cqe[54] = 0x42;      // vendor syndrome
  cqe[55] = syndrome;
  gdaki_test::put_be32(cqe + 56, (0x10u << 24) | 0xabc);  // failing WQE: RDMA_READ on QP 0xabc
  cqe[60] = 0x01;
  cqe[61] = 0x05;      // wqe_counter 0x0105
  cqe[63] = static_cast<uint8_t>((opcode << 4) | 1);
  return decode_cqe(cqe);
}

TEST(decode, worked_example_wqe_names_opcode_and_every_field) {
  const std::string s = decode_wqe(kWorkedExample, sizeof kWorkedExample);
  EXPECT_THAT(s, HasSubstr("RDMA_WRITE (0x08)"));
  EXPECT_THAT(s, HasSubstr("wqe_index=0x0105"));
  EXPECT_THAT(s, HasSubstr("qpn=0xabc"));
  EXPECT_THAT(s, HasSubstr("ds=3"));
  EXPECT_THAT(s, HasSubstr("wqebbs=1"));
  EXPECT_THAT(s, HasSubstr("(signalled)"));
  EXPECT_THAT(s, HasSubstr("fence=none"));
  EXPECT_THAT(s, HasSubstr("addr=0x7f0012345600 rkey=0x11223344"));
  EXPECT_THAT(s, HasSubstr("byte_count=4096 lkey=0x55667788 addr=0x7f00aabbcc00"));
}

TEST(decode, inline_send_shows_length_and_payload) {
  const uint8_t wqe[32] = {0x00, 0x00, 0x00, 0x0a, 0x00, 0x0a, 0xbc, 0x02, 0x00, 0x00, 0x00, 0x80, 0x00,
                           0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x05, 'h',  'e',  'l',  'l',  'o'};
  const std::string s = decode_wqe(wqe, sizeof wqe);
  EXPECT_THAT(s, HasSubstr("SEND (0x0a)"));
  EXPECT_THAT(s, HasSubstr("fence=fence+small"));
  EXPECT_THAT(s, HasSubstr("(unsignalled)"));
  EXPECT_THAT(s, HasSubstr("inline: len=5 data=68656c6c6f"));
}

TEST(decode, wqe_in_ring_is_followed_across_the_ring_end) {
  gdaki_test::aligned_bytes ring(2 * 64, 0x00);
  // A 5-SGE write (DS 7) at WQEBB 1 of a 2-WQEBB ring: data segments 2..4 sit in slot 0.
  uint8_t* w = ring.data() + 64;
  const uint8_t ctrl[16] = {0x00, 0x00, 0x01, 0x08, 0x00, 0x0a, 0xbc, 0x07, 0, 0, 0, 0x08, 0, 0, 0, 0};
  std::memcpy(w, ctrl, 16);
  for (uint32_t i = 0; i < 5; ++i) {
    const uint32_t unit = 2 + i;  // unit index within the WQE
    uint8_t* u = ring.data() + ((4 + unit) % 8) * 16;
    gdaki_test::put_be32(u, 0x100 * (i + 1));
    gdaki_test::put_be32(u + 4, 0x1000 + i);
    gdaki_test::put_be32(u + 12, 0x100000 + i * 0x1000);
  }
  const std::string s = decode_wqe(ring.data(), 2, 1);
  EXPECT_THAT(s, HasSubstr("ds=7 wqebbs=2"));
  EXPECT_THAT(s, HasSubstr("byte_count=1280 lkey=0x1004 addr=0x104000")) << s;
  EXPECT_EQ(s.find("truncated"), std::string::npos) << s;
}

TEST(decode, atomics_show_operands_and_masked_opmod) {
  const uint8_t fa[64] = {
      0x00, 0x00, 0x00, 0x12, 0x00, 0x0a, 0xbc, 0x04, 0, 0, 0, 0x08, 0, 0, 0, 0,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42, 0, 0, 0, 0,
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0,
      0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x99, 0, 0, 0, 0, 0, 0, 0x50, 0x00,
  };
  std::string s = decode_wqe(fa, sizeof fa);
  EXPECT_THAT(s, HasSubstr("ATOMIC_FA (0x12)"));
  EXPECT_THAT(s, HasSubstr("swap_add=0x102030405060708 compare=0x0"));
  EXPECT_THAT(s, HasSubstr("byte_count=8 lkey=0x99 addr=0x5000"));

  const uint8_t mcs8[80] = {
      0x09, 0x00, 0x02, 0x14, 0x00, 0x0a, 0xbc, 0x05, 0, 0, 0, 0x08, 0, 0, 0, 0,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x08, 0x00, 0x00, 0x00, 0x45, 0, 0, 0, 0,
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
      0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0,
      0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x96, 0, 0, 0, 0, 0, 0, 0x71, 0x00,
  };
  s = decode_wqe(mcs8, sizeof mcs8);
  EXPECT_THAT(s, HasSubstr("ATOMIC_MASKED_CS (0x14) opmod=0x09"));
  EXPECT_THAT(s, HasSubstr("masked: 11121314 15161718 01020304 05060708"));
  EXPECT_THAT(s, HasSubstr("masked: 00000000 ffffffff f0f0f0f0 f0f0f0f0"));
  EXPECT_THAT(s, HasSubstr("byte_count=8 lkey=0x96 addr=0x7100"));
}

TEST(decode, truncated_wqe_says_so) {
  EXPECT_THAT(decode_wqe(kWorkedExample, 8), HasSubstr("truncated"));
  EXPECT_THAT(decode_wqe(kWorkedExample, 32), HasSubstr("truncated"));
}

TEST(decode, req_err_cqe_with_syndrome_0x13_is_remote_access_err) {
  const std::string s = err_cqe_text(13, 0x13);
  EXPECT_THAT(s, HasSubstr("CQE REQ_ERR (13)"));
  EXPECT_THAT(s, HasSubstr("wqe_counter=0x0105"));
  EXPECT_THAT(s, HasSubstr("syndrome=REMOTE_ACCESS_ERR (0x13)"));
  EXPECT_THAT(s, HasSubstr("vendor_syndrome=0x42"));
  EXPECT_THAT(s, HasSubstr("wqe_opcode=RDMA_READ (0x10)"));
  EXPECT_THAT(s, HasSubstr("qpn=0xabc"));
}

// Every syndrome of spec 5.3 decodes to its name; unknown values say so.
TEST(decode, every_spec_syndrome_has_its_name) {
  const struct {
    uint8_t value;
    const char* name;
  } rows[] = {
      {0x01, "LOCAL_LENGTH_ERR"},     {0x02, "LOCAL_QP_OP_ERR"},         {0x04, "LOCAL_PROT_ERR"},
      {0x05, "WR_FLUSH_ERR"},         {0x06, "MW_BIND_ERR"},             {0x10, "BAD_RESP_ERR"},
      {0x11, "LOCAL_ACCESS_ERR"},     {0x12, "REMOTE_INVAL_REQ_ERR"},    {0x13, "REMOTE_ACCESS_ERR"},
      {0x14, "REMOTE_OP_ERR"},        {0x15, "TRANSPORT_RETRY_EXC_ERR"}, {0x16, "RNR_RETRY_EXC_ERR"},
      {0x22, "REMOTE_ABORTED_ERR"},
  };
  for (const auto& r : rows) {
    EXPECT_THAT(err_cqe_text(14, r.value), HasSubstr(std::string("syndrome=") + r.name)) << int{r.value};
    EXPECT_STREQ(gdaki::prm::to_string(static_cast<gdaki::prm::syndrome>(r.value)), r.name);
  }
  EXPECT_THAT(err_cqe_text(14, 0x05), HasSubstr("CQE RESP_ERR (14)"));
  EXPECT_THAT(err_cqe_text(13, 0x77), HasSubstr("UNKNOWN_SYNDROME (0x77)"));
}

TEST(decode, req_and_resp_cqes_show_their_fields) {
  uint8_t cqe[64] = {};
  gdaki_test::put_be32(cqe + 24, 0x456789);  // src QPN
  cqe[36] = 0xca;
  cqe[37] = 0xfe;
  cqe[38] = 0xba;
  cqe[39] = 0xbe;
  gdaki_test::put_be32(cqe + 44, 4096);
  gdaki_test::put_be32(cqe + 56, 0xabc);
  cqe[60] = 0x12;
  cqe[61] = 0x34;
  cqe[63] = (3 << 4) | 0x02;  // RESP_SEND_IMM, SE, owner 0
  const std::string s = decode_cqe(cqe);
  EXPECT_THAT(s, HasSubstr("CQE RESP_SEND_IMM (3) owner=0 se=1"));
  EXPECT_THAT(s, HasSubstr("wqe_counter=0x1234"));
  EXPECT_THAT(s, HasSubstr("byte_cnt=4096"));
  EXPECT_THAT(s, HasSubstr("src_qpn=0x456789"));
  EXPECT_THAT(s, HasSubstr("imm=0xcafebabe"));

  uint8_t init[64] = {};
  init[63] = 0xf1;
  EXPECT_THAT(decode_cqe(init), HasSubstr("CQE INVALID (15) owner=1"));
}

TEST(decode, opcode_names_follow_the_spec_table) {
  using gdaki::prm::send_opcode;
  EXPECT_STREQ(gdaki::prm::to_string(send_opcode::nop), "NOP");
  EXPECT_STREQ(gdaki::prm::to_string(send_opcode::rdma_write_imm), "RDMA_WRITE_IMM");
  EXPECT_STREQ(gdaki::prm::to_string(send_opcode::send_imm), "SEND_IMM");
  EXPECT_STREQ(gdaki::prm::to_string(send_opcode::atomic_masked_fa), "ATOMIC_MASKED_FA");
  EXPECT_STREQ(gdaki::prm::to_string(static_cast<send_opcode>(0x25)), "UNKNOWN");
  using gdaki::prm::cqe_opcode;
  EXPECT_STREQ(gdaki::prm::to_string(cqe_opcode::resp_send_inv), "RESP_SEND_INV");
  EXPECT_STREQ(gdaki::prm::to_string(cqe_opcode::req_err), "REQ_ERR");
}

}  // namespace
