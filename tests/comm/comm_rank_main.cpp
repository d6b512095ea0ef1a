// One rank of a multi-process communicator test: started N times by comm_procs_test (or by
// mpirun), it creates its communicator through the path it is told, runs a scenario of
// comm_scenarios.hpp and exits 0 when every check held.
//   gdaki_comm_rank --boot id-file:PATH  (RANK, WORLD_SIZE from the environment; rank 0
//                                         makes the unique id and writes it to PATH, the
//                                         others read it there: ncclGetUniqueId's shape)
//   gdaki_comm_rank --boot env           (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
//                                         GDAKI_SOFT_SECRET)
//   gdaki_comm_rank_mpi --boot mpi       (under mpirun: the MPI communicator's ranks)
//   ... --scenario all | kill            (kill: the last rank SIGKILLs itself after setup;
//                                         the others must name it within the timeout)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "comm/comm_scenarios.hpp"
#include "gdaki/error.hpp"
#ifdef GDAKI_COMM_WITH_MPI
#include "gdaki/comm/mpi.hpp"
#endif

namespace {

using namespace comm_test;

std::string to_hex(const void* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    char b[3];
    std::snprintf(b, sizeof(b), "%02x", static_cast<const uint8_t*>(p)[i]);
    s += b;
  }
  return s;
}
bool from_hex(const std::string& s, void* p, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return true;
}

comm::communicator create(const std::string& boot, const comm::options& o) {
  if (boot == "env") return comm::communicator::from_env(o);
#ifdef GDAKI_COMM_WITH_MPI
  if (boot == "mpi") return comm::from_mpi(MPI_COMM_WORLD, o);
#endif
  if (boot.rfind("id-file:", 0) == 0) {
    const std::string path = boot.substr(8);
    int rank = 0, size = 1;
    comm::rank_from_env(&rank, &size);
    comm::unique_id id;
    if (rank == 0) {
      id = comm::make_unique_id();
      std::ofstream(path + ".tmp") << to_hex(&id, sizeof(id));
      std::rename((path + ".tmp").c_str(), path.c_str());  // readers never see half an id
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      std::string text;
      while (!(std::ifstream(path) >> text) || !from_hex(text, &id, sizeof(id))) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30))
          throw gdaki::error(gdaki::status::timeout, "no unique id appeared in " + path);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return comm::communicator::from_unique_id(id, rank, size, o);
  }
  throw gdaki::error(gdaki::status::invalid, "unknown --boot " + boot);
}

int run_all(comm::communicator& c) {
  std::string e;
  if (e.empty()) e = every_operation(c);
  if (e.empty()) e = teams(c);
  if (e.empty()) e = barrier_covers_puts_to_self(c);
  if (e.empty()) e = errors_and_escape_hatch(c);
  if (e.empty()) e = heap(c);
  if (e.empty()) e = scopes_on_host_grid(c);
  if (e.empty()) e = barrier_many(c, 2000);
  if (e.empty()) e = put_signal_ordering(c, 100000);
  if (!e.empty()) {
    std::fprintf(stderr, "%s\n", e.c_str());
    return 1;
  }
  c.finalize();
  std::printf("rank %d of %d: every scenario ok\n", c.rank(), c.size());
  return 0;
}

int run_kill(comm::communicator& c, uint32_t timeout_ms) {
  const comm::dev_comm& d = c.device();
  if (comm::barrier(d, 0, d.world, 10 * sec) != gdaki::status::ok) {
    std::fprintf(stderr, "rank %d: first barrier failed: %s\n", c.rank(), c.describe_error().c_str());
    return 1;
  }
  c.barrier();
  if (c.rank() == c.size() - 1) {
    std::printf("rank %d: killing myself (pid %d)\n", c.rank(), static_cast<int>(::getpid()));
    std::fflush(stdout);
    ::kill(::getpid(), SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it die first
  const uint64_t t0 = gdaki::dev::arch::clock_ns();
  const gdaki::status st = comm::barrier(d, 0, d.world, uint64_t{timeout_ms} * 1'000'000ull);
  const double waited_ms = double(gdaki::dev::arch::clock_ns() - t0) / 1e6;
  const std::string e = c.describe_error();
  const std::string dead = c.rank_name(c.size() - 1);
  std::printf("rank %d: barrier -> %s after %.0f ms: %s\n", c.rank(), gdaki::to_string(st), waited_ms, e.c_str());
  const bool named = e.find(dead) != std::string::npos;
  const bool in_time = waited_ms < timeout_ms + 1000.0;
  if (st == gdaki::status::ok || !named || !in_time) {
    std::fprintf(stderr, "rank %d: the dead %s was %s\n", c.rank(), dead.c_str(),
                 st == gdaki::status::ok ? "not noticed" : !named ? "not named" : "named too late");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
#ifdef GDAKI_COMM_WITH_MPI
  MPI_Init(&argc, &argv);
  struct finalize_mpi {
    ~finalize_mpi() { MPI_Finalize(); }
  } mpi_guard;
#endif
  std::string boot = "env", scenario = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--boot") == 0) boot = argv[i + 1];
    else if (std::strcmp(argv[i], "--scenario") == 0) scenario = argv[i + 1];
  }
  // A loaded 2-core CI machine can deschedule a rank's engine for seconds; a transport
  // timeout then fails the QP for good. Generous here (the kill scenario does not rely
  // on it: the barrier's own 3 s bound names the dead rank). Before any device opens.
  ::setenv("GDAKI_SOFT_WIRE_TIMEOUT_MS", "10000", 0);
  comm::options o;
  o.contexts = 2;
  o.heap_bytes = 1 << 20;
  o.timeout_ms = scenario == "kill" ? 3000 : 30000;
  comm::communicator c = create(boot, o);
  if (scenario == "all") return run_all(c);
  if (scenario == "kill") return run_kill(c, o.timeout_ms);
  std::fprintf(stderr, "unknown --scenario %s\n", scenario.c_str());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gdaki_comm_rank: %s\n", e.what());
  return 1;
}
