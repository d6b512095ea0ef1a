// internal: pure translations between gdaki's control-path attributes and rdma-core's
// (verbs.h) encodings, plus the validation rules that go with them. No rdma-core header is
// included: the numeric values below are rdma-core's stable ABI, written out so that the
// tests can check them against the real IBV_* constants instead of against themselves.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "gdaki/status.hpp"

namespace gdaki::mlx5 {

// A translated value, or the status and a sentence saying why it could not be translated.
template <class T>
struct checked {
  T value{};
  status code = status::ok;
  std::string reason;  // empty when code == ok

  explicit operator bool() const { return code == status::ok; }
  static checked ok(T v) { return checked{v, status::ok, {}}; }
  static checked fail(status s, std::string why) { return checked{T{}, s, std::move(why)}; }
};

// ---- access flags ------------------------------------------------------------------------
// gdaki's flags (gdaki/verbs/mr.hpp): local_write 1, remote_write 2, remote_read 4,
// remote_atomic 8.
namespace access_bits {
inline constexpr uint32_t local_write = 1;
inline constexpr uint32_t remote_write = 2;
inline constexpr uint32_t remote_read = 4;
inline constexpr uint32_t remote_atomic = 8;
inline constexpr uint32_t all = 15;
}  // namespace access_bits

// gdaki access flags -> IBV_ACCESS_*. invalid: unknown bits, or REMOTE_WRITE / REMOTE_ATOMIC
// without LOCAL_WRITE (ibv_reg_mr(3) rejects those; failing here names the cause).
checked<uint32_t> to_ibv_access(uint32_t gdaki_flags);
// IBV_ACCESS_* -> gdaki flags. not_supported: bits gdaki does not model (MW_BIND,
// ZERO_BASED, ON_DEMAND, ...), named in the reason.
checked<uint32_t> from_ibv_access(uint32_t ibv_flags);

// ---- MTU ---------------------------------------------------------------------------------
// Bytes (256, 512, 1024, 2048, 4096) -> enum ibv_mtu (1..5); anything else is invalid.
checked<uint32_t> mtu_to_ibv(uint32_t bytes);
// enum ibv_mtu (1..5) -> bytes; anything else is invalid.
checked<uint32_t> mtu_from_ibv(uint32_t ibv_mtu);

// ---- link layer and addressing -----------------------------------------------------------
enum class link_kind : uint8_t { infiniband, ethernet };
// IBV_LINK_LAYER_* -> link_kind. UNSPECIFIED (0) is InfiniBand, as rdma-core treats it.
checked<link_kind> link_from_ibv(uint8_t ibv_link_layer);

// The address vector fields a connected QP needs for INIT->RTR (they map 1:1 onto
// struct ibv_ah_attr / ibv_global_route).
struct address_vector {
  bool is_global = false;  // a GRH is sent (always on Ethernet: RoCE has no LIDs)
  uint16_t dlid = 0;       // InfiniBand only
  uint8_t sl = 0;
  uint8_t port_num = 1;
  uint8_t sgid_index = 0;  // is_global only
  uint8_t hop_limit = 0;   // is_global only
  uint8_t traffic_class = 0;
  std::array<uint8_t, 16> dgid{};
};

struct peer_address {
  uint16_t lid = 0;               // the peer port's LID (InfiniBand)
  std::array<uint8_t, 16> gid{};  // the peer's GID (Ethernet, or IB across subnets)
  bool force_global = false;      // IB only: route with a GRH even inside the subnet
};

// Builds the address vector for `link`. InfiniBand: LID routing (dlid = peer LID; a LID of
// 0 is invalid) unless force_global. Ethernet: GID routing with `sgid_index` (RoCE v2 needs
// a routable hop limit; 64 is used) and the peer's GID (all-zero is invalid).
checked<address_vector> make_address_vector(link_kind link, const peer_address& peer,
                                            uint8_t port_num, uint8_t sgid_index, uint8_t sl = 0,
                                            uint8_t traffic_class = 0);

// ---- GID selection -----------------------------------------------------------------------
enum class gid_type : uint8_t { ib = 0, roce_v1 = 1, roce_v2 = 2 };  // enum ibv_gid_type
checked<gid_type> gid_type_from_ibv(uint32_t ibv_gid_type);

struct gid_entry {
  uint32_t index = 0;
  std::array<uint8_t, 16> gid{};
  gid_type type = gid_type::ib;
};

enum class gid_family {
  ipv4_preferred,  // RoCE v2 IPv4-mapped (::ffff:a.b.c.d), else a RoCE v2 IPv6 GID
  ipv4_only,
  ipv6_preferred,  // RoCE v2 IPv6 (global before link-local), else IPv4-mapped
  ipv6_only,
};

bool gid_is_zero(const std::array<uint8_t, 16>& gid);
bool gid_is_ipv4_mapped(const std::array<uint8_t, 16>& gid);
bool gid_is_ipv6_link_local(const std::array<uint8_t, 16>& gid);

// Chooses the source GID index on a port. InfiniBand: index 0 (LID routing needs no GID
// choice; index 0 holds the port GID). Ethernet: the lowest-index RoCE v2 entry of the
// family `policy` asks for (RoCE v1 is not routable and is never chosen; zero GIDs are
// empty slots). not_found when nothing qualifies, with the table summarised in the reason.
checked<uint32_t> select_gid_index(link_kind link, std::span<const gid_entry> table,
                                   gid_family policy = gid_family::ipv4_preferred);

// ---- timers and retries ------------------------------------------------------------------
// Local ACK timeout: the NIC waits 4.096 us * 2^t; t = 0 means wait forever. Returns the
// smallest t (1..31) whose wait is at least `usec`, so the request is never shortened;
// usec = 0 gives 0 (infinite). invalid above 4.096 us * 2^31 (about 8796 s).
checked<uint8_t> timeout_from_usec(uint64_t usec);
// t -> microseconds (0 -> nullopt meaning infinite). invalid for t > 31.
checked<std::optional<double>> timeout_to_usec(uint8_t t);

// Minimum RNR NAK timer, IBA table 45: code 1 = 0.01 ms ... 31 = 491.52 ms, 0 = 655.36 ms.
// Returns the code of the shortest delay that is at least `usec`. invalid above 655.36 ms.
checked<uint8_t> min_rnr_timer_from_usec(uint32_t usec);
// code -> microseconds. invalid for codes above 31.
checked<uint32_t> min_rnr_timer_to_usec(uint8_t code);

// retry_cnt: 0..7 transport retries (3 bits); anything else is invalid.
checked<uint8_t> check_retry_cnt(uint32_t n);
// rnr_retry: 0..6 retries, 7 = retry forever; anything else is invalid.
checked<uint8_t> check_rnr_retry(uint32_t n);
inline constexpr uint8_t rnr_retry_infinite = 7;

// ---- completion status -------------------------------------------------------------------
// mlx5 error-CQE syndrome (prm::syndrome, err_cqe byte 55) -> enum ibv_wc_status, per the
// table of mlx5-datapath.md 5.3. 0 ("no error") gives IBV_WC_SUCCESS; unknown syndromes
// give IBV_WC_GENERAL_ERR, as rdma-core does.
uint32_t wc_status_from_syndrome(uint8_t syndrome);
// enum ibv_wc_status -> its name ("IBV_WC_REM_ACCESS_ERR"), or "IBV_WC_<unknown>".
const char* wc_status_name(uint32_t wc_status);

}  // namespace gdaki::mlx5
