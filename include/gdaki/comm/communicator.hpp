// The communicator, host side: ranks, contexts (one RC QP per peer per context), symmetric
// windows, a symmetric heap, signals, counters, teams and a host barrier; its device half
// (dev_comm, comm/device.hpp) is what kernels take. Creation is collective: every rank
// calls it with the same options. Host-only. docs/communicator.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gdaki/comm/bootstrap.hpp"
#include "gdaki/comm/device_comm.hpp"

namespace gdaki::comm {

struct options {
  std::string device = "soft0";  // the NIC every rank opens
  uint32_t contexts = 1;         // RC QPs per peer: one per context (at most max_contexts)
  uint32_t sq_wqebbs = 256;      // send queue depth of each QP, in WQEBBs
  uint8_t traffic_class = 0;     // carried in every QP's address vector
  uint32_t signals = 64;         // user signals per rank
  uint32_t counters = 64;        // counters per rank
  size_t heap_bytes = 0;         // symmetric heap (window made at creation); 0 = none
  uint32_t timeout_ms = 10000;   // bootstrap steps and the device API's default bound
  // Operations to this rank itself bypass the loopback QP where the NIC's atomics are the
  // initiators' own (dev_comm::self_direct); false: always through the loopback QP.
  bool self_direct = true;
};

// A symmetric-heap allocation: the same (window, offset) on every rank.
struct sym_ptr {
  window_t window = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

class communicator {
 public:
  // Collective over the ranks of `boot`. Throws gdaki::error naming the option or the rank
  // and the cause: invalid (contexts 0 or above max_contexts, sq depth or traffic class
  // the device refuses), the bootstrap's errors, the provider's errors.
  communicator(std::unique_ptr<bootstrap> boot, const options& opt = {});
  // From a unique id: the TCP rendezvous, then the constructor above. The id's secret
  // becomes this process's soft wire secret.
  static communicator from_unique_id(const unique_id& id, int rank, int size, const options& opt = {});
  // From RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and GDAKI_SOFT_SECRET).
  static communicator from_env(const options& opt = {});
  // Every rank in this process, created on `size` threads at once (tests).
  static std::vector<communicator> create_local(int size, const options& opt = {});

  communicator(communicator&&) noexcept;
  communicator& operator=(communicator&&) noexcept;
  ~communicator();

  int rank() const;
  int size() const;
  // "rank 2 (pid 4711 on host1)": how errors name a rank.
  std::string rank_name(int world_rank) const;

  // The device communicator kernels take (comm/device.hpp). Lives as long as this object.
  dev_comm& device();
  const dev_comm& device() const;

  // Collective: registers [base, base + bytes) on every rank as one window. bytes must be
  // equal on every rank, base and bytes multiples of 4096. Throws gdaki::error (invalid)
  // naming the window, the rank and the cause.
  window_t register_window(void* base, size_t bytes);
  // Collective: allocates and registers `bytes` (rounded up to 4 KiB) on every rank, in
  // memory peers on this host may map (one memcpy per put on the same-host wire).
  window_t alloc_window(size_t bytes);
  // Collective: deregisters (and frees, for alloc_window) window w.
  void free_window(window_t w);
  // This rank's copy of window w.
  void* window_base(window_t w) const;

  // Collective symmetric heap (NVSHMEM shmem_malloc): the same calls in the same order on
  // every rank return the same offset; 64-byte aligned. Throws gdaki::error (no_memory,
  // or invalid when ranks disagree, naming the rank).
  sym_ptr heap_alloc(size_t bytes);
  void heap_free(const sym_ptr& p);
  void* local(const sym_ptr& p) const;

  // Teams. world() is every rank; split_stride takes world ranks start, start + stride, ...
  // (size of them; local, but every member must make the same split in the same order so
  // the barrier slots agree); split_colour is collective: ranks with the same colour form
  // a team ordered by (key, world rank); colour < 0 joins none (the returned team has
  // rank -1). The team's barrier gets slots of its own (at most max_teams teams).
  dev_team world() const;
  dev_team split_stride(int start, int stride, int size);
  dev_team split_colour(int colour, int key);

  // Host barrier over the bootstrap.
  void barrier();
  // Collective end of use: every operation this rank posted has completed, then a host
  // barrier, so no rank destroys QPs or memory a peer still uses. Destruction itself is
  // local. Throws gdaki::error naming the rank whose operations failed or which is gone.
  void finalize();

  // The first error the device API latched, in words ("" when none), and clearing it.
  std::string describe_error() const;
  void clear_error();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace gdaki::comm
