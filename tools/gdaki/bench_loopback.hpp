// The benchmark endpoints: QP pairs A_i <-> B_i on one device. In loopback mode both ends
// live in this process; across processes (server/client) the client holds the A ends (the
// initiators) and the server the B ends, connected over the soft NIC's wire. Initiators
// are CPU threads started by the host grid launcher (gdaki::dev::host::launch), posting
// through the device API (gdaki/device/ops.hpp) or, for SEND, the data-path core, so the
// figures measure the real data path plus the provider (the soft NIC executing the WQEs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_options.hpp"
#include "bench_report.hpp"

namespace gdaki::tool::bench {

enum class endpoint_role { both, client, server };

class loopback {
 public:
  // Opens the device and builds the QPs and buffers `kind` needs for sizes up to
  // max_bytes: both ends (role both) or one end. Throws gdaki::error (device, QP
  // creation) or std::invalid_argument (option combinations the test does not support).
  loopback(const options& opt, test_kind kind, uint64_t max_bytes, endpoint_role role = endpoint_role::both);
  ~loopback();
  loopback(const loopback&) = delete;
  loopback& operator=(const loopback&) = delete;

  const std::string& device_name() const;
  // Messages up to this size are posted inline (the -I value, or the test's default).
  uint32_t inline_size() const;

  // Across processes: what the peer needs (wire address, QPNs, buffer addresses and
  // rkeys), and connecting this end's QPs to the peer's with the agreed 16-byte token.
  nlohmann::json local_info() const;
  void connect_remote(const nlohmann::json& peer, const std::string& token_hex);

  // Clears the ping-pong flag bytes of `bytes` (before the peer starts a size).
  void prepare_size(uint64_t bytes);

  // Runs one size on the initiator side: `iterations` per initiator thread (bw) or round
  // trips (lat), after `warmup` untimed ones. Throws std::runtime_error when an operation
  // fails.
  row run_size(uint64_t bytes, uint64_t iterations, uint64_t warmup);

  // The server's part of one size: the pong of write_lat/send_lat, the receiver of
  // send_bw, nothing for one-sided bandwidth tests.
  void serve_size(uint64_t bytes, uint64_t iterations, uint64_t warmup, uint64_t initiator_threads);

  struct state;  // opaque; public so the posting kernels (bench_loopback.cpp) can name it

 private:
  std::unique_ptr<state> s_;
};

// The iteration count for one size when -n is not given: the perftest defaults (5000 for
// bandwidth, 1000 for latency) scaled down for large messages so each size moves a bounded
// amount of data; the soft NIC copies every byte on a CPU.
uint64_t default_iterations(const options& opt, test_kind kind, uint64_t bytes);

}  // namespace gdaki::tool::bench
