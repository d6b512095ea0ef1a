// The soft Ethernet port under load between two network namespaces: a large frame count
// with none lost while the receiver keeps up, exact drop accounting when it does not, and
// rules changed under traffic losing nothing that matched a rule in force.
#include <cstdlib>

#include "eth/frame_collector.hpp"

using namespace eth_test;
namespace {

// GDAKI_ETH_LOAD_FRAMES overrides the frame count of the load test (default 1,000,000).
uint64_t load_frames() {
  const char* v = std::getenv("GDAKI_ETH_LOAD_FRAMES");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : 1'000'000;
}

geth::flow_rule udp_port_to(uint16_t port, uint32_t q, uint32_t priority = 10) {
  geth::flow_rule r;
  r.priority = priority;
  r.match.ip_proto = geth::ip_proto_udp;
  r.match.dst_port = geth::masked<uint16_t>{port};
  r.action.queue = q;
  return r;
}

TEST_F(eth_netns, a_million_frames_arrive_once_each_with_none_lost_while_the_receiver_keeps_up) {
  geth::port_config rx;
  rx.rx_queues = 2;
  open_ports(rx);
  if (IsSkipped() || HasFatalFailure()) return;
  uint32_t id = 0;
  ASSERT_EQ(rx_port->steering().add_rule(udp_port_to(5001, 1), &id), gdaki::status::ok);
  const uint64_t n = load_frames();
  frame_collector c(*rx_port, 2, udp(1, 5001), 1, n);
  c.start();
  paced_sender s(tx_port->txq(), c, udp(1, 5001), 0, 1024);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(s.send(n)) << "the receiver stalled after " << c.received(0) << " frames";
  ASSERT_TRUE(c.wait_for(0, n)) << c.received(0) << " of " << n;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.stop();
  uint64_t missing = 0, misplaced = 0;
  for (uint64_t seq = 0; seq < n; ++seq) {
    missing += c.landed(0, seq) == frame_collector::nowhere;
    misplaced += c.landed(0, seq) != frame_collector::nowhere && c.landed(0, seq) != 1;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(misplaced, 0u);
  EXPECT_EQ(c.duplicates(), 0u);
  const geth::port_stats st = rx_port->stats();
  EXPECT_EQ(st.kernel_drops, 0u);
  EXPECT_EQ(st.queue_full_drops, 0u);
  uint64_t hits = 0;
  ASSERT_EQ(rx_port->steering().hits(id, &hits), gdaki::status::ok);
  EXPECT_EQ(hits, n);
  std::printf("[ info ] %llu frames of 64 B in %.2f s (%.0f frames/s, paced by the receiver)\n",
              static_cast<unsigned long long>(n), secs, static_cast<double>(n) / secs);
}

TEST_F(eth_netns, a_receiver_that_does_not_keep_up_sees_its_queue_fill_and_every_other_frame_counted_as_dropped) {
  geth::port_config rx;
  rx.rx_queues = 2;
  rx.rx_slots = 1024;
  open_ports(rx);
  if (IsSkipped() || HasFatalFailure()) return;
  uint32_t id = 0;
  ASSERT_EQ(rx_port->steering().add_rule(udp_port_to(5001, 1), &id), gdaki::status::ok);
  constexpr uint64_t n = 5000;
  frame_pool pool;
  for (uint64_t seq = 0; seq < n; ++seq) pool.add(udp(1, 5001), 0, seq);
  // Nobody receives from queue 1 while this runs. Pace on what the port took off the
  // kernel's ring, so the kernel never has to drop: every loss is the queue's.
  const uint64_t base = rx_port->stats().frames_seen;
  uint64_t last = 0;
  for (uint64_t i = 0; i < n; ++i) {
    last = send(pool, i, (i + 1) % 64 == 0 || i + 1 == n);
    if ((i + 1) % 256 == 0) {
      ASSERT_TRUE(wait_seen(base + i + 1));
    }
  }
  ASSERT_TRUE(wait_seen(base + n));
  settle(last);
  dev::eth_rxq_handle& q = rx_port->rxq(1);
  const geth::port_stats st = rx_port->stats();
  EXPECT_EQ(st.kernel_drops, 0u);
  EXPECT_EQ(dev::arch::load_acquire(&q.produced), 1024u) << "the queue holds as many frames as it has slots";
  EXPECT_EQ(dev::arch::load_acquire(&q.dropped_full), n - 1024) << "every other frame is counted as dropped";
  uint64_t hits = 0;
  ASSERT_EQ(rx_port->steering().hits(id, &hits), gdaki::status::ok);
  EXPECT_EQ(hits, n) << "the rule matched them all; the queue had no room";
  // What was kept is the first 1024 frames, in order.
  uint64_t first = 0;
  uint32_t got = 0;
  ASSERT_EQ(dev::eth_rxq_receive(q, 1024, 0, &first, &got), gdaki::status::ok);
  ASSERT_EQ(got, 1024u);
  for (uint32_t i = 0; i < got; ++i) {
    uint32_t bytes = 0;
    frame_tag t{};
    const uint8_t* f = dev::eth_rxq_frame(q, first + i, &bytes);
    ASSERT_TRUE(read_tag(f, bytes, udp(1, 5001), &t)) << "frame " << i;
    ASSERT_EQ(t.seq, i);
  }
  ASSERT_EQ(dev::eth_rxq_release(q, first, got), gdaki::status::ok);
  // Once released, the queue takes frames again.
  pool.add(udp(1, 5001), 0, n);
  settle(send(pool, n, true));
  ASSERT_TRUE(wait_seen(base + n + 1));
  ASSERT_EQ(dev::eth_rxq_receive(q, 1, 1'000'000'000, &first, &got), gdaki::status::ok);
  EXPECT_EQ(got, 1u);
}

// kinds of the rules-under-traffic test
enum change_kind : uint32_t { permanent, while_in_force, while_removed, unsynchronised, change_kinds };

TEST_F(eth_netns, rules_changed_under_traffic_lose_nothing_that_matched_a_rule_in_force) {
  geth::port_config rx;
  rx.rx_queues = 4;
  open_ports(rx);
  if (IsSkipped() || HasFatalFailure()) return;
  geth::steering_table& st = rx_port->steering();
  uint32_t permanent_id = 0;
  ASSERT_EQ(st.add_rule(udp_port_to(5001, 1), &permanent_id), gdaki::status::ok);
  constexpr uint64_t max_seq = 1'000'000;
  frame_collector c(*rx_port, 4, udp(1, 5001), change_kinds, max_seq);
  c.start();
  // Two threads keep frames flowing all along: one matching the permanent rule, one
  // matching the toggled rule (port 5002) with no regard to when it changes.
  std::atomic<bool> stop{false};
  paced_sender steady(tx_port->txq(), c, udp(1, 5001), permanent, 256);
  paced_sender racing(tx_port->txq(), c, udp(2, 5002), unsynchronised, 256);
  bool steady_ok = true, racing_ok = true;
  std::thread t1([&] { steady_ok = steady.send(max_seq, &stop); });
  std::thread t2([&] { racing_ok = racing.send(max_seq, &stop); });

  // The main thread toggles the rule for port 5002 (queue 2; default queue 0 otherwise)
  // and, between changes, sends a batch it knows the state for, waiting until the batch
  // arrived before the next change. A higher-priority rule for another port comes and goes
  // as well, republishing the list while the toggled rule is in force.
  frame_pool pool;
  uint64_t in_force_sent = 0, removed_sent = 0, last = 0;
  constexpr int rounds = 40;
  constexpr uint32_t batch = 32;
  for (int r = 0; r < rounds && !HasFatalFailure(); ++r) {
    uint32_t toggled = 0, churn = 0;
    ASSERT_EQ(st.add_rule(udp_port_to(5002, 2), &toggled), gdaki::status::ok);
    ASSERT_EQ(st.add_rule(udp_port_to(5003, 3, 1), &churn), gdaki::status::ok);
    for (uint32_t i = 0; i < batch; ++i) {
      last = send(pool, pool.add(udp(3, 5002), while_in_force, in_force_sent++), i + 1 == batch);
    }
    ASSERT_EQ(st.remove_rule(churn), gdaki::status::ok);
    ASSERT_TRUE(c.wait_for(while_in_force, in_force_sent)) << "round " << r;
    ASSERT_EQ(st.remove_rule(toggled), gdaki::status::ok);
    for (uint32_t i = 0; i < batch; ++i) {
      last = send(pool, pool.add(udp(3, 5002), while_removed, removed_sent++), i + 1 == batch);
    }
    ASSERT_TRUE(c.wait_for(while_removed, removed_sent)) << "round " << r;
  }
  stop.store(true);
  t1.join();
  t2.join();
  settle(last);
  ASSERT_TRUE(steady_ok && racing_ok) << "a sender stalled: frames were lost";
  ASSERT_TRUE(c.wait_for(permanent, steady.sent()));
  ASSERT_TRUE(c.wait_for(unsynchronised, racing.sent()));
  c.stop();
  const auto count_not_in = [&](uint32_t kind, uint64_t n, uint8_t qa, uint8_t qb) {
    uint64_t bad = 0;
    for (uint64_t seq = 0; seq < n; ++seq) bad += c.landed(kind, seq) != qa && c.landed(kind, seq) != qb;
    return bad;
  };
  EXPECT_GT(steady.sent(), 0u);
  EXPECT_EQ(count_not_in(permanent, steady.sent(), 1, 1), 0u) << "permanent rule: every frame in queue 1";
  EXPECT_EQ(count_not_in(while_in_force, in_force_sent, 2, 2), 0u) << "sent while the rule was in force";
  EXPECT_EQ(count_not_in(while_removed, removed_sent, 0, 0), 0u) << "sent while removed: the default queue";
  EXPECT_EQ(count_not_in(unsynchronised, racing.sent(), 0, 2), 0u) << "racing the changes: one of the two, never lost";
  EXPECT_EQ(c.duplicates(), 0u);
  uint64_t hits = 0;
  ASSERT_EQ(st.hits(permanent_id, &hits), gdaki::status::ok);
  EXPECT_EQ(hits, steady.sent());
  EXPECT_EQ(rx_port->stats().kernel_drops, 0u);
  EXPECT_EQ(rx_port->stats().queue_full_drops, 0u);
  std::printf("[ info ] during %d rule changes: %llu frames on the permanent rule, %llu racing the toggled one\n",
              4 * rounds, static_cast<unsigned long long>(steady.sent()), static_cast<unsigned long long>(racing.sent()));
}

}  // namespace
