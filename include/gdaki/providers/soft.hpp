// The soft provider's knobs: a software NIC that executes mlx5 WQEs from the SQ rings and
// writes mlx5 CQEs (docs/soft-nic.md). Devices opened after set_config() use the new
// values; each knob also has an environment variable, read when the provider first loads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gdaki::verbs {
class device;
}

namespace gdaki::soft {

struct config {
  uint32_t devices = 1;         // GDAKI_SOFT_DEVICES: devices listed (soft0, soft1, ...)
  uint32_t engine_threads = 1;  // GDAKI_SOFT_ENGINE_THREADS: progress threads per open device
  // GDAKI_SOFT_INLINE: a CPU thread that rings a doorbell executes the new WQEs itself
  // (under a per-QP try-lock) instead of waiting for an engine thread.
  bool inline_exec = true;
  uint32_t spin_us = 50;        // GDAKI_SOFT_SPIN_US: busy-poll this long after the last work
  uint32_t yield_us = 200;      // GDAKI_SOFT_YIELD_US: then poll with sched_yield this long
  uint32_t min_sleep_us = 50;   // GDAKI_SOFT_MIN_SLEEP_US: first sleep between polls
  uint32_t max_sleep_us = 2000; // GDAKI_SOFT_MAX_SLEEP_US: sleeps double up to this
  uint32_t budget = 64;         // GDAKI_SOFT_BUDGET: WQEs per QP per engine pass (fairness)
  // GDAKI_SOFT_TIMEOUT_CAP_US: caps one transport-retry wait (4.096 us * 2^timeout); 0 = no
  // cap. Keeps "peer gone" tests short without lying about the retry count.
  uint32_t timeout_cap_us = 0;

  // Wires to soft devices in other processes and on other hosts (docs/soft-nic.md, Wires).
  // GDAKI_SOFT_WIRE: "auto" (same host: unix socket + single-copy cross-process memory
  // copy; other hosts: TCP), "tcp" (always TCP), "shm" (same host only; fails otherwise).
  std::string wire = "auto";
  std::string listen_addr = "127.0.0.1";  // GDAKI_SOFT_LISTEN: IPv4 to listen on (0.0.0.0 = all)
  uint32_t listen_port = 0;               // GDAKI_SOFT_LISTEN_PORT: 0 = any free port
  // GDAKI_SOFT_WIRE_TIMEOUT_MS: a peer that does not answer within this many ms (dead
  // process, dropped link) fails the WQE with TRANSPORT_RETRY_EXC; the QP then flushes.
  uint32_t wire_timeout_ms = 2000;
  // GDAKI_SOFT_SHM_SINGLE_COPY_MIN: on the shared-memory wire, messages of at least this
  // many bytes move by one cross-process copy; smaller ones travel inside the frame.
  uint32_t shm_single_copy_min = 16384;
  // GDAKI_SOFT_SHM_STREAM_MIN: a mapped WRITE copy (same host, shm_map) of at least this
  // many bytes may use streaming (non-temporal) stores on x86-64, where they have been the
  // faster ones into that MR; 0 = never.
  uint32_t shm_stream_min = 32 * 1024;
  // GDAKI_SOFT_WIRE_WINDOW: requests one connection keeps in flight before it waits for
  // responses (pipelining; 1 = stop-and-wait).
  uint32_t wire_window = 256;
  // GDAKI_SOFT_WIRE_WINDOW_BYTES: payload bytes one connection keeps in flight (two
  // requests always may be). More only fills socket buffers: the sender then sleeps in
  // the kernel and the pipeline drains in bursts (docs/performance.md, Wires).
  uint32_t wire_window_bytes = 256 * 1024;
  // GDAKI_SOFT_SHM_MAP: on the shared-memory wire, map a peer's MRs that live in
  // alloc_shared() memory and move RDMA WRITE / READ data with one memcpy by the
  // initiator (no syscall, no frame). Off: such MRs take the frame path like any other.
  bool shm_map = true;
  // Authentication (docs/soft-nic.md, Security). GDAKI_SOFT_SECRET_FILE: a file holding the
  // job's secret as hex; it must be owned by this user with no group/other permission bits
  // (chmod 600), or the wire refuses to start. GDAKI_SOFT_SECRET (hex) and set_secret()
  // take precedence over it.
  std::string secret_file;
  // GDAKI_SOFT_ALLOW_OTHER_USERS: accept unix-socket peers running as another user id
  // (they still need the secret). Off: such a peer is refused before it may say anything.
  bool allow_other_users = false;
};

// Memory that soft peers in other processes on this host can map (a memfd, MAP_SHARED):
// an MR registered inside it lets the shared-memory wire carry RDMA WRITEs and READs
// from such a peer as one plain memcpy by the initiator (docs/soft-nic.md, Wires), as a
// symmetric heap does. Page-aligned and zero-filled. Throws gdaki::error (no_memory,
// io_error). Deregister MRs on it before free_shared (invalid if p is not such a block).
void* alloc_shared(size_t bytes);
void free_shared(void* p);

// The wire address of an open soft device (what a GID is to RoCE): 16 bytes naming its
// host, listening port and process. Starts the device's listener if it is not running.
// Pass it to the peer out of band; the peer puts it in qp_attr.av.dgid (is_global = true)
// together with the connection token when it moves its QP to RTR; the two processes must
// also hold the same secret (set_secret below). Throws gdaki::error (not_supported for a
// non-soft device, io_error when listening fails, e.g. the configured secret is unusable).
std::array<uint8_t, 16> local_address(const verbs::device& d);

// The job's secret, which every wire connection proves in both directions before any
// request is served (HMAC challenge-response: it never crosses the wire). Resolved on first
// need from, in order: set_secret(), GDAKI_SOFT_SECRET (32 to 128 hex digits),
// config::secret_file, else a random one made for this process alone, which peers in other
// processes must then be given (secret_hex() through the job's bootstrap, or the variable
// in their environment). set_secret throws gdaki::error (invalid) for fewer than 16 or more
// than 64 bytes or an all-zero secret; secret_hex throws it when the configured secret is
// unusable (bad hex, zero, a key file group or others may read), naming the cause.
void set_secret(const uint8_t* bytes, size_t len);
std::string secret_hex();

// Returns the configuration devices opened now would use.
config get_config();
// Replaces it (for devices opened afterwards).
void set_config(const config& c);
// Returns the defaults above overridden by the GDAKI_SOFT_* environment variables.
config config_from_env();

}  // namespace gdaki::soft
