// Options of `gdaki bench`, in the spirit of perftest (-s, -a, -n, -q, -I, -p, -c), and
// the size parser (2, 4K, 64KiB, 1M, 8MiB; ranges 2..8M; "all" = every power of two from
// 2 B to 8 MiB, like perftest's -a).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_framework.hpp"

namespace gdaki::tool::bench {

enum class test_kind { write_bw, write_lat, read_bw, read_lat, atomic_rate, put_signal_bw, send_lat, send_bw };
enum class scope_kind { thread, warp, block };

struct test_info {
  test_kind kind;
  const char* name;   // command-line name
  const char* title;  // table heading, perftest-like
  bool latency;       // latency table (t_min ...) instead of bandwidth table
  bool fixed_size;    // atomics: always 8 bytes
};

const std::vector<test_info>& tests();
const test_info& info(test_kind k);
std::optional<test_kind> find_test(const std::string& name);

const char* to_string(scope_kind s);

// --json, --csv, -o and the progress flags are the framework's (benchfw::common_options).
struct options : benchfw::common_options {
  std::vector<std::string> test_names;  // empty: --quick's pair (write_lat, write_bw)
  std::vector<uint64_t> sizes;          // message sizes in bytes
  uint64_t iterations = 0;              // 0: the test's default, scaled down for big sizes
  uint32_t warmup = 0;                  // 0: iterations / 10, at most 1000
  uint32_t qps = 1;
  uint32_t blocks = 1;
  uint32_t threads = 1;                 // initiator threads per block
  scope_kind scope = scope_kind::thread;
  uint32_t inline_size = 0;             // messages up to this size are posted inline (p())
  bool inline_set = false;              // -I given (latency tests default to 64)
  uint32_t cq_mod = 16;                 // every cq_mod-th WQE is signalled (perftest -Q)
  uint32_t post_list = 1;               // one doorbell per post_list operations (perftest -l)
  uint32_t tx_depth = 512;              // SQ depth in WQEBBs (perftest -t)
  std::string provider = "soft";
  std::string device;                   // default: the provider's first device
  uint8_t gid_index = 0;                // RoCE: source GID index (perftest -x)
  std::string wire = "inproc";          // inproc (loopback), shm, tcp
  std::string server_host;              // -c HOST: client mode
  bool server = false;                  // --server: wait for a client
  uint16_t port = 18515;                // perftest's default port
  double connect_timeout_s = 5;
  bool quick = false;
};

// Parses "2", "4K", "4k", "4KiB", "1M", "8MiB", "1G", "2B". Returns false with *why
// naming the bad part ("unknown size suffix 'Q' in '3Q'").
bool parse_size(const std::string& text, uint64_t* out, std::string* why);

// Parses a size list: comma-separated sizes or ranges "LO..HI" (powers of two between),
// or "all" (2 B .. 8 MiB). Returns false with *why.
bool parse_sizes(const std::string& text, std::vector<uint64_t>* out, std::string* why);

inline constexpr uint64_t min_size = 1;
inline constexpr uint64_t max_size = uint64_t{8} << 20;  // 8 MiB, as the "all"
// One -s size may be larger, up to what one data segment can carry (its 32-bit byte count
// with bit 31 the inline flag), in whole MiB: bandwidth with buffers several times the
// last-level cache (bench/compare-ucx) needs messages of hundreds of MiB.
inline constexpr uint64_t max_single_size = (uint64_t{1} << 31) - (uint64_t{1} << 20);

}  // namespace gdaki::tool::bench
