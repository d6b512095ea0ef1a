// internal: the mlx5 provider's raw-packet Ethernet queues (docs/mlx5.md, "Raw-packet
// Ethernet queues"): one send queue and one or more receive queues, with the objects the
// NIC needs around them, all DEVX objects built from mlx5_prm_eth's mailboxes:
//
//   transport domain -> TIS -> send CQ -> SQ (RST -> RDY)
//   per receive queue: receive CQ -> RQ (RST -> RDY)
//   one RQ: a direct TIR; several: an RQ table and an RSS TIR (Toeplitz, 40-byte key)
//   a NIC RX flow table, and per rule: a flow group (its mask), an optional flow counter,
//   and an entry forwarding to the TIR or dropping.
//
// Rings and doorbell records live in memory gdaki places (dev_memory) and are registered
// as umems; destroy releases everything in the reverse order. Any failed command names
// the object, the command and the firmware's status and syndrome.
//
// Not reachable from the public API yet: the device Ethernet API (device/eth.hpp) drives
// the soft NIC's queues only, and no verbs slot creates these (docs/mlx5.md says so).
// Tested against the fake rdma-core only (tests/mlx5/mlx5_eth_fake_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlx5_objects.hpp"
#include "mlx5_prm_eth.hpp"

namespace gdaki::mlx5 {

// One steering rule: packets matching `match` (value under mask, outer headers) go to the
// queues' TIR, or are dropped; `count` attaches a flow counter.
struct eth_rule {
  prm_cmd::match_spec match;
  bool drop = false;
  bool count = false;
};

struct eth_queues_init {
  uint32_t sq_wqebbs = 256;       // rounded up to a power of two
  uint32_t rq_wqes = 256;         // per receive queue; rounded up to a power of two
  uint32_t rq_sges = 1;           // data segments per receive WQE (stride 16 * sges, >= 16)
  uint32_t rx_queues = 1;         // 1: direct TIR; more: RQ table + RSS TIR
  verbs::placement sq_ring{};     // where the send ring lives (its doorbell record beside it)
  verbs::placement rq_ring{};     // kind for the receive rings (provider-allocated each)
  prm_cmd::inline_mode min_inline = prm_cmd::inline_mode::l2;
  // RSS (rx_queues > 1): the Toeplitz key and which outer fields are hashed.
  std::array<uint8_t, prm_cmd::toeplitz_key_bytes> rss_key{};
  bool rss_ipv6 = false, rss_udp = false;
  uint32_t rss_fields = prm_cmd::hash_field::src_ip | prm_cmd::hash_field::dst_ip;
  std::vector<eth_rule> rules;    // installed in order, flow index 0, 1, ...
  uint8_t table_level = 1;        // flow_table_context.level (see docs: not hooked to the root)
};

struct eth_rq {
  provider_object* cq = nullptr;  // a cq_obj from create_cq
  dev_memory ring, dbr;
  mlx5dv_devx_umem* ring_umem = nullptr;
  mlx5dv_devx_umem* dbr_umem = nullptr;
  mlx5dv_devx_obj* obj = nullptr;
  uint32_t rqn = 0;
};

struct eth_flow {
  mlx5dv_devx_obj* group = nullptr;
  mlx5dv_devx_obj* counter = nullptr;
  mlx5dv_devx_obj* entry = nullptr;
  uint32_t group_id = 0, counter_id = 0;
};

struct eth_queues {
  pd_obj* pd = nullptr;
  mlx5dv_devx_obj* td = nullptr;
  mlx5dv_devx_obj* tis = nullptr;
  provider_object* scq = nullptr;
  dev_memory sq_ring, sq_dbr;
  mlx5dv_devx_umem* sq_ring_umem = nullptr;
  mlx5dv_devx_umem* sq_dbr_umem = nullptr;
  mlx5dv_devx_uar* uar = nullptr;
  mlx5dv_devx_obj* sq = nullptr;
  std::vector<std::unique_ptr<eth_rq>> rqs;
  mlx5dv_devx_obj* rqt = nullptr;
  mlx5dv_devx_obj* tir = nullptr;
  mlx5dv_devx_obj* table = nullptr;
  std::vector<eth_flow> flows;
  uint32_t tdn = 0, tisn = 0, sqn = 0, rqtn = 0, tirn = 0, table_id = 0;
  uint32_t log_sq = 0, log_rq = 0, log_rq_stride = 0;
};

// Creates the queues on `pd` (a pd_obj of a DEVX-capable device). On failure nothing is
// left behind and *why names the object and the cause.
status create_eth_queues(provider_object* pd, const eth_queues_init& in, eth_queues** out, std::string* why);
// Destroys everything create_eth_queues made, in the reverse order.
void destroy_eth_queues(eth_queues* q);

}  // namespace gdaki::mlx5
