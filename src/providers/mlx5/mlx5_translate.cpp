#include "mlx5_translate.hpp"

#include <cstdio>
#include <iterator>

namespace gdaki::mlx5 {

namespace {

// IBV_ACCESS_* values (verbs.h, enum ibv_access_flags). The first four coincide with
// gdaki's flags by design; the translation is still explicit so that either side may move.
constexpr uint32_t ibv_local_write = 1;
constexpr uint32_t ibv_remote_write = 2;
constexpr uint32_t ibv_remote_read = 4;
constexpr uint32_t ibv_remote_atomic = 8;

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

}  // namespace

// ---- access flags ------------------------------------------------------------------------

checked<uint32_t> to_ibv_access(uint32_t f) {
  using namespace access_bits;
  if ((f & ~all) != 0) {
    return checked<uint32_t>::fail(status::invalid,
                                   "unknown access flag bits " + hex(f & ~all) +
                                       " (known: local_write 1, remote_write 2, remote_read 4, "
                                       "remote_atomic 8)");
  }
  if ((f & (remote_write | remote_atomic)) != 0 && (f & local_write) == 0) {
    return checked<uint32_t>::fail(
        status::invalid, std::string((f & remote_write) != 0 ? "remote_write" : "remote_atomic") +
                             " requires local_write (ibv_reg_mr(3))");
  }
  uint32_t out = 0;
  if ((f & local_write) != 0) out |= ibv_local_write;
  if ((f & remote_write) != 0) out |= ibv_remote_write;
  if ((f & remote_read) != 0) out |= ibv_remote_read;
  if ((f & remote_atomic) != 0) out |= ibv_remote_atomic;
  return checked<uint32_t>::ok(out);
}

checked<uint32_t> from_ibv_access(uint32_t f) {
  constexpr uint32_t known = ibv_local_write | ibv_remote_write | ibv_remote_read | ibv_remote_atomic;
  if ((f & ~known) != 0) {
    return checked<uint32_t>::fail(status::not_supported,
                                   "IBV_ACCESS bits " + hex(f & ~known) +
                                       " have no gdaki equivalent (only LOCAL_WRITE, "
                                       "REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC are modelled)");
  }
  uint32_t out = 0;
  if ((f & ibv_local_write) != 0) out |= access_bits::local_write;
  if ((f & ibv_remote_write) != 0) out |= access_bits::remote_write;
  if ((f & ibv_remote_read) != 0) out |= access_bits::remote_read;
  if ((f & ibv_remote_atomic) != 0) out |= access_bits::remote_atomic;
  return checked<uint32_t>::ok(out);
}

// ---- MTU ---------------------------------------------------------------------------------

checked<uint32_t> mtu_to_ibv(uint32_t bytes) {
  // enum ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5, i.e. log2(bytes) - 7.
  for (uint32_t e = 1; e <= 5; ++e) {
    if (bytes == (128u << e)) return checked<uint32_t>::ok(e);
  }
  return checked<uint32_t>::fail(status::invalid, "MTU " + std::to_string(bytes) +
                                                      " is not one of 256, 512, 1024, 2048, 4096");
}

checked<uint32_t> mtu_from_ibv(uint32_t e) {
  if (e < 1 || e > 5) {
    return checked<uint32_t>::fail(status::invalid,
                                   "ibv_mtu " + std::to_string(e) + " is not in 1..5 (256..4096)");
  }
  return checked<uint32_t>::ok(128u << e);
}

// ---- link layer and addressing -----------------------------------------------------------

checked<link_kind> link_from_ibv(uint8_t l) {
  switch (l) {
    case 0:  // IBV_LINK_LAYER_UNSPECIFIED: old kernels report it for InfiniBand ports
    case 1: return checked<link_kind>::ok(link_kind::infiniband);
    case 2: return checked<link_kind>::ok(link_kind::ethernet);
    default: break;
  }
  return checked<link_kind>::fail(status::not_supported,
                                  "link layer " + std::to_string(l) + " is neither InfiniBand nor Ethernet");
}

bool gid_is_zero(const std::array<uint8_t, 16>& gid) {
  for (uint8_t b : gid) {
    if (b != 0) return false;
  }
  return true;
}

bool gid_is_ipv4_mapped(const std::array<uint8_t, 16>& gid) {
  // ::ffff:a.b.c.d (RFC 4291 2.5.5.2): how RoCE v2 carries an IPv4 address in a GID.
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff;
}

bool gid_is_ipv6_link_local(const std::array<uint8_t, 16>& gid) {
  return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;  // fe80::/10
}

checked<address_vector> make_address_vector(link_kind link, const peer_address& peer,
                                            uint8_t port_num, uint8_t sgid_index, uint8_t sl,
                                            uint8_t traffic_class) {
  address_vector av;
  av.port_num = port_num;
  av.sl = sl;
  if (port_num == 0) {
    return checked<address_vector>::fail(status::invalid, "port numbers start at 1");
  }
  if (link == link_kind::infiniband && !peer.force_global) {
    if (peer.lid == 0) {
      return checked<address_vector>::fail(status::invalid,
                                           "InfiniBand LID routing needs the peer's LID (got 0: "
                                           "is the peer port active and the subnet manager running?)");
    }
    av.dlid = peer.lid;
    return checked<address_vector>::ok(av);
  }
  if (gid_is_zero(peer.gid)) {
    return checked<address_vector>::fail(
        status::invalid, link == link_kind::ethernet
                             ? "RoCE has no LIDs: the peer's GID is required (got all zeros)"
                             : "GRH routing needs the peer's GID (got all zeros)");
  }
  av.is_global = true;
  av.dlid = link == link_kind::infiniband ? peer.lid : 0;
  av.sgid_index = sgid_index;
  // RoCE v2 packets are IP packets: a hop limit of 1 would not cross a router.
  av.hop_limit = 64;
  av.traffic_class = traffic_class;
  av.dgid = peer.gid;
  return checked<address_vector>::ok(av);
}

// ---- GID selection -----------------------------------------------------------------------

checked<gid_type> gid_type_from_ibv(uint32_t t) {
  switch (t) {
    case 0: return checked<gid_type>::ok(gid_type::ib);
    case 1: return checked<gid_type>::ok(gid_type::roce_v1);
    case 2: return checked<gid_type>::ok(gid_type::roce_v2);
    default: break;
  }
  return checked<gid_type>::fail(status::not_supported, "GID type " + std::to_string(t) + " is unknown");
}

checked<uint32_t> select_gid_index(link_kind link, std::span<const gid_entry> table,
                                   gid_family policy) {
  if (link == link_kind::infiniband) {
    // LID routing needs no GID, and a GRH (force_global) uses the port GID, index 0.
    return checked<uint32_t>::ok(0);
  }
  // Ranks: lower is better; a family the policy excludes is never chosen.
  auto rank = [policy](const gid_entry& e) -> int {
    if (e.type != gid_type::roce_v2 || gid_is_zero(e.gid)) return -1;
    const bool v4 = gid_is_ipv4_mapped(e.gid);
    const bool ll = !v4 && gid_is_ipv6_link_local(e.gid);
    switch (policy) {
      case gid_family::ipv4_only: return v4 ? 0 : -1;
      case gid_family::ipv6_only: return v4 ? -1 : (ll ? 1 : 0);
      case gid_family::ipv4_preferred: return v4 ? 0 : (ll ? 2 : 1);
      case gid_family::ipv6_preferred: return v4 ? 2 : (ll ? 1 : 0);
    }
    return -1;
  };
  const gid_entry* best = nullptr;
  int best_rank = 0;
  size_t v1 = 0, v2 = 0, empty = 0;
  for (const auto& e : table) {
    if (gid_is_zero(e.gid)) {
      ++empty;
      continue;
    }
    v1 += e.type == gid_type::roce_v1 ? 1 : 0;
    v2 += e.type == gid_type::roce_v2 ? 1 : 0;
    const int r = rank(e);
    if (r < 0) continue;
    if (best == nullptr || r < best_rank || (r == best_rank && e.index < best->index)) {
      best = &e;
      best_rank = r;
    }
  }
  if (best != nullptr) return checked<uint32_t>::ok(best->index);
  const char* want = policy == gid_family::ipv4_only     ? "an IPv4-mapped RoCE v2 GID"
                     : policy == gid_family::ipv6_only ? "an IPv6 RoCE v2 GID"
                                                       : "a RoCE v2 GID";
  return checked<uint32_t>::fail(
      status::not_found, std::string("no GID qualifies: wanted ") + want + "; the table has " +
                             std::to_string(table.size()) + " entries (" + std::to_string(v2) +
                             " RoCE v2, " + std::to_string(v1) + " RoCE v1, " +
                             std::to_string(empty) +
                             " empty); give the netdev an IP address or pick an index explicitly");
}

// ---- timers and retries ------------------------------------------------------------------

checked<uint8_t> timeout_from_usec(uint64_t usec) {
  if (usec == 0) return checked<uint8_t>::ok(0);
  // 4.096 us * 2^t >= usec  <=>  4096 << t >= usec * 1000, in integer nanoseconds.
  const unsigned __int128 want_ns = static_cast<unsigned __int128>(usec) * 1000;
  for (uint8_t t = 1; t <= 31; ++t) {
    if ((static_cast<unsigned __int128>(4096) << t) >= want_ns) return checked<uint8_t>::ok(t);
  }
  return checked<uint8_t>::fail(status::invalid,
                                "ACK timeout " + std::to_string(usec) +
                                    " us exceeds the longest encodable one (4.096 us * 2^31, about "
                                    "8796 s); use 0 for no timeout");
}

checked<std::optional<double>> timeout_to_usec(uint8_t t) {
  if (t > 31) {
    return checked<std::optional<double>>::fail(status::invalid,
                                                "timeout exponent " + std::to_string(t) + " is not in 0..31");
  }
  if (t == 0) return checked<std::optional<double>>::ok(std::nullopt);
  return checked<std::optional<double>>::ok(4.096 * static_cast<double>(uint64_t{1} << t));
}

namespace {
// IBA Vol 1 table 45 (RNR NAK timer field), in microseconds, indexed by code.
constexpr uint32_t rnr_timer_usec[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
}  // namespace

checked<uint8_t> min_rnr_timer_from_usec(uint32_t usec) {
  // Codes 1..31 increase with the delay; code 0 is the longest of all.
  for (uint8_t c = 1; c <= 31; ++c) {
    if (rnr_timer_usec[c] >= usec) return checked<uint8_t>::ok(c);
  }
  if (usec <= rnr_timer_usec[0]) return checked<uint8_t>::ok(0);
  return checked<uint8_t>::fail(status::invalid, "RNR timer " + std::to_string(usec) +
                                                     " us exceeds the longest encodable one (655.36 ms)");
}

checked<uint32_t> min_rnr_timer_to_usec(uint8_t code) {
  if (code > 31) {
    return checked<uint32_t>::fail(status::invalid,
                                   "min_rnr_timer code " + std::to_string(code) + " is not in 0..31");
  }
  return checked<uint32_t>::ok(rnr_timer_usec[code]);
}

checked<uint8_t> check_retry_cnt(uint32_t n) {
  if (n > 7) {
    return checked<uint8_t>::fail(status::invalid, "retry_cnt " + std::to_string(n) +
                                                       " is not in 0..7 (a 3-bit field)");
  }
  return checked<uint8_t>::ok(static_cast<uint8_t>(n));
}

checked<uint8_t> check_rnr_retry(uint32_t n) {
  if (n > 7) {
    return checked<uint8_t>::fail(status::invalid, "rnr_retry " + std::to_string(n) +
                                                       " is not in 0..7 (7 = retry forever)");
  }
  return checked<uint8_t>::ok(static_cast<uint8_t>(n));
}

// ---- completion status -------------------------------------------------------------------

uint32_t wc_status_from_syndrome(uint8_t syndrome) {
  // Values of enum ibv_wc_status.
  switch (syndrome) {
    case 0x00: return 0;   // SUCCESS
    case 0x01: return 1;   // LOC_LEN_ERR
    case 0x02: return 2;   // LOC_QP_OP_ERR
    case 0x04: return 4;   // LOC_PROT_ERR
    case 0x05: return 5;   // WR_FLUSH_ERR
    case 0x06: return 6;   // MW_BIND_ERR
    case 0x10: return 7;   // BAD_RESP_ERR
    case 0x11: return 8;   // LOC_ACCESS_ERR
    case 0x12: return 9;   // REM_INV_REQ_ERR
    case 0x13: return 10;  // REM_ACCESS_ERR
    case 0x14: return 11;  // REM_OP_ERR
    case 0x15: return 12;  // RETRY_EXC_ERR
    case 0x16: return 13;  // RNR_RETRY_EXC_ERR
    case 0x22: return 16;  // REM_ABORT_ERR
    default: return 21;    // GENERAL_ERR
  }
}

const char* wc_status_name(uint32_t s) {
  static constexpr const char* names[] = {
      "IBV_WC_SUCCESS",           "IBV_WC_LOC_LEN_ERR",       "IBV_WC_LOC_QP_OP_ERR",
      "IBV_WC_LOC_EEC_OP_ERR",    "IBV_WC_LOC_PROT_ERR",      "IBV_WC_WR_FLUSH_ERR",
      "IBV_WC_MW_BIND_ERR",       "IBV_WC_BAD_RESP_ERR",      "IBV_WC_LOC_ACCESS_ERR",
      "IBV_WC_REM_INV_REQ_ERR",   "IBV_WC_REM_ACCESS_ERR",    "IBV_WC_REM_OP_ERR",
      "IBV_WC_RETRY_EXC_ERR",     "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",
      "IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR",    "IBV_WC_INV_EECN_ERR",
      "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",         "IBV_WC_RESP_TIMEOUT_ERR",
      "IBV_WC_GENERAL_ERR",       "IBV_WC_TM_ERR",            "IBV_WC_TM_RNDV_INCOMPLETE"};
  return s < std::size(names) ? names[s] : "IBV_WC_<unknown>";
}

}  // namespace gdaki::mlx5
