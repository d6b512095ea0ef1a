// Every opcode the soft NIC executes, posted through ibv_post_send / ibv_post_recv on the
// soft device, moves the right bytes and completes with the right ibv_wc fields.
#include <endian.h>

#include "verbs_fixture.hpp"

namespace gdaki_verbs_test {
namespace {

using verbs_opcodes = verbs_pair;

void post_recv(ibv_qp* qp, uint64_t id, void* addr, uint32_t len, uint32_t lkey) {
  ibv_sge s{reinterpret_cast<uintptr_t>(addr), len, lkey};
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
}

TEST_F(verbs_opcodes, write_gathers_several_sges_and_unsignalled_wrs_complete_silently) {
  for (int i = 0; i < 96; ++i) buf_a_[i] = static_cast<uint8_t>(i + 1);
  ibv_sge s[3] = {{reinterpret_cast<uintptr_t>(buf_a_.data()), 32, mr_a_->lkey},
                  {reinterpret_cast<uintptr_t>(buf_a_.data() + 64), 32, mr_a_->lkey},
                  {reinterpret_cast<uintptr_t>(buf_a_.data() + 32), 32, mr_a_->lkey}};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = s;
  wr.num_sge = 3;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma = {reinterpret_cast<uintptr_t>(buf_b_.data()), mr_b_->rkey};
  ibv_send_wr second = wr;  // same again, signalled: the first one's completion is implied
  second.wr_id = 2;
  second.send_flags = IBV_SEND_SIGNALED;
  second.wr.rdma.remote_addr += 128;
  wr.next = &second;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
  const auto wc = poll(a_.scq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
  ibv_wc none;
  EXPECT_EQ(ibv_poll_cq(a_.scq, 1, &none), 0);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(buf_b_[i], i + 1);
    EXPECT_EQ(buf_b_[32 + i], 64 + i + 1);
    EXPECT_EQ(buf_b_[64 + i], 32 + i + 1);
    EXPECT_EQ(buf_b_[128 + i], i + 1);
  }
}

TEST_F(verbs_opcodes, inline_send_with_immediate_lands_in_the_receive_buffer) {
  post_recv(b_.qp, 77, buf_b_.data() + 1024, 256, mr_b_->lkey);
  const char msg[] = "inline payload, 40 bytes long.........";
  ibv_sge s{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0};  // inline: the lkey is not used
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.imm_data = htobe32(0xC0FFEE);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
  ASSERT_EQ(poll(a_.scq, 1).at(0).status, IBV_WC_SUCCESS);
  const auto rc = poll(b_.rcq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rc[0].byte_len, sizeof msg);
  EXPECT_TRUE(rc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(be32toh(rc[0].imm_data), 0xC0FFEEu);
  EXPECT_EQ(rc[0].src_qp, a_.qp->qp_num);
  EXPECT_EQ(std::memcmp(buf_b_.data() + 1024, msg, sizeof msg), 0);
}

TEST_F(verbs_opcodes, write_with_immediate_consumes_a_receive) {
  post_recv(b_.qp, 88, buf_b_.data() + 2048, 16, mr_b_->lkey);
  std::memset(buf_a_.data(), 0x42, 100);
  ibv_sge s;
  ibv_send_wr wr = write_wr(6, buf_a_.data(), 100, mr_a_->lkey, reinterpret_cast<uintptr_t>(buf_b_.data()),
                            mr_b_->rkey, &s);
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htobe32(1234);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
  ASSERT_EQ(poll(a_.scq, 1).at(0).status, IBV_WC_SUCCESS);
  const auto rc = poll(b_.rcq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 88u);
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(be32toh(rc[0].imm_data), 1234u);
  EXPECT_EQ(buf_b_[99], 0x42);
}

TEST_F(verbs_opcodes, read_and_both_atomics_return_the_remote_values) {
  for (int i = 0; i < 64; ++i) buf_b_[i] = static_cast<uint8_t>(200 - i);
  uint64_t word = 40;
  std::memcpy(buf_b_.data() + 512, &word, 8);
  const uint64_t raddr = reinterpret_cast<uintptr_t>(buf_b_.data());
  ibv_sge s[3];
  ibv_send_wr wr[3]{};
  s[0] = {reinterpret_cast<uintptr_t>(buf_a_.data()), 64, mr_a_->lkey};
  wr[0].wr_id = 10;
  wr[0].opcode = IBV_WR_RDMA_READ;
  wr[0].wr.rdma = {raddr, mr_b_->rkey};
  s[1] = {reinterpret_cast<uintptr_t>(buf_a_.data() + 512), 8, mr_a_->lkey};
  wr[1].wr_id = 11;
  wr[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr[1].wr.atomic.remote_addr = raddr + 512;
  wr[1].wr.atomic.rkey = mr_b_->rkey;
  wr[1].wr.atomic.compare_add = 2;
  s[2] = {reinterpret_cast<uintptr_t>(buf_a_.data() + 520), 8, mr_a_->lkey};
  wr[2].wr_id = 12;
  wr[2].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr[2].wr.atomic.remote_addr = raddr + 512;
  wr[2].wr.atomic.rkey = mr_b_->rkey;
  wr[2].wr.atomic.compare_add = 42;
  wr[2].wr.atomic.swap = 1000;
  for (int i = 0; i < 3; ++i) {
    wr[i].sg_list = &s[i];
    wr[i].num_sge = 1;
    wr[i].send_flags = IBV_SEND_SIGNALED;
    wr[i].next = i < 2 ? &wr[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, wr, &bad), 0);
  const auto wc = poll(a_.scq, 3);
  ASSERT_EQ(wc.size(), 3u);
  const ibv_wc_opcode want[3] = {IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(10 + i));
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[i].opcode, want[i]);
  }
  for (int i = 0; i < 64; ++i) EXPECT_EQ(buf_a_[i], 200 - i);
  uint64_t fetched, swapped_from, now;
  std::memcpy(&fetched, buf_a_.data() + 512, 8);
  std::memcpy(&swapped_from, buf_a_.data() + 520, 8);
  std::memcpy(&now, buf_b_.data() + 512, 8);
  EXPECT_EQ(fetched, 40u);
  EXPECT_EQ(swapped_from, 42u);
  EXPECT_EQ(now, 1000u);
}

}  // namespace
}  // namespace gdaki_verbs_test
