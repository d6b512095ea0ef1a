// A QP taken back to RESET and connected again through the plain ibverbs API, as a program
// that recovers a connection does: what its CQs report afterwards is what rdma-core's mlx5
// provider reports (the reset QP's unpolled completions are gone, the next ones are new).
#include "verbs_fixture.hpp"

namespace gdaki_verbs_test {
namespace {

class verbs_reset : public verbs_pair {};

// Before: the soft CQs kept the reset QP's completions and the interposer's re-exported
// CQ handle started at 0, so ibv_poll_cq handed out the completions of the WRs before the
// RESET again, with the wr_ids of the slots they named.
TEST_F(verbs_reset, after_reset_and_reconnect_only_new_work_requests_complete) {
  const uint64_t raddr = reinterpret_cast<uintptr_t>(buf_b_.data());
  ibv_sge s[3];
  ibv_send_wr wr[3];
  for (int i = 0; i < 3; ++i) {
    wr[i] = write_wr(1 + i, buf_a_.data(), 64, mr_a_->lkey, raddr, mr_b_->rkey, &s[i]);
    wr[i].next = i < 2 ? &wr[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, wr, &bad), 0);
  ibv_wc first{};
  int got = 0;
  for (long spins = 0; got == 0 && spins < 50'000'000; ++spins) got = ibv_poll_cq(a_.scq, 1, &first);
  ASSERT_EQ(got, 1);  // the other two stay unpolled
  EXPECT_EQ(first.wr_id, 1u);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(a_.qp, &a, IBV_QP_STATE), 0);
  connect(a_.qp, b_.qp);
  std::memset(buf_a_.data(), 0x3c, 64);
  ibv_send_wr again = write_wr(9, buf_a_.data(), 64, mr_a_->lkey, raddr, mr_b_->rkey, &s[0]);
  ASSERT_EQ(ibv_post_send(a_.qp, &again, &bad), 0);
  const std::vector<ibv_wc> after = poll(a_.scq, 1);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].wr_id, 9u);
  EXPECT_EQ(after[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(after[0].status);
  ibv_wc extra;
  EXPECT_EQ(ibv_poll_cq(a_.scq, 1, &extra), 0) << "nothing from before the RESET";
  for (int i = 0; i < 64; ++i) ASSERT_EQ(buf_b_[i], 0x3c) << "byte " << i;
}

}  // namespace
}  // namespace gdaki_verbs_test
