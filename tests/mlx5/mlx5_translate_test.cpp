// Attribute translation between gdaki and rdma-core, checked against rdma-core's own
// constants from <infiniband/verbs.h> (the implementation does not include that header, so
// these tests compare two independent sources).
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <array>
#include <vector>

#include "gdaki/prm/cqe.hpp"
#include "providers/mlx5/mlx5_translate.hpp"

using namespace gdaki::mlx5;
using gdaki::status;

// ---- access flags ------------------------------------------------------------------------

TEST(mlx5_translate, access_flags_map_to_ibv_access_bits) {
  EXPECT_EQ(to_ibv_access(0).value, 0u);
  EXPECT_EQ(to_ibv_access(access_bits::local_write).value, uint32_t{IBV_ACCESS_LOCAL_WRITE});
  EXPECT_EQ(to_ibv_access(access_bits::remote_read).value, uint32_t{IBV_ACCESS_REMOTE_READ});
  EXPECT_EQ(to_ibv_access(access_bits::local_write | access_bits::remote_write).value,
            uint32_t{IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE});
  EXPECT_EQ(to_ibv_access(access_bits::all).value,
            uint32_t{IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC});
}

TEST(mlx5_translate, remote_write_or_atomic_without_local_write_is_invalid) {
  const auto w = to_ibv_access(access_bits::remote_write);
  EXPECT_EQ(w.code, status::invalid);
  EXPECT_NE(w.reason.find("remote_write requires local_write"), std::string::npos) << w.reason;
  const auto a = to_ibv_access(access_bits::remote_atomic | access_bits::remote_read);
  EXPECT_EQ(a.code, status::invalid);
  EXPECT_NE(a.reason.find("remote_atomic requires local_write"), std::string::npos) << a.reason;
}

TEST(mlx5_translate, unknown_access_bits_are_invalid) {
  const auto r = to_ibv_access(0x10 | access_bits::local_write);
  EXPECT_EQ(r.code, status::invalid);
  EXPECT_NE(r.reason.find("0x10"), std::string::npos) << r.reason;
}

TEST(mlx5_translate, ibv_access_round_trips_and_rejects_unmodelled_bits) {
  for (uint32_t f = 0; f <= access_bits::all; ++f) {
    const auto ibv = to_ibv_access(f);
    if (!ibv) continue;
    const auto back = from_ibv_access(ibv.value);
    ASSERT_TRUE(back) << back.reason;
    EXPECT_EQ(back.value, f);
  }
  const auto mw = from_ibv_access(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  EXPECT_EQ(mw.code, status::not_supported);
  EXPECT_EQ(from_ibv_access(IBV_ACCESS_ON_DEMAND).code, status::not_supported);
}

// ---- MTU ---------------------------------------------------------------------------------

TEST(mlx5_translate, mtu_bytes_map_to_ibv_mtu_and_back) {
  const std::array<std::pair<uint32_t, ibv_mtu>, 5> table{{{256, IBV_MTU_256},
                                                            {512, IBV_MTU_512},
                                                            {1024, IBV_MTU_1024},
                                                            {2048, IBV_MTU_2048},
                                                            {4096, IBV_MTU_4096}}};
  for (const auto& [bytes, e] : table) {
    EXPECT_EQ(mtu_to_ibv(bytes).value, static_cast<uint32_t>(e)) << bytes;
    EXPECT_EQ(mtu_from_ibv(e).value, bytes);
  }
}

TEST(mlx5_translate, mtu_values_outside_the_ibv_set_are_invalid) {
  for (uint32_t bad : {0u, 128u, 1000u, 1500u, 8192u, 9000u}) {
    const auto r = mtu_to_ibv(bad);
    EXPECT_EQ(r.code, status::invalid) << bad;
    EXPECT_NE(r.reason.find(std::to_string(bad)), std::string::npos) << r.reason;
  }
  EXPECT_EQ(mtu_from_ibv(0).code, status::invalid);
  EXPECT_EQ(mtu_from_ibv(6).code, status::invalid);
}

// ---- link layer, addressing, GIDs --------------------------------------------------------

TEST(mlx5_translate, link_layer_unspecified_counts_as_infiniband) {
  EXPECT_EQ(link_from_ibv(IBV_LINK_LAYER_UNSPECIFIED).value, link_kind::infiniband);
  EXPECT_EQ(link_from_ibv(IBV_LINK_LAYER_INFINIBAND).value, link_kind::infiniband);
  EXPECT_EQ(link_from_ibv(IBV_LINK_LAYER_ETHERNET).value, link_kind::ethernet);
  EXPECT_EQ(link_from_ibv(7).code, status::not_supported);
}

TEST(mlx5_translate, infiniband_address_uses_the_peer_lid_without_grh) {
  peer_address p;
  p.lid = 0x12;
  const auto av = make_address_vector(link_kind::infiniband, p, 1, 3, 2);
  ASSERT_TRUE(av) << av.reason;
  EXPECT_FALSE(av.value.is_global);
  EXPECT_EQ(av.value.dlid, 0x12);
  EXPECT_EQ(av.value.sl, 2);
  EXPECT_EQ(av.value.port_num, 1);
}

TEST(mlx5_translate, infiniband_address_without_peer_lid_is_invalid) {
  const auto av = make_address_vector(link_kind::infiniband, peer_address{}, 1, 0);
  EXPECT_EQ(av.code, status::invalid);
  EXPECT_NE(av.reason.find("LID"), std::string::npos) << av.reason;
}

TEST(mlx5_translate, roce_address_is_global_with_the_peer_gid_and_a_routable_hop_limit) {
  peer_address p;
  p.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7};
  p.lid = 0x55;  // ignored on Ethernet
  const auto av = make_address_vector(link_kind::ethernet, p, 1, 3);
  ASSERT_TRUE(av) << av.reason;
  EXPECT_TRUE(av.value.is_global);
  EXPECT_EQ(av.value.dlid, 0);
  EXPECT_EQ(av.value.sgid_index, 3);
  EXPECT_GT(av.value.hop_limit, 1);
  EXPECT_EQ(av.value.dgid, p.gid);
}

TEST(mlx5_translate, roce_address_without_peer_gid_is_invalid) {
  const auto av = make_address_vector(link_kind::ethernet, peer_address{}, 1, 0);
  EXPECT_EQ(av.code, status::invalid);
  EXPECT_NE(av.reason.find("GID"), std::string::npos) << av.reason;
  EXPECT_EQ(make_address_vector(link_kind::ethernet, peer_address{}, 0, 0).code, status::invalid);
}

TEST(mlx5_translate, gid_type_values_match_ibv_gid_type) {
  EXPECT_EQ(gid_type_from_ibv(IBV_GID_TYPE_IB).value, gid_type::ib);
  EXPECT_EQ(gid_type_from_ibv(IBV_GID_TYPE_ROCE_V1).value, gid_type::roce_v1);
  EXPECT_EQ(gid_type_from_ibv(IBV_GID_TYPE_ROCE_V2).value, gid_type::roce_v2);
  EXPECT_EQ(gid_type_from_ibv(9).code, status::not_supported);
}

namespace {

std::array<uint8_t, 16> ipv4_gid(uint8_t last) { return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, last}; }
std::array<uint8_t, 16> link_local_gid() { return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55}; }
std::array<uint8_t, 16> global_v6_gid() { return {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}; }

// A typical ConnectX RoCE port: each address appears as a v1 and a v2 entry.
std::vector<gid_entry> roce_table() {
  return {{0, link_local_gid(), gid_type::roce_v1}, {1, link_local_gid(), gid_type::roce_v2},
          {2, ipv4_gid(5), gid_type::roce_v1},     {3, ipv4_gid(5), gid_type::roce_v2},
          {4, global_v6_gid(), gid_type::roce_v1}, {5, global_v6_gid(), gid_type::roce_v2},
          {6, {}, gid_type::roce_v2}};
}

}  // namespace

TEST(mlx5_translate, gid_selection_prefers_roce_v2_ipv4_mapped_by_default) {
  const auto t = roce_table();
  const auto r = select_gid_index(link_kind::ethernet, t);
  ASSERT_TRUE(r) << r.reason;
  EXPECT_EQ(r.value, 3u);
}

TEST(mlx5_translate, gid_selection_ipv6_policy_prefers_global_over_link_local) {
  const auto t = roce_table();
  EXPECT_EQ(select_gid_index(link_kind::ethernet, t, gid_family::ipv6_preferred).value, 5u);
  EXPECT_EQ(select_gid_index(link_kind::ethernet, t, gid_family::ipv6_only).value, 5u);
  std::vector<gid_entry> ll_only{{0, link_local_gid(), gid_type::roce_v1},
                                 {1, link_local_gid(), gid_type::roce_v2}};
  EXPECT_EQ(select_gid_index(link_kind::ethernet, ll_only, gid_family::ipv6_only).value, 1u);
}

TEST(mlx5_translate, gid_selection_falls_back_across_families_only_when_preferred) {
  std::vector<gid_entry> v6{{0, link_local_gid(), gid_type::roce_v1}, {1, link_local_gid(), gid_type::roce_v2}};
  EXPECT_EQ(select_gid_index(link_kind::ethernet, v6, gid_family::ipv4_preferred).value, 1u);
  const auto strict = select_gid_index(link_kind::ethernet, v6, gid_family::ipv4_only);
  EXPECT_EQ(strict.code, status::not_found);
  EXPECT_NE(strict.reason.find("IPv4-mapped"), std::string::npos) << strict.reason;
}

TEST(mlx5_translate, gid_selection_never_picks_roce_v1_or_empty_entries) {
  std::vector<gid_entry> v1_only{{0, ipv4_gid(1), gid_type::roce_v1}, {1, {}, gid_type::roce_v2}};
  const auto r = select_gid_index(link_kind::ethernet, v1_only);
  EXPECT_EQ(r.code, status::not_found);
  EXPECT_NE(r.reason.find("1 RoCE v1"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("1 empty"), std::string::npos) << r.reason;
}

TEST(mlx5_translate, gid_selection_on_infiniband_is_index_zero) {
  std::vector<gid_entry> ib{{0, global_v6_gid(), gid_type::ib}};
  EXPECT_EQ(select_gid_index(link_kind::infiniband, ib).value, 0u);
  EXPECT_EQ(select_gid_index(link_kind::infiniband, {}).value, 0u);
}

TEST(mlx5_translate, gid_classifiers_recognise_ipv4_mapped_and_link_local) {
  EXPECT_TRUE(gid_is_ipv4_mapped(ipv4_gid(1)));
  EXPECT_FALSE(gid_is_ipv4_mapped(link_local_gid()));
  EXPECT_TRUE(gid_is_ipv6_link_local(link_local_gid()));
  EXPECT_FALSE(gid_is_ipv6_link_local(global_v6_gid()));
  EXPECT_TRUE(gid_is_zero({}));
}

// ---- timers and retries ------------------------------------------------------------------

TEST(mlx5_translate, timeout_zero_means_infinite_both_ways) {
  EXPECT_EQ(timeout_from_usec(0).value, 0);
  const auto inf = timeout_to_usec(0);
  ASSERT_TRUE(inf);
  EXPECT_FALSE(inf.value.has_value());
}

TEST(mlx5_translate, timeout_rounds_up_to_the_next_power_of_two_of_4096_ns) {
  EXPECT_EQ(timeout_from_usec(1).value, 1);       // 8.192 us is the shortest finite wait
  EXPECT_EQ(timeout_from_usec(8).value, 1);       // 8 <= 8.192
  EXPECT_EQ(timeout_from_usec(9).value, 2);       // 16.384
  EXPECT_EQ(timeout_from_usec(67108).value, 14);  // 4.096 us * 2^14 = 67108.864 us
  EXPECT_EQ(timeout_from_usec(67109).value, 15);
}

TEST(mlx5_translate, timeout_encode_decode_is_at_least_the_request) {
  for (uint64_t usec : {1ull, 10ull, 100ull, 1000ull, 67108ull, 500000ull, 2000000ull, 8796093000ull}) {
    const auto t = timeout_from_usec(usec);
    ASSERT_TRUE(t) << usec << ": " << t.reason;
    const auto back = timeout_to_usec(t.value);
    ASSERT_TRUE(back && back.value.has_value());
    EXPECT_GE(*back.value, static_cast<double>(usec)) << "t=" << int(t.value);
    if (t.value > 1) {
      const auto shorter = timeout_to_usec(static_cast<uint8_t>(t.value - 1));
      EXPECT_LT(shorter.value.value_or(0.0), static_cast<double>(usec))
          << "t=" << int(t.value) << " is not the smallest";
    }
  }
  EXPECT_DOUBLE_EQ(*timeout_to_usec(14).value, 4.096 * 16384);
  EXPECT_DOUBLE_EQ(*timeout_to_usec(31).value, 4.096 * 2147483648.0);
}

TEST(mlx5_translate, timeout_beyond_the_31st_power_is_invalid) {
  EXPECT_EQ(timeout_from_usec(8796094000ull).code, status::invalid);
  EXPECT_EQ(timeout_to_usec(32).code, status::invalid);
}

TEST(mlx5_translate, min_rnr_timer_follows_the_iba_table) {
  EXPECT_EQ(min_rnr_timer_to_usec(1).value, 10u);       // 0.01 ms
  EXPECT_EQ(min_rnr_timer_to_usec(12).value, 640u);     // 0.64 ms
  EXPECT_EQ(min_rnr_timer_to_usec(14).value, 1280u);    // 1.28 ms
  EXPECT_EQ(min_rnr_timer_to_usec(31).value, 491520u);  // 491.52 ms
  EXPECT_EQ(min_rnr_timer_to_usec(0).value, 655360u);   // 655.36 ms
  EXPECT_EQ(min_rnr_timer_to_usec(32).code, status::invalid);
}

TEST(mlx5_translate, min_rnr_timer_encodes_the_shortest_delay_not_below_the_request) {
  EXPECT_EQ(min_rnr_timer_from_usec(0).value, 1);
  EXPECT_EQ(min_rnr_timer_from_usec(10).value, 1);
  EXPECT_EQ(min_rnr_timer_from_usec(11).value, 2);
  EXPECT_EQ(min_rnr_timer_from_usec(640).value, 12);
  EXPECT_EQ(min_rnr_timer_from_usec(491520).value, 31);
  EXPECT_EQ(min_rnr_timer_from_usec(491521).value, 0);  // only 655.36 ms is longer
  EXPECT_EQ(min_rnr_timer_from_usec(655360).value, 0);
  EXPECT_EQ(min_rnr_timer_from_usec(655361).code, status::invalid);
  for (uint8_t c = 0; c < 32; ++c) {
    EXPECT_EQ(min_rnr_timer_from_usec(min_rnr_timer_to_usec(c).value).value, c) << int(c);
  }
}

TEST(mlx5_translate, retry_counts_are_three_bit_and_rnr_seven_is_infinite) {
  for (uint32_t n = 0; n <= 7; ++n) {
    EXPECT_EQ(check_retry_cnt(n).value, n);
    EXPECT_EQ(check_rnr_retry(n).value, n);
  }
  EXPECT_EQ(check_retry_cnt(8).code, status::invalid);
  EXPECT_EQ(check_rnr_retry(8).code, status::invalid);
  EXPECT_NE(check_rnr_retry(9).reason.find("7 = retry forever"), std::string::npos);
  EXPECT_EQ(rnr_retry_infinite, 7);
}

// ---- completion status -------------------------------------------------------------------

TEST(mlx5_translate, syndromes_map_to_ibv_wc_status_per_the_datapath_table) {
  using gdaki::prm::syndrome;
  const std::pair<syndrome, ibv_wc_status> table[] = {
      {syndrome::none, IBV_WC_SUCCESS},
      {syndrome::local_length, IBV_WC_LOC_LEN_ERR},
      {syndrome::local_qp_op, IBV_WC_LOC_QP_OP_ERR},
      {syndrome::local_prot, IBV_WC_LOC_PROT_ERR},
      {syndrome::wr_flush, IBV_WC_WR_FLUSH_ERR},
      {syndrome::mw_bind, IBV_WC_MW_BIND_ERR},
      {syndrome::bad_resp, IBV_WC_BAD_RESP_ERR},
      {syndrome::local_access, IBV_WC_LOC_ACCESS_ERR},
      {syndrome::remote_inval_req, IBV_WC_REM_INV_REQ_ERR},
      {syndrome::remote_access, IBV_WC_REM_ACCESS_ERR},
      {syndrome::remote_op, IBV_WC_REM_OP_ERR},
      {syndrome::transport_retry_exc, IBV_WC_RETRY_EXC_ERR},
      {syndrome::rnr_retry_exc, IBV_WC_RNR_RETRY_EXC_ERR},
      {syndrome::remote_aborted, IBV_WC_REM_ABORT_ERR},
  };
  for (const auto& [s, wc] : table) {
    EXPECT_EQ(wc_status_from_syndrome(static_cast<uint8_t>(s)), static_cast<uint32_t>(wc))
        << "syndrome 0x" << std::hex << int(s);
  }
}

TEST(mlx5_translate, wc_status_names_are_the_verbs_h_identifiers) {
#define GDAKI_WC(x) std::pair<ibv_wc_status, const char*>{x, #x}
  const std::pair<ibv_wc_status, const char*> names[] = {
      GDAKI_WC(IBV_WC_SUCCESS),          GDAKI_WC(IBV_WC_LOC_LEN_ERR),
      GDAKI_WC(IBV_WC_LOC_QP_OP_ERR),    GDAKI_WC(IBV_WC_LOC_EEC_OP_ERR),
      GDAKI_WC(IBV_WC_LOC_PROT_ERR),     GDAKI_WC(IBV_WC_WR_FLUSH_ERR),
      GDAKI_WC(IBV_WC_MW_BIND_ERR),      GDAKI_WC(IBV_WC_BAD_RESP_ERR),
      GDAKI_WC(IBV_WC_LOC_ACCESS_ERR),   GDAKI_WC(IBV_WC_REM_INV_REQ_ERR),
      GDAKI_WC(IBV_WC_REM_ACCESS_ERR),   GDAKI_WC(IBV_WC_REM_OP_ERR),
      GDAKI_WC(IBV_WC_RETRY_EXC_ERR),    GDAKI_WC(IBV_WC_RNR_RETRY_EXC_ERR),
      GDAKI_WC(IBV_WC_LOC_RDD_VIOL_ERR), GDAKI_WC(IBV_WC_REM_INV_RD_REQ_ERR),
      GDAKI_WC(IBV_WC_REM_ABORT_ERR),    GDAKI_WC(IBV_WC_INV_EECN_ERR),
      GDAKI_WC(IBV_WC_INV_EEC_STATE_ERR), GDAKI_WC(IBV_WC_FATAL_ERR),
      GDAKI_WC(IBV_WC_RESP_TIMEOUT_ERR), GDAKI_WC(IBV_WC_GENERAL_ERR),
      GDAKI_WC(IBV_WC_TM_ERR),           GDAKI_WC(IBV_WC_TM_RNDV_INCOMPLETE),
  };
#undef GDAKI_WC
  for (const auto& [wc, name] : names) EXPECT_STREQ(wc_status_name(wc), name);
}

TEST(mlx5_translate, syndromes_match_mlx5dv_constants) {
  EXPECT_EQ(static_cast<int>(gdaki::prm::syndrome::local_length), MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
  EXPECT_EQ(static_cast<int>(gdaki::prm::syndrome::remote_aborted), MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
  EXPECT_EQ(static_cast<int>(gdaki::prm::syndrome::rnr_retry_exc), MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
}

TEST(mlx5_translate, unknown_syndrome_is_general_error_like_rdma_core) {
  for (uint8_t s : {uint8_t{0x03}, uint8_t{0x07}, uint8_t{0x17}, uint8_t{0x21}, uint8_t{0xff}}) {
    EXPECT_EQ(wc_status_from_syndrome(s), uint32_t{IBV_WC_GENERAL_ERR}) << int(s);
  }
  EXPECT_STREQ(wc_status_name(IBV_WC_GENERAL_ERR), "IBV_WC_GENERAL_ERR");
  EXPECT_STREQ(wc_status_name(999), "IBV_WC_<unknown>");
}
