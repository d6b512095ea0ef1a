// Error completions through the ibverbs API on the soft device: the statuses rdma-core's
// mlx5 provider reports for the soft NIC's syndromes, the QP's move to ERR, and one
// IBV_WC_WR_FLUSH_ERR per outstanding work request.
#include "verbs_fixture.hpp"

namespace gdaki_verbs_test {
namespace {

class verbs_errors : public verbs_pair {
 protected:
  // Posts `bad` then three good signalled WRITEs and two receives on A, and checks: the
  // bad one completes with `want`, the three WRITEs and the two receives with one
  // WR_FLUSH_ERR each, A is in ERR and B's buffer is untouched.
  void expect_error_then_flush(uint32_t lkey, uint32_t rkey, ibv_wc_status want) {
    std::memset(buf_a_.data(), 0x5a, 64);
    ibv_sge rs[2];
    ibv_recv_wr rw[2]{};
    for (int i = 0; i < 2; ++i) {
      rs[i] = {reinterpret_cast<uintptr_t>(buf_a_.data() + 4096), 64, mr_a_->lkey};
      rw[i].wr_id = 100 + i;
      rw[i].sg_list = &rs[i];
      rw[i].num_sge = 1;
      rw[i].next = i == 0 ? &rw[1] : nullptr;
    }
    ibv_recv_wr* bad_recv = nullptr;
    ASSERT_EQ(ibv_post_recv(a_.qp, rw, &bad_recv), 0);

    ibv_sge s[4];
    ibv_send_wr wr[4];
    const uint64_t raddr = reinterpret_cast<uintptr_t>(buf_b_.data());
    wr[0] = write_wr(1, buf_a_.data(), 64, lkey, raddr, rkey, &s[0]);
    for (int i = 1; i < 4; ++i) wr[i] = write_wr(1 + i, buf_a_.data(), 64, mr_a_->lkey, raddr, mr_b_->rkey, &s[i]);
    for (int i = 0; i < 3; ++i) wr[i].next = &wr[i + 1];
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_.qp, wr, &bad), 0);

    const std::vector<ibv_wc> sent = poll(a_.scq, 4);
    ASSERT_EQ(sent.size(), 4u);
    EXPECT_EQ(sent[0].wr_id, 1u);
    EXPECT_EQ(sent[0].status, want) << ibv_wc_status_str(sent[0].status);
    for (int i = 1; i < 4; ++i) {
      EXPECT_EQ(sent[i].wr_id, static_cast<uint64_t>(1 + i));
      EXPECT_EQ(sent[i].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(sent[i].status);
    }
    const std::vector<ibv_wc> recvd = poll(a_.rcq, 2);
    ASSERT_EQ(recvd.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(recvd[i].wr_id, static_cast<uint64_t>(100 + i));
      EXPECT_EQ(recvd[i].status, IBV_WC_WR_FLUSH_ERR);
    }
    ibv_wc extra;
    EXPECT_EQ(ibv_poll_cq(a_.scq, 1, &extra), 0) << "one completion per WR, no more";

    ibv_qp_attr attr;
    ibv_qp_init_attr init;
    ASSERT_EQ(ibv_query_qp(a_.qp, &attr, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(buf_b_[i], 0) << "a failed access wrote nothing at byte " << i;
  }
};

TEST_F(verbs_errors, bad_rkey_completes_with_rem_access_err_then_every_wr_flushes) {
  expect_error_then_flush(mr_a_->lkey, mr_b_->rkey ^ 0x5500, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(verbs_errors, bad_lkey_completes_with_loc_prot_err_then_every_wr_flushes) {
  expect_error_then_flush(mr_a_->lkey ^ 0x5500, mr_b_->rkey, IBV_WC_LOC_PROT_ERR);
}

TEST_F(verbs_errors, a_wr_posted_after_the_error_is_flushed_too) {
  ibv_sge s;
  ibv_send_wr wr = write_wr(7, buf_a_.data(), 8, mr_a_->lkey, reinterpret_cast<uintptr_t>(buf_b_.data()),
                            mr_b_->rkey ^ 0x5500, &s);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
  ASSERT_EQ(poll(a_.scq, 1).at(0).status, IBV_WC_REM_ACCESS_ERR);
  wr = write_wr(8, buf_a_.data(), 8, mr_a_->lkey, reinterpret_cast<uintptr_t>(buf_b_.data()), mr_b_->rkey, &s,
                /*signaled=*/false);
  ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
  const std::vector<ibv_wc> wc = poll(a_.scq, 1);
  ASSERT_EQ(wc.size(), 1u) << "an unsignalled WR is flushed with a completion as well";
  EXPECT_EQ(wc[0].wr_id, 8u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(verbs_errors, an_unsupported_opcode_is_refused_at_post_time) {
  ibv_sge s;
  ibv_send_wr wr = write_wr(9, buf_a_.data(), 8, mr_a_->lkey, 0, 0, &s);
  wr.opcode = IBV_WR_LOCAL_INV;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a_.qp, &wr, &bad), EOPNOTSUPP);
  EXPECT_EQ(bad, &wr);
}

// ibv_modify_qp's attribute masks go through the control path's one state machine: a
// legal RC attribute gdaki has no field for is EOPNOTSUPP, one no RC transition takes is
// EINVAL, and the QP stays where it was.
TEST_F(verbs_errors, modify_refuses_unmodelled_and_foreign_attributes_and_leaves_the_qp_as_it_was) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.path_mig_state = IBV_MIG_MIGRATED;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &attr, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE), EOPNOTSUPP);
  attr.qkey = 0x11111111;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &attr, IBV_QP_STATE | IBV_QP_QKEY), EINVAL);
  attr.qp_state = IBV_QPS_SQD;
  EXPECT_EQ(ibv_modify_qp(a_.qp, &attr, IBV_QP_STATE), EOPNOTSUPP);
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(a_.qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
}

}  // namespace
}  // namespace gdaki_verbs_test
