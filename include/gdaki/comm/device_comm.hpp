// The communicator as kernels see it: plain data (pointers, sizes, counters) that the host
// communicator (comm/communicator.hpp) fills in and places where the initiators reach it.
// Compiles as nvcc device code, nvcc host code and g++ C++20. docs/communicator.md.
//
// internal: the field layout is not API. Kernels use the functions of comm/device.hpp, and
// check the ABI (check_abi) at entry so a kernel built against another release stops with
// status::invalid instead of reading garbage.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gdaki/config.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/status.hpp"

namespace gdaki::comm {

// Bumped whenever a field of dev_comm, dev_window, dev_team or comm_diag moves or changes
// meaning. check_abi compares it, and sizeof(dev_comm), with what the kernel was built for.
inline constexpr uint32_t abi_version = 2;  // 2: self_direct (was padding)

// Fixed capacities: tables the host fills once and kernels index without bounds games.
inline constexpr uint32_t max_windows = 64;   // user windows per communicator (heap included)
inline constexpr uint32_t max_teams = 16;     // teams with a barrier of their own (world = 0)
inline constexpr uint32_t max_contexts = 16;  // contexts a communicator may be asked for

// A window's id as kernels name it: the index into dev_comm::windows.
using window_t = uint32_t;
using signal_t = uint32_t;
using counter_t = uint32_t;

// One symmetric window: the same size on every rank, registered on every rank.
struct dev_window {
  uint64_t size;            // bytes, equal on every rank
  uint64_t local_base;      // this rank's copy (the source of puts, destination of gets)
  uint32_t lkey;
  uint32_t live;            // 1 while registered; 0 for a free slot
  const uint64_t* peer_base;  // [nranks] each rank's base address
  const uint32_t* peer_rkey;  // [nranks] each rank's rkey
};

// A team: a subset of the world, addressed by team rank 0..size-1. Stride teams need no
// table (world rank = start + r * stride); colour teams carry one (members[r]).
struct dev_team {
  int32_t rank;        // the caller's rank in the team (-1: not a member)
  uint32_t size;
  uint32_t start;      // stride teams: world rank of team rank 0
  uint32_t stride;     // stride teams: world-rank distance of neighbours
  const int32_t* members;  // colour teams: [size] world ranks; nullptr for stride teams
  uint32_t barrier_id;     // which barrier slots this team's barrier uses (< max_teams)
  uint32_t pad;
};

// What went wrong first, latched by device code for the host to put into words
// (communicator::describe). Kinds:
enum class diag_kind : uint32_t {
  none = 0,
  range = 1,          // window offset/size outside the window (window, offset, bytes, size)
  bad_peer = 2,       // peer is not a rank of the team (peer)
  bad_window = 3,     // window id not registered (window)
  bad_signal = 4,     // signal or counter id out of range (signal)
  wait_timeout = 5,   // a wait on a signal, counter or barrier ran out (peer, signal, value)
  op_failed = 6,      // a post or completion to a peer failed (peer, status)
};
struct comm_diag {
  uint32_t latched;   // 0 until the first report claims it
  diag_kind kind;
  int32_t peer;       // world rank, or -1
  int32_t window;     // window id, or -1
  int32_t signal;     // signal, counter or barrier team id, or -1
  int32_t st;         // gdaki::status of the failing call
  uint64_t offset, bytes, size;  // range: the request and the window's size
  uint64_t expected, seen;       // wait_timeout: what was waited for and the last value read
};

struct dev_comm {
  // --- ABI: first, so that any release can read them --------------------------------
  uint32_t abi_size;     // sizeof(dev_comm) of the library that filled this in
  uint32_t abi_version;  // abi_version of that library
  // --- geometry ------------------------------------------------------------------------
  int32_t rank;
  uint32_t nranks;
  uint32_t ncontexts;
  uint32_t nsignals;     // user signals 0..nsignals-1
  uint32_t ncounters;    // counters 0..ncounters-1
  // 1: operations to this rank itself are memory operations of the caller (data copies,
  // signal atomics, counters), not WQEs on the loopback QP. Set only where the NIC's
  // atomics are the initiators' own (the soft NIC with CPU initiators): a ConnectX's
  // atomics are not atomic against a GPU's or CPU's on the same word, so there a signal to
  // self must take the NIC like every other (device.hpp, "Operations to this rank").
  uint32_t self_direct;
  uint64_t timeout_ns;   // default bound on ring-space waits and waits without their own
  // qps[ctx * nranks + world_peer]: one RC QP per peer per context (self included: a
  // loopback pair), shared by every thread of every kernel (sharing::grid).
  dev::qp_handle* const* qps;
  dev_window* windows;   // [max_windows]
  // Signals: a window of its own (nsignals user words, then max_teams * nranks barrier
  // slots, 8 bytes each), remote-atomic on every rank.
  dev_window signals;
  // Counters: issued and completed per counter, and per QP the highest ticket of any
  // counted operation (the wait settles up to it; device.hpp, wait_counter).
  uint64_t* counter_issued;     // [ncounters]
  uint64_t* counter_completed;  // [ncounters]
  uint64_t* counter_ticket;     // [ncontexts * nranks]
  uint64_t* barrier_epoch;      // [max_teams] this rank's barrier generation per team
  dev_team world;
  comm_diag* diag;
};

static_assert(std::is_trivially_copyable_v<dev_comm> && std::is_standard_layout_v<dev_comm>,
              "the device communicator is plain data shared by host and device compilers");
static_assert(sizeof(comm_diag) == 64, "the diagnostic record is one cache line");

}  // namespace gdaki::comm
