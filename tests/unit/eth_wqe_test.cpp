// The mlx5 raw-packet Ethernet send WQE and receive CQE (prm/eth.hpp), byte by byte. The
// expected bytes follow mlx5-datapath.md sections 2.1 (control) and 2.3 (data segment) and
// rdma-core's mlx5_wqe_eth_seg (inline_hdr_sz at byte 12 of the Ethernet segment, inlined
// bytes from byte 14); prm_layout_test checks those offsets against mlx5dv.h itself.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "gdaki/prm/eth.hpp"

namespace prm = gdaki::prm;

namespace {

constexpr uint8_t untouched = 0xee;

// A 60-byte IPv4/UDP frame: MACs, ethertype 0x0800, a 20-byte IPv4 header (IHL 5,
// protocol 17), an 8-byte UDP header, 18 payload bytes. Each byte distinct where it counts.
std::vector<uint8_t> udp4_frame() {
  std::vector<uint8_t> f(60);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<uint8_t>(0x40 + i);
  f[12] = 0x08;
  f[13] = 0x00;
  f[14] = 0x45;  // version 4, IHL 5
  f[23] = 17;    // protocol UDP
  return f;
}

void put_be16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void put_be32(uint8_t* p, uint32_t v) {
  put_be16(p, v >> 16);
  put_be16(p + 2, v & 0xffff);
}
void put_be64(uint8_t* p, uint64_t v) {
  put_be32(p, static_cast<uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<uint32_t>(v));
}
uint64_t addr_of(const uint8_t* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

void expect_same(const uint8_t* got, const uint8_t* want, size_t n) {
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "ring byte " << i;
}

}  // namespace

TEST(mlx5_eth_wqe, l2_inline_send_is_control_eth_segment_and_one_data_segment) {
  const auto frame = udp4_frame();
  alignas(64) std::array<uint8_t, 4 * 64> ring;
  ring.fill(untouched);
  const uint32_t inl = prm::eth_min_inline_bytes(prm::eth_inline_mode::l2, frame.data(), 60);
  ASSERT_EQ(inl, 18u);
  ASSERT_EQ(prm::write_eth_send(ring.data(), 2, 5, 0x123, frame.data(), 60, 0x1111, inl,
                                prm::ctrl_flags::cq_update),
            1u);
  auto want = ring;
  want.fill(untouched);
  uint8_t* w = want.data() + 64;   // WQEBB 5 of a 4-WQEBB ring is slot 1
  for (int i = 0; i < 64; ++i) w[i] = 0;
  put_be32(w + 0, 0x0005'0a);      // ctrl: opmod 0, wqe_index 5, opcode SEND (0x0a)
  put_be32(w + 4, 0x123u << 8 | 4);  // ctrl: sqn, DS 4 (ctrl + 2 eth + data)
  w[11] = 0x08;                    // fm_ce_se: CQ update
  put_be16(w + 16 + 12, 18);       // eth: inline_hdr_sz
  for (int i = 0; i < 18; ++i) w[16 + 14 + i] = frame[i];  // eth: inlined L2 header
  put_be32(w + 48, 42);            // data: byte_count, the 42 bytes past the inline header
  put_be32(w + 52, 0x1111);        // data: lkey
  put_be64(w + 56, addr_of(frame.data()) + 18);  // data: addr
  expect_same(ring.data(), want.data(), ring.size());
}

TEST(mlx5_eth_wqe, a_send_past_the_ring_end_wraps_by_16_byte_units) {
  const auto frame = udp4_frame();
  alignas(64) std::array<uint8_t, 2 * 64> ring;
  ring.fill(untouched);
  const uint32_t inl = prm::eth_min_inline_bytes(prm::eth_inline_mode::tcp_udp, frame.data(), 60);
  ASSERT_EQ(inl, 42u);             // 14 L2 + 20 IPv4 + 8 UDP
  ASSERT_EQ(prm::eth_send_ds(inl, 60), 6u);  // ctrl + eth (14 + 42 -> 4 units) + data
  ASSERT_EQ(prm::write_eth_send(ring.data(), 1, 1, 0x123, frame.data(), 60, 0x2222, inl, 0), 2u);
  std::array<uint8_t, 2 * 64> want;
  want.fill(untouched);
  for (int i = 0; i < 64; ++i) want[64 + i] = 0;  // units 0..3 at slot 1
  for (int i = 0; i < 32; ++i) want[i] = 0;       // units 4..5 wrap to slot 0
  put_be32(&want[64], 0x0001'0a);
  put_be32(&want[68], 0x123u << 8 | 6);
  put_be16(&want[80 + 12], 42);
  for (int i = 0; i < 42; ++i) {
    const int b = 80 + 14 + i;     // ring byte, before wrapping
    want[b < 128 ? b : b - 128] = frame[i];
  }
  put_be32(&want[16], 18);         // data segment, unit 5 = ring bytes 16..31
  put_be32(&want[20], 0x2222);
  put_be64(&want[24], addr_of(frame.data()) + 42);
  expect_same(ring.data(), want.data(), ring.size());
}

TEST(mlx5_eth_wqe, no_inline_mode_leaves_the_eth_segment_empty_and_points_at_the_whole_frame) {
  const auto frame = udp4_frame();
  alignas(64) std::array<uint8_t, 64> ring;
  ring.fill(untouched);
  ASSERT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::none, frame.data(), 60), 0u);
  ASSERT_EQ(prm::write_eth_send(ring.data(), 0, 0, 7, frame.data(), 60, 0x3333, 0, 0), 1u);
  std::array<uint8_t, 64> want;
  want.fill(untouched);
  for (int i = 0; i < 48; ++i) want[i] = 0;
  put_be32(&want[0], 0x0a);
  put_be32(&want[4], 7u << 8 | 3);  // ctrl + one eth unit + data
  put_be32(&want[32], 60);
  put_be32(&want[36], 0x3333);
  put_be64(&want[40], addr_of(frame.data()));
  expect_same(ring.data(), want.data(), ring.size());
}

TEST(mlx5_eth_wqe, a_frame_no_longer_than_its_inline_header_has_no_data_segment) {
  const auto frame = udp4_frame();
  alignas(64) std::array<uint8_t, 64> ring;
  ring.fill(untouched);
  EXPECT_EQ(prm::write_eth_send(ring.data(), 0, 0, 7, frame.data(), 18, 0, 18, 0), 1u);
  EXPECT_EQ(ring[7], 3);            // DS: ctrl + 2 eth units
  EXPECT_EQ(ring[48], untouched);   // nothing written past the WQE
  ring.fill(untouched);
  EXPECT_EQ(prm::write_eth_send(ring.data(), 0, 0, 7, frame.data(), 10, 0, 18, 0), 0u);
  EXPECT_EQ(prm::write_eth_send(ring.data(), 0, 0, 7, frame.data(), 200, 0, 129, 0), 0u);
  EXPECT_EQ(ring[0], untouched);    // refused: nothing written
}

TEST(mlx5_eth_wqe, inline_modes_reach_the_headers_they_name) {
  const auto u4 = udp4_frame();
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::l2, u4.data(), 60), 18u);
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::ip, u4.data(), 60), 34u);
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::tcp_udp, u4.data(), 60), 42u);
  // 802.1Q-tagged IPv6/TCP with a 32-byte TCP header (data offset 8).
  std::vector<uint8_t> t6(120, 0);
  t6[12] = 0x81;
  t6[13] = 0x00;
  t6[16] = 0x86;
  t6[17] = 0xdd;
  t6[18 + 6] = 6;                   // next header TCP
  t6[18 + 40 + 12] = 0x80;          // data offset 8
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::ip, t6.data(), 120), 58u);
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::tcp_udp, t6.data(), 120), 90u);
  // Not IP: the IP modes fall back to the L2 header; a short frame inlines itself.
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::tcp_udp, arp.data(), 60), 18u);
  EXPECT_EQ(prm::eth_min_inline_bytes(prm::eth_inline_mode::l2, arp.data(), 10), 10u);
}

TEST(mlx5_eth_wqe, receive_cqe_gives_length_wqe_counter_and_rss_hash) {
  alignas(64) std::array<uint8_t, 64> cqe{};
  put_be32(&cqe[12], 0xdeadbeef);   // rss_hash_result (Linux mlx5_cqe64 byte 12)
  cqe[16] = prm::rss_htype::ipv4 | prm::rss_htype::udp;  // rss_hash_type (byte 16)
  put_be32(&cqe[44], 1514);         // byte_cnt
  put_be16(&cqe[60], 0x1234);       // wqe_counter
  cqe[63] = 0x21;                   // op_own: opcode RESP_SEND (2), owner 1
  const prm::eth_rx_completion c = prm::decode_eth_rx_cqe(cqe.data());
  EXPECT_EQ(c.opcode, prm::cqe_opcode::resp_send);
  EXPECT_EQ(c.byte_count, 1514u);
  EXPECT_EQ(c.wqe_counter, 0x1234u);
  EXPECT_EQ(c.rss_hash, 0xdeadbeefu);
  EXPECT_EQ(c.rss_hash_type & prm::rss_htype::ip_mask, prm::rss_htype::ipv4);
  EXPECT_EQ(c.rss_hash_type & prm::rss_htype::l4_mask, prm::rss_htype::udp);
}
