// How the ranks of a communicator talk before (and beside) the data path: an all-gather of
// small blobs and a barrier. Three implementations: every rank in one process (threads),
// a TCP rendezvous at a unique id (bootstrap_tcp), and the caller's MPI communicator
// (comm/mpi.hpp, header-only so libgdaki never links MPI). Host-only; blocking; small
// messages. docs/communicator.md, "Bootstrap".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gdaki::comm {

class bootstrap {
 public:
  virtual ~bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank passes `bytes` bytes at mine; all[r * bytes ...] receives rank r's. Throws
  // gdaki::error naming the rank that failed (timeout, closed) and the cause.
  virtual void allgather(const void* mine, void* all, size_t bytes) = 0;
  // Returns once every rank has called it. Throws like allgather.
  virtual void barrier() {
    uint8_t b = 0;
    std::vector<uint8_t> all(static_cast<size_t>(size()));
    allgather(&b, all.data(), 1);
  }
};

// Every rank of a group lives in this process; each rank's communicator is created on a
// thread of its own with bootstrap number r of the same group. Throws gdaki::error
// (invalid) for size < 1.
std::vector<std::unique_ptr<bootstrap>> make_local_bootstraps(int size, int timeout_ms = 30000);

// ncclGetUniqueId's counterpart: where rank 0 listens, and the job's secret that every
// connection proves (HMAC challenge-response; it never crosses the rendezvous wire).
struct unique_id {
  char host[64] = {};     // IPv4 address rank 0 listens on, as text
  uint16_t port = 0;
  uint8_t secret[32] = {};  // also becomes the soft NIC wire secret of every rank
  uint8_t job[16] = {};     // random per job: connection tokens are derived from it
};

// Rank 0's side of a job: makes a fresh id and starts listening at host (port 0: any free
// port), so the id can be handed to the other ranks at once. The listening socket waits in
// this process for bootstrap_tcp(rank 0). Throws gdaki::error (io_error).
unique_id make_unique_id(const std::string& host = "127.0.0.1", uint16_t port = 0);

// The id from torchrun-style variables: MASTER_ADDR, MASTER_PORT (rank 0 listens there),
// and the secret from GDAKI_SOFT_SECRET or GDAKI_SOFT_SECRET_FILE (required: a secret that
// only this process knows could not authenticate the others). Throws gdaki::error
// (invalid) naming the missing or malformed variable.
unique_id unique_id_from_env();
// RANK and WORLD_SIZE. Throws gdaki::error (invalid) naming the variable.
void rank_from_env(int* rank, int* size);

// The TCP rendezvous: rank 0 accepts size-1 connections, each authenticated, and relays
// all-gathers. Throws gdaki::error naming the rank and cause when a rank does not come or
// fails to authenticate within timeout_ms.
std::unique_ptr<bootstrap> bootstrap_tcp(const unique_id& id, int rank, int size, int timeout_ms = 30000);

}  // namespace gdaki::comm
