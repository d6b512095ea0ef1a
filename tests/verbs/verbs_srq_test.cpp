// Shared receive queues through the plain ibverbs API on the soft device: two QPs take
// receives from one SRQ (ibv_post_srq_recv), each WR completes once with its wr_id, the
// receiving QP and the sender; ibv_destroy_srq is EBUSY while a QP uses the SRQ.
#include <endian.h>

#include <algorithm>
#include <set>

#include "verbs_fixture.hpp"

namespace gdaki_verbs_test {
namespace {

using verbs_srq = verbs_pair;

TEST_F(verbs_srq, two_qps_share_one_srq_and_each_receive_completes_once) {
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr) << "errno " << errno;
  EXPECT_GE(sa.attr.max_wr, 16u);
  ibv_srq_attr qa{};
  ASSERT_EQ(ibv_query_srq(srq, &qa), 0);
  EXPECT_EQ(qa.max_wr, sa.attr.max_wr);
  EXPECT_GE(qa.max_sge, 1u);

  // Senders x[i] -> receivers y[i]; both y take receives from srq and report on one CQ.
  side x[2], y[2];
  ibv_cq* rcq = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
  ASSERT_NE(rcq, nullptr);
  for (int i = 0; i < 2; ++i) {
    make(&x[i]);
    y[i].scq = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_NE(y[i].scq, nullptr);
    ibv_qp_init_attr init{};
    init.send_cq = y[i].scq;
    init.recv_cq = rcq;
    init.srq = srq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 8;
    init.cap.max_send_sge = 1;
    y[i].qp = ibv_create_qp(pd_, &init);
    ASSERT_NE(y[i].qp, nullptr) << "errno " << errno;
    connect(x[i].qp, y[i].qp);
    connect(y[i].qp, x[i].qp);
  }
  EXPECT_EQ(ibv_destroy_srq(srq), EBUSY) << "QPs still receive from it";

  // Receives: wr_id 100 + k scatters into slot k of buf_b_.
  constexpr int n = 8;
  for (int k = 0; k < n; ++k) {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf_b_.data() + 64 * k), 64, mr_b_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 100 + static_cast<uint64_t>(k);
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  }
  {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf_b_.data()), 64, mr_b_->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_recv(y[0].qp, &wr, &bad), EINVAL) << "a QP on an SRQ has no receive queue";
  }
  // Four SEND_WITH_IMM from each sender; the payload's first byte names the sender.
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < n / 2; ++j) {
      uint8_t* p = buf_a_.data() + 64 * (i * (n / 2) + j);
      std::memset(p, 0x10 * (i + 1) + j, 48);
      ibv_sge s{reinterpret_cast<uintptr_t>(p), 48, mr_a_->lkey};
      ibv_send_wr wr{};
      wr.wr_id = static_cast<uint64_t>(j);
      wr.sg_list = &s;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_SEND_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = htobe32(static_cast<uint32_t>(i));
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_send(x[i].qp, &wr, &bad), 0);
    }
  }
  for (int i = 0; i < 2; ++i) {
    const auto sc = poll(x[i].scq, n / 2);
    ASSERT_EQ(sc.size(), static_cast<size_t>(n / 2));
    for (const ibv_wc& w : sc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  }
  const auto rc = poll(rcq, n);
  ASSERT_EQ(rc.size(), static_cast<size_t>(n));
  std::set<uint64_t> ids;
  int next_from[2] = {0, 0};
  for (const ibv_wc& w : rc) {
    ASSERT_EQ(w.status, IBV_WC_SUCCESS);
    EXPECT_EQ(w.opcode, IBV_WC_RECV);
    EXPECT_EQ(w.byte_len, 48u);
    ASSERT_TRUE(w.wc_flags & IBV_WC_WITH_IMM);
    const uint32_t from = be32toh(w.imm_data);
    ASSERT_LT(from, 2u);
    EXPECT_EQ(w.qp_num, y[from].qp->qp_num);
    EXPECT_EQ(w.src_qp, x[from].qp->qp_num);
    EXPECT_TRUE(ids.insert(w.wr_id).second) << "wr_id " << w.wr_id << " completed twice";
    ASSERT_GE(w.wr_id, 100u);
    ASSERT_LT(w.wr_id, 100u + n);
    // The receive's own buffer holds this sender's next message (RC keeps order per QP).
    EXPECT_EQ(buf_b_[64 * (w.wr_id - 100)], 0x10 * (from + 1) + next_from[from]);
    ++next_from[from];
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(n));

  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ibv_destroy_qp(y[i].qp), 0);
    EXPECT_EQ(ibv_destroy_qp(x[i].qp), 0);
    EXPECT_EQ(ibv_destroy_cq(y[i].scq), 0);
    EXPECT_EQ(ibv_destroy_cq(x[i].scq), 0);
    EXPECT_EQ(ibv_destroy_cq(x[i].rcq), 0);
  }
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

}  // namespace
}  // namespace gdaki_verbs_test
