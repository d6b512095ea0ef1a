// The soft Ethernet port between two network namespaces: frames sent through one port's
// transmit queue arrive in the other port's receive queues exactly as its rules say.
#include <arpa/inet.h>

#include "eth/eth_netns_fixture.hpp"
#include "gdaki/eth/toeplitz.hpp"

using namespace eth_test;
namespace {

enum kind : uint32_t { k_udp_port, k_vlan, k_ipv6, k_tcp_sport, k_ethertype, k_rss, k_drop, k_default, k_kinds };

constexpr uint32_t per_kind = 300;

geth::flow_rule rule_to(uint32_t q, geth::flow_match m) {
  geth::flow_rule r;
  r.match = m;
  r.action.queue = q;
  return r;
}

TEST_F(eth_netns, rules_steer_every_frame_to_its_queue_rss_spreads_by_hash_drop_drops_and_the_default_takes_the_rest) {
  geth::port_config rx;
  rx.rx_queues = 8;
  open_ports(rx);
  if (IsSkipped() || HasFatalFailure()) return;
  geth::steering_table& st = rx_port->steering();
  uint32_t id = 0;
  geth::flow_match m;
  m.ip_proto = geth::ip_proto_udp;
  m.dst_port = geth::masked<uint16_t>{5001};
  ASSERT_EQ(st.add_rule(rule_to(1, m), &id), gdaki::status::ok);
  m = {};
  m.vlan_id = geth::masked<uint16_t>{100};
  ASSERT_EQ(st.add_rule(rule_to(2, m), &id), gdaki::status::ok);
  m = {};
  geth::ip_prefix p6{6, {}, 32};
  ASSERT_EQ(inet_pton(AF_INET6, "fd00:1::", p6.addr.data()), 1);
  m.dst_ip = p6;
  ASSERT_EQ(st.add_rule(rule_to(3, m), &id), gdaki::status::ok);
  m = {};
  m.ip_proto = geth::ip_proto_tcp;
  m.src_port = geth::masked<uint16_t>{0x1200, 0xff00};
  ASSERT_EQ(st.add_rule(rule_to(4, m), &id), gdaki::status::ok);
  m = {};
  m.ethertype = geth::masked<uint16_t>{0x88b5};
  ASSERT_EQ(st.add_rule(rule_to(5, m), &id), gdaki::status::ok);
  geth::flow_rule rss;
  rss.match.dst_port = geth::masked<uint16_t>{6000};
  rss.action.verb = geth::flow_verb::rss;
  rss.action.rss_queues = {6, 7};
  ASSERT_EQ(st.add_rule(rss, &id), gdaki::status::ok);
  geth::flow_rule drop;
  drop.match.dst_port = geth::masked<uint16_t>{7000};
  drop.action.verb = geth::flow_verb::drop;
  uint32_t drop_id = 0;
  ASSERT_EQ(st.add_rule(drop, &drop_id), gdaki::status::ok);

  // Every kind's frame spec, and the queue it must land in (rss: computed per frame).
  std::vector<frame_spec> spec(k_kinds);
  const uint32_t want_queue[k_kinds] = {1, 2, 3, 4, 5, 0xff, 0xff, 0};
  spec[k_udp_port] = udp(1, 5001);
  spec[k_vlan] = udp(1, 9999);
  spec[k_vlan].vlan_id = 100;
  spec[k_ipv6] = udp(1, 9999);
  spec[k_ipv6].ethertype = geth::ethertype_ipv6;
  ASSERT_EQ(inet_pton(AF_INET6, "fd00:1:2::7", spec[k_ipv6].dst.data()), 1);
  spec[k_tcp_sport] = udp(0x12ab, 9999);
  spec[k_tcp_sport].ip_proto = geth::ip_proto_tcp;
  spec[k_ethertype] = udp(1, 1);
  spec[k_ethertype].ethertype = 0x88b5;
  spec[k_rss] = udp(0, 6000);  // the source port varies per frame: one flow each
  spec[k_drop] = udp(1, 7000);
  spec[k_default] = udp(1, 8000);

  frame_pool pool;
  for (uint32_t seq = 0; seq < per_kind; ++seq) {
    for (uint32_t k = 0; k < k_kinds; ++k) {
      frame_spec s = spec[k];
      if (k == k_rss) s.src_port = static_cast<uint16_t>(20000 + seq);
      pool.add(s, k, seq);
    }
  }

  // Receiver: every queue, every frame; records where each (kind, seq) landed.
  std::vector<std::vector<uint32_t>> landed(k_kinds, std::vector<uint32_t>(per_kind, 0xffffffffu));
  std::atomic<uint64_t> received{0}, duplicates{0}, wrong_hash{0};
  std::atomic<bool> stop{false};
  std::thread receiver([&] {
    while (!stop.load()) {
      for (uint32_t q = 0; q < 8; ++q) {
        dev::eth_rxq_handle& h = rx_port->rxq(q);
        uint64_t first = 0;
        uint32_t n = 0;
        ASSERT_EQ(dev::eth_rxq_receive(h, 64, 0, &first, &n), gdaki::status::ok);
        for (uint32_t i = 0; i < n; ++i) {
          uint32_t bytes = 0;
          const uint8_t* f = dev::eth_rxq_frame(h, first + i, &bytes);
          frame_tag t{};
          // Frames of every kind carry the tag at their own kind's payload offset.
          bool ours = false;
          for (uint32_t k = 0; k < k_kinds && !ours; ++k) ours = read_tag(f, bytes, spec[k], &t) && t.kind == k;
          if (!ours || t.seq >= per_kind) continue;
          if (landed[t.kind][t.seq] != 0xffffffffu) ++duplicates;
          landed[t.kind][t.seq] = q;
          if (t.kind == k_rss) {
            // The hash the port reported is the Toeplitz hash of this flow's fields.
            const geth::frame_fields ff = geth::parse_frame(std::span<const uint8_t>(f, bytes));
            std::array<uint8_t, 12> in{};
            std::copy_n(ff.src.begin(), 4, in.begin());
            std::copy_n(ff.dst.begin(), 4, in.begin() + 4);
            in[8] = static_cast<uint8_t>(ff.src_port >> 8);
            in[9] = static_cast<uint8_t>(ff.src_port);
            in[10] = static_cast<uint8_t>(ff.dst_port >> 8);
            in[11] = static_cast<uint8_t>(ff.dst_port);
            if (h.completions[(first + i) & (h.slots - 1)].hash != geth::toeplitz_hash(geth::default_rss_key, in)) {
              ++wrong_hash;
            }
          }
          ++received;
        }
        ASSERT_EQ(dev::eth_rxq_release(h, first, n), gdaki::status::ok);
      }
    }
  });

  // Sender: batches of 64, each waited for on the far side so the veth backlog never
  // overflows (this test is about steering, not about load).
  uint64_t base = rx_port->stats().frames_seen, last = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    last = send(pool, i, (i + 1) % 64 == 0 || i + 1 == pool.size());
    if ((i + 1) % 64 == 0) {
      ASSERT_TRUE(wait_seen(base + i + 1)) << "frames stuck between the ports";
    }
  }
  settle(last);
  const uint64_t expected = uint64_t{per_kind} * (k_kinds - 1);  // all but the dropped kind
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (received.load() < expected && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // anything extra would show now
  stop.store(true);
  receiver.join();

  EXPECT_EQ(received.load(), expected);
  EXPECT_EQ(duplicates.load(), 0u);
  EXPECT_EQ(wrong_hash.load(), 0u);
  uint32_t per_rss_queue[8] = {};
  for (uint32_t k = 0; k < k_kinds; ++k) {
    uint32_t misplaced = 0, missing = 0;
    for (uint32_t seq = 0; seq < per_kind; ++seq) {
      const uint32_t q = landed[k][seq];
      if (k == k_drop) {
        if (q != 0xffffffffu) ++misplaced;
        continue;
      }
      if (q == 0xffffffffu) {
        ++missing;
      } else if (k == k_rss) {
        if (q != 6 && q != 7) ++misplaced;
        ++per_rss_queue[q];
      } else if (q != want_queue[k]) {
        ++misplaced;
      }
    }
    EXPECT_EQ(missing, 0u) << "kind " << k;
    EXPECT_EQ(misplaced, 0u) << "kind " << k;
  }
  EXPECT_GT(per_rss_queue[6], per_kind / 4) << "RSS spreads flows over both queues";
  EXPECT_GT(per_rss_queue[7], per_kind / 4);
  uint64_t hits = 0;
  ASSERT_EQ(st.hits(drop_id, &hits), gdaki::status::ok);
  EXPECT_EQ(hits, per_kind) << "the drop rule counted every frame it dropped";
  EXPECT_EQ(rx_port->stats().rule_drops, per_kind);
  EXPECT_GE(st.default_hits(), per_kind) << "default queue: our frames plus any stray ones";
  EXPECT_EQ(rx_port->stats().kernel_drops, 0u);
  EXPECT_EQ(tx_port->stats().tx_errors, 0u);
}

}  // namespace
