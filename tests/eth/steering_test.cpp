// Flow steering as a pure component: frame parsing, the Toeplitz hash against Microsoft's
// published RSS verification vectors, each match field, priorities, actions, hit
// counters, and rules changed while another thread classifies.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "eth/frame_builder.hpp"
#include "gdaki/eth/steering.hpp"

using namespace gdaki::eth;
using eth_test::build;
using eth_test::frame_spec;
using eth_test::v4;

namespace {

ip_address addr(const char* text) {
  ip_address a{};
  if (inet_pton(AF_INET, text, a.data()) == 1) return a;
  EXPECT_EQ(inet_pton(AF_INET6, text, a.data()), 1) << text;
  return a;
}

frame_fields fields_of(const frame_spec& s) { return parse_frame(build(s)); }

frame_spec udp4(uint16_t sport, uint16_t dport) {
  frame_spec s;
  s.src = v4(10, 0, 0, 1);
  s.dst = v4(10, 0, 0, 2);
  s.src_port = sport;
  s.dst_port = dport;
  return s;
}

flow_rule to_queue(uint32_t q, flow_match m, uint32_t priority = 10) {
  flow_rule r;
  r.priority = priority;
  r.match = m;
  r.action.verb = flow_verb::to_queue;
  r.action.queue = q;
  return r;
}

// One row of the verification suite: destination and source with ports, and the two
// published hashes (addresses only, addresses and ports).
struct rss_vector {
  const char* dst;
  uint16_t dst_port;
  const char* src;
  uint16_t src_port;
  uint32_t ip_only, with_ports;
};

const rss_vector ipv4_vectors[] = {
    {"161.142.100.80", 1766, "66.9.149.187", 2794, 0x323e8fc2, 0x51ccc178},
    {"65.69.140.83", 4739, "199.92.111.2", 14230, 0xd718262a, 0xc626b0ea},
    {"12.22.207.184", 38024, "24.19.198.95", 12898, 0xd2d0a5de, 0x5c2b394a},
    {"209.142.163.6", 2217, "38.27.205.30", 48228, 0x82989176, 0xafc7327f},
    {"202.188.127.2", 1303, "153.39.163.191", 44251, 0x5d1809c5, 0x10e828a2},
};
const rss_vector ipv6_vectors[] = {
    {"3ffe:2501:200:3::1", 1766, "3ffe:2501:200:1fff::7", 2794, 0x2cc18cd5, 0x40207d3d},
    {"ff02::1", 4739, "3ffe:501:8::260:97ff:fe40:efab", 14230, 0x0f0c461c, 0xdde51bbf},
    {"fe80::200:f8ff:fe21:67cf", 38024, "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, 0x4b61e985, 0x02d1feef},
};

// Hashes each vector through the steering table (an RSS rule over 128 queues, so the
// verdict's hash is visible), which also proves the field order the table feeds the hash.
void check_vectors(const rss_vector* v, size_t n, bool ipv6) {
  for (rss_fields which : {rss_fields::ip, rss_fields::ip_and_ports}) {
    steering_table t(4);
    flow_rule r;
    r.action.verb = flow_verb::rss;
    r.action.rss_queues = {0, 1, 2, 3};
    r.action.hash_fields = which;
    uint32_t id;
    ASSERT_EQ(t.add_rule(r, &id), gdaki::status::ok);
    for (size_t i = 0; i < n; ++i) {
      frame_spec s;
      s.ethertype = ipv6 ? ethertype_ipv6 : ethertype_ipv4;
      s.ip_proto = ip_proto_tcp;
      s.src = addr(v[i].src);
      s.dst = addr(v[i].dst);
      s.src_port = v[i].src_port;
      s.dst_port = v[i].dst_port;
      const verdict got = t.classify(fields_of(s));
      const uint32_t want = which == rss_fields::ip ? v[i].ip_only : v[i].with_ports;
      EXPECT_EQ(got.hash, want) << v[i].src << " -> " << v[i].dst << (which == rss_fields::ip ? " (ip)" : " (ports)");
      EXPECT_EQ(got.queue, r.action.rss_queues[(want % rss_table_entries) % 4]) << "indirection table, round-robin";
    }
  }
}

TEST(toeplitz, ipv4_hashes_match_the_microsoft_rss_verification_suite) {
  check_vectors(ipv4_vectors, std::size(ipv4_vectors), false);
}

TEST(toeplitz, ipv6_hashes_match_the_microsoft_rss_verification_suite) {
  check_vectors(ipv6_vectors, std::size(ipv6_vectors), true);
}

TEST(toeplitz, a_different_key_gives_a_different_hash) {
  rss_key other = default_rss_key;
  other[0] ^= 0x80;  // the first key bit weighs on the first input bit
  const std::array<uint8_t, 4> in{0x80, 0, 0, 0};
  EXPECT_NE(toeplitz_hash(default_rss_key, in), toeplitz_hash(other, in));
  EXPECT_EQ(toeplitz_hash(default_rss_key, std::array<uint8_t, 37>{}), 0u) << "input longer than the key allows";
}

TEST(frame_fields, vlan_tag_in_the_bytes_or_stripped_by_the_capture_layer_gives_the_same_vid) {
  frame_spec s = udp4(1, 2);
  s.vlan_id = 0x2064;  // PCP 1, VID 0x064
  const frame_fields tagged = fields_of(s);
  EXPECT_TRUE(tagged.has_vlan);
  EXPECT_EQ(tagged.vlan_id, 0x064);
  EXPECT_EQ(tagged.ethertype, ethertype_ipv4);
  EXPECT_EQ(tagged.dst_port, 2);
  s.vlan_id.reset();
  const frame_fields stripped = parse_frame(build(s), uint16_t{0x2064});
  EXPECT_TRUE(stripped.has_vlan);
  EXPECT_EQ(stripped.vlan_id, 0x064);
  EXPECT_EQ(stripped.dst_port, 2);
}

TEST(frame_fields, a_later_ipv4_fragment_has_no_ports_and_a_truncated_frame_has_no_ip) {
  std::vector<uint8_t> f = build(udp4(7, 9));
  f[14 + 6] = 0x00;
  f[14 + 7] = 0x10;  // fragment offset 16 (x8 bytes)
  const frame_fields frag = parse_frame(f);
  EXPECT_EQ(frag.ip_version, 4);
  EXPECT_FALSE(frag.has_ports);
  const std::vector<uint8_t> whole = build(udp4(7, 9));
  const frame_fields cut = parse_frame(std::span<const uint8_t>(whole.data(), 14 + 19));
  EXPECT_EQ(cut.ethertype, ethertype_ipv4);
  EXPECT_EQ(cut.ip_version, 0);
}

TEST(steering, each_match_field_steers_only_the_frames_it_names) {
  steering_table t(8);
  uint32_t id;
  flow_match by_type;
  by_type.ethertype = masked<uint16_t>{0x88b5};
  flow_match by_vlan;
  by_vlan.vlan_id = masked<uint16_t>{100};
  flow_match by_src;
  by_src.src_ip = ipv4_prefix(192, 168, 7, 0, 24);
  flow_match by_dst6;
  by_dst6.dst_ip = ip_prefix{6, addr("fd00:1::"), 32};
  flow_match by_sport;
  by_sport.ip_proto = ip_proto_tcp;
  by_sport.src_port = masked<uint16_t>{0x1200, 0xff00};
  flow_match by_dport;
  by_dport.ip_proto = ip_proto_udp;
  by_dport.dst_port = masked<uint16_t>{4791};
  ASSERT_EQ(t.add_rule(to_queue(1, by_type), &id), gdaki::status::ok);
  ASSERT_EQ(t.add_rule(to_queue(2, by_vlan), &id), gdaki::status::ok);
  ASSERT_EQ(t.add_rule(to_queue(3, by_src), &id), gdaki::status::ok);
  ASSERT_EQ(t.add_rule(to_queue(4, by_dst6), &id), gdaki::status::ok);
  ASSERT_EQ(t.add_rule(to_queue(5, by_sport), &id), gdaki::status::ok);
  ASSERT_EQ(t.add_rule(to_queue(6, by_dport), &id), gdaki::status::ok);

  frame_spec other;
  other.ethertype = 0x88b5;
  EXPECT_EQ(t.classify(fields_of(other)).queue, 1u);
  other.ethertype = 0x88b6;
  EXPECT_EQ(t.classify(fields_of(other)).queue, 0u);

  frame_spec tagged = udp4(1, 1);
  tagged.vlan_id = 100;
  EXPECT_EQ(t.classify(fields_of(tagged)).queue, 2u);
  tagged.vlan_id = 101;
  EXPECT_EQ(t.classify(fields_of(tagged)).queue, 0u);

  frame_spec src = udp4(1, 1);
  src.src = v4(192, 168, 7, 200);
  EXPECT_EQ(t.classify(fields_of(src)).queue, 3u);
  src.src = v4(192, 168, 8, 1);
  EXPECT_EQ(t.classify(fields_of(src)).queue, 0u);

  frame_spec dst6 = udp4(1, 1);
  dst6.ethertype = ethertype_ipv6;
  dst6.dst = addr("fd00:1:ffff::9");
  EXPECT_EQ(t.classify(fields_of(dst6)).queue, 4u);
  dst6.dst = addr("fd00:2::9");
  EXPECT_EQ(t.classify(fields_of(dst6)).queue, 0u);

  frame_spec tcp = udp4(0x12ab, 1);
  tcp.ip_proto = ip_proto_tcp;
  EXPECT_EQ(t.classify(fields_of(tcp)).queue, 5u);
  tcp.src_port = 0x13ab;
  EXPECT_EQ(t.classify(fields_of(tcp)).queue, 0u);
  tcp.src_port = 0x12ab;
  tcp.ip_proto = ip_proto_udp;  // right port, wrong protocol
  EXPECT_EQ(t.classify(fields_of(tcp)).queue, 0u);

  EXPECT_EQ(t.classify(fields_of(udp4(9, 4791))).queue, 6u);
  EXPECT_EQ(t.classify(fields_of(udp4(9, 4792))).queue, 0u);
}

TEST(steering, lower_priority_value_wins_and_equal_priorities_keep_insertion_order) {
  steering_table t(4);
  flow_match any_udp;
  any_udp.ip_proto = ip_proto_udp;
  flow_match port_53;
  port_53.dst_port = masked<uint16_t>{53};
  uint32_t first, second, urgent;
  ASSERT_EQ(t.add_rule(to_queue(1, any_udp, 10), &first), gdaki::status::ok);
  ASSERT_EQ(t.add_rule(to_queue(2, port_53, 10), &second), gdaki::status::ok);
  EXPECT_EQ(t.classify(fields_of(udp4(1, 53))).rule, first);
  ASSERT_EQ(t.add_rule(to_queue(3, port_53, 5), &urgent), gdaki::status::ok);
  const verdict v = t.classify(fields_of(udp4(1, 53)));
  EXPECT_EQ(v.rule, urgent);
  EXPECT_EQ(v.queue, 3u);
}

TEST(steering, drop_rule_drops_and_unmatched_frames_go_to_the_default_queue_with_hits_counted) {
  steering_table t(4, 3);
  flow_match m;
  m.dst_port = masked<uint16_t>{9};
  flow_rule drop;
  drop.match = m;
  drop.action.verb = flow_verb::drop;
  uint32_t id;
  ASSERT_EQ(t.add_rule(drop, &id), gdaki::status::ok);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(t.classify(fields_of(udp4(1, 9))).drop);
  for (int i = 0; i < 3; ++i) {
    const verdict v = t.classify(fields_of(udp4(1, 10)));
    EXPECT_FALSE(v.drop);
    EXPECT_EQ(v.queue, 3u);
    EXPECT_EQ(v.rule, no_rule);
  }
  uint64_t hits = 0;
  ASSERT_EQ(t.hits(id, &hits), gdaki::status::ok);
  EXPECT_EQ(hits, 5u);
  EXPECT_EQ(t.default_hits(), 3u);
  ASSERT_EQ(t.set_default_queue(1), gdaki::status::ok);
  EXPECT_EQ(t.classify(fields_of(udp4(1, 10))).queue, 1u);
  EXPECT_EQ(t.remove_rule(id), gdaki::status::ok);
  EXPECT_EQ(t.remove_rule(id), gdaki::status::not_found);
  EXPECT_EQ(t.hits(id, &hits), gdaki::status::not_found);
  EXPECT_FALSE(t.classify(fields_of(udp4(1, 9))).drop);
}

TEST(steering, actions_naming_queues_the_port_lacks_are_refused) {
  steering_table t(2);
  uint32_t id = 77;
  EXPECT_EQ(t.add_rule(to_queue(2, {}), &id), gdaki::status::invalid);
  flow_rule rss;
  rss.action.verb = flow_verb::rss;
  EXPECT_EQ(t.add_rule(rss, &id), gdaki::status::invalid) << "empty group";
  rss.action.rss_queues = {0, 5};
  EXPECT_EQ(t.add_rule(rss, &id), gdaki::status::invalid);
  EXPECT_EQ(t.set_default_queue(2), gdaki::status::invalid);
  EXPECT_EQ(id, 77u) << "no id handed out for a refused rule";
}

TEST(steering, rss_spreads_flows_by_hash_and_keeps_each_flow_on_one_queue) {
  steering_table t(8);
  flow_rule r;
  r.match.ip_proto = ip_proto_udp;
  r.action.verb = flow_verb::rss;
  r.action.rss_queues = {2, 3, 4, 5};
  uint32_t id;
  ASSERT_EQ(t.add_rule(r, &id), gdaki::status::ok);
  std::array<int, 8> per_queue{};
  for (uint16_t flow = 0; flow < 400; ++flow) {
    const frame_fields f = fields_of(udp4(static_cast<uint16_t>(1000 + flow), 80));
    const verdict a = t.classify(f), b = t.classify(f);
    ASSERT_EQ(a.queue, b.queue) << "one flow, one queue";
    // The expected queue from the hash of the flow's own bytes.
    std::array<uint8_t, 12> in{10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 80};
    in[8] = static_cast<uint8_t>((1000 + flow) >> 8);
    in[9] = static_cast<uint8_t>(1000 + flow);
    const uint32_t h = toeplitz_hash(default_rss_key, in);
    ASSERT_EQ(a.hash, h);
    ASSERT_EQ(a.queue, r.action.rss_queues[(h % rss_table_entries) % 4]);
    ++per_queue[a.queue];
  }
  for (uint32_t q : r.action.rss_queues) EXPECT_GT(per_queue[q], 50) << "queue " << q << " of 400 flows over 4";
  EXPECT_EQ(per_queue[0] + per_queue[1] + per_queue[6] + per_queue[7], 0);
  rss_key other = default_rss_key;
  other[5] ^= 0xff;
  ASSERT_EQ(t.set_rss_key(other), gdaki::status::ok);
  std::array<uint8_t, 12> in{10, 0, 0, 1, 10, 0, 0, 2, 0x03, 0xe8, 0, 80};
  EXPECT_EQ(t.classify(fields_of(udp4(1000, 80))).hash, toeplitz_hash(other, in)) << "the new key is used";
}

// A classifier thread runs while a writer adds and removes rules. A frame that matches a
// rule in force for the whole classify call must get that rule's queue; the permanent
// rule must get every one of its frames and count every hit.
TEST(steering, rules_changed_while_another_thread_classifies_lose_nothing_that_matched_a_rule_in_force) {
  steering_table t(4);
  flow_match permanent_match;
  permanent_match.dst_port = masked<uint16_t>{1000};
  uint32_t permanent;
  ASSERT_EQ(t.add_rule(to_queue(1, permanent_match, 20), &permanent), gdaki::status::ok);
  flow_match toggled_match;
  toggled_match.dst_port = masked<uint16_t>{2000};
  flow_match churn_match;
  churn_match.dst_port = masked<uint16_t>{3000};

  // epoch odd: the toggled rule is installed (set after add_rule returned, cleared before
  // remove_rule is called), so a classify bracketed by one odd epoch ran with it in force.
  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> rounds{0};  // classifier loop iterations, so the writer can wait for some
  constexpr int changes = 500;
  std::thread writer([&] {
    for (int i = 0; i < changes; ++i) {
      uint32_t toggled, churn;
      EXPECT_EQ(t.add_rule(to_queue(2, toggled_match, 10), &toggled), gdaki::status::ok);
      epoch.fetch_add(1, std::memory_order_seq_cst);
      // Unrelated rules come and go around it (higher and lower priority), republishing
      // the list while the toggled and permanent rules stay in force.
      EXPECT_EQ(t.add_rule(to_queue(3, churn_match, static_cast<uint32_t>(i % 2 == 0 ? 5 : 30)), &churn),
                gdaki::status::ok);
      // Let the classifier run inside the window (on a loaded 2-core machine it might
      // otherwise never be scheduled there).
      const uint64_t mark = rounds.load();
      for (int spin = 0; spin < 100000 && rounds.load() < mark + 2; ++spin) std::this_thread::yield();
      EXPECT_EQ(t.remove_rule(churn), gdaki::status::ok);
      epoch.fetch_add(1, std::memory_order_seq_cst);
      EXPECT_EQ(t.remove_rule(toggled), gdaki::status::ok);
    }
    stop.store(true);
  });

  const frame_fields p = fields_of(udp4(5, 1000)), q = fields_of(udp4(5, 2000));
  uint64_t permanent_seen = 0, in_force_checked = 0, defaults = 0;
  uint64_t errors = 0;
  while (!stop.load()) {
    const verdict a = t.classify(p);
    if (a.queue != 1 || a.rule != permanent) ++errors;
    ++permanent_seen;
    const uint64_t before = epoch.load(std::memory_order_seq_cst);
    const verdict b = t.classify(q);
    const uint64_t after = epoch.load(std::memory_order_seq_cst);
    if (before == after && (before & 1) == 1) {
      ++in_force_checked;
      if (b.queue != 2) ++errors;
    } else if (b.queue != 2 && b.queue != 0) {
      ++errors;
    }
    if (b.rule == no_rule) ++defaults;
    rounds.fetch_add(1);
  }
  writer.join();
  EXPECT_EQ(errors, 0u);
  EXPECT_GT(in_force_checked, 0u) << "the test must have classified while the rule was in force";
  uint64_t hits = 0;
  ASSERT_EQ(t.hits(permanent, &hits), gdaki::status::ok);
  EXPECT_EQ(hits, permanent_seen) << "every hit of a rule in force is counted across republished lists";
  EXPECT_EQ(t.default_hits(), defaults);
}

}  // namespace
