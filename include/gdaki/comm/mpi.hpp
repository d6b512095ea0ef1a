// Creation from the caller's MPI communicator: the communicator's bootstrap all-gathers run
// as MPI_Allgather on a duplicate of it, so a job launched by mpirun needs no second
// rendezvous. Header-only: libgdaki never links MPI; a program that includes this header
// links MPI itself (CMake: MPI::MPI_CXX). Host-only. docs/communicator.md, "Creation".
#pragma once

#include <mpi.h>
#include <sys/random.h>

#include <memory>
#include <string>

#include "gdaki/comm/bootstrap.hpp"
#include "gdaki/comm/communicator.hpp"
#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"

namespace gdaki::comm {

// A bootstrap over an MPI communicator (duplicated, so our collectives never match the
// caller's). Errors become gdaki::error naming the MPI call and MPI's own message.
class mpi_bootstrap final : public bootstrap {
 public:
  explicit mpi_bootstrap(MPI_Comm parent) {
    check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  mpi_bootstrap(const mpi_bootstrap&) = delete;
  mpi_bootstrap& operator=(const mpi_bootstrap&) = delete;
  ~mpi_bootstrap() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allgather(const void* mine, void* all, size_t bytes) override {
    check(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE, comm_),
          "MPI_Allgather");
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  // Rank 0's bytes to everyone.
  void broadcast(void* p, size_t bytes) { check(MPI_Bcast(p, static_cast<int>(bytes), MPI_BYTE, 0, comm_), "MPI_Bcast"); }

 private:
  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw error(status::io_error, std::string("MPI bootstrap, rank ") + std::to_string(rank_) + ": " + what + ": " + msg);
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// Collective over `parent`: the communicator of its ranks. Rank 0 makes the job's wire
// secret and sends it over MPI (a transport the job already trusts), unless the
// environment gives one (GDAKI_SOFT_SECRET / GDAKI_SOFT_SECRET_FILE), which then wins.
inline communicator from_mpi(MPI_Comm parent, const options& opt = {}) {
  auto boot = std::make_unique<mpi_bootstrap>(parent);
  uint8_t secret[32] = {};
  if (boot->rank() == 0 && ::getrandom(secret, sizeof(secret), 0) != static_cast<ssize_t>(sizeof(secret)))
    throw error(status::io_error, "from_mpi: getrandom failed");
  boot->broadcast(secret, sizeof(secret));
  if (std::getenv("GDAKI_SOFT_SECRET") == nullptr && std::getenv("GDAKI_SOFT_SECRET_FILE") == nullptr)
    soft::set_secret(secret, sizeof(secret));
  return communicator(std::move(boot), opt);
}

}  // namespace gdaki::comm
