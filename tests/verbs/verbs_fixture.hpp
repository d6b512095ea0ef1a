// A pair of connected RC QPs on the soft device, through the plain ibverbs API, for the
// verbs tests. The test binaries link rdma-core's libibverbs and run with
// LD_PRELOAD=libgdaki_verbs.so (set by ctest), exactly like an unchanged program.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace gdaki_verbs_test {

struct side {
  ibv_cq* scq = nullptr;
  ibv_cq* rcq = nullptr;
  ibv_qp* qp = nullptr;
};

class verbs_pair : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    for (int i = 0; i < n; ++i) {
      if (std::strcmp(ibv_get_device_name(list[i]), "gdaki_soft0") == 0) ctx_ = ibv_open_device(list[i]);
    }
    ibv_free_device_list(list);
    if (ctx_ == nullptr) GTEST_SKIP() << "gdaki_soft0 is not listed: run with LD_PRELOAD=libgdaki_verbs.so";
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    buf_a_.assign(1 << 16, 0);
    buf_b_.assign(1 << 16, 0);
    constexpr int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;
    mr_a_ = ibv_reg_mr(pd_, buf_a_.data(), buf_a_.size(), all);
    mr_b_ = ibv_reg_mr(pd_, buf_b_.data(), buf_b_.size(), all);
    ASSERT_NE(mr_a_, nullptr);
    ASSERT_NE(mr_b_, nullptr);
    make(&a_);
    make(&b_);
    connect(a_.qp, b_.qp);
    connect(b_.qp, a_.qp);
  }

  void TearDown() override {
    for (side* s : {&a_, &b_}) {
      if (s->qp) {
        EXPECT_EQ(ibv_destroy_qp(s->qp), 0);
      }
      if (s->scq) {
        EXPECT_EQ(ibv_destroy_cq(s->scq), 0);
      }
      if (s->rcq) {
        EXPECT_EQ(ibv_destroy_cq(s->rcq), 0);
      }
    }
    if (mr_a_) ibv_dereg_mr(mr_a_);
    if (mr_b_) ibv_dereg_mr(mr_b_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  void make(side* s) {
    s->scq = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    s->rcq = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_NE(s->scq, nullptr);
    ASSERT_NE(s->rcq, nullptr);
    ibv_qp_init_attr init{};
    init.send_cq = s->scq;
    init.recv_cq = s->rcq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 32;
    init.cap.max_recv_wr = 32;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    init.cap.max_inline_data = 64;
    s->qp = ibv_create_qp(pd_, &init);
    ASSERT_NE(s->qp, nullptr);
  }

  // RESET -> INIT -> RTR -> RTS towards `peer`, addressed by the device's own GID (the
  // soft NIC takes the in-process path for an address of this process).
  void connect(ibv_qp* q, ibv_qp* peer) {
    ibv_gid gid;
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer->qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    ASSERT_EQ(ibv_modify_qp(q, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    ASSERT_EQ(ibv_modify_qp(q, &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC),
              0);
  }

  // Polls cq until n completions arrived (or about 5 s passed).
  std::vector<ibv_wc> poll(ibv_cq* cq, int n) {
    std::vector<ibv_wc> out;
    for (long spins = 0; static_cast<int>(out.size()) < n && spins < 50'000'000; ++spins) {
      ibv_wc wc[16];
      const int got = ibv_poll_cq(cq, 16, wc);
      EXPECT_GE(got, 0);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    }
    return out;
  }

  ibv_send_wr write_wr(uint64_t id, void* local, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                       ibv_sge* sge, bool signaled = true) {
    *sge = {reinterpret_cast<uintptr_t>(local), len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return wr;
  }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_a_ = nullptr;
  ibv_mr* mr_b_ = nullptr;
  std::vector<uint8_t> buf_a_, buf_b_;
  side a_, b_;
};

}  // namespace gdaki_verbs_test
