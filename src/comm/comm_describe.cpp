#include "comm/comm_describe.hpp"

#include <cstdio>

#include "gdaki/device/arch.hpp"

namespace gdaki::comm {

std::string describe_rank(int rank, int32_t pid, const char* host) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + " on " + host + ")";
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string describe_diag(const comm_diag& d, int my_rank, const std::function<std::string(int)>& rank_name,
                          const std::function<uint64_t(window_t)>& window_size, uint32_t nsignals) {
  // The device side publishes kind last, with release.
  const auto kind = static_cast<diag_kind>(dev::arch::load_acquire(reinterpret_cast<const uint32_t*>(&d.kind)));
  const std::string here = "rank " + std::to_string(my_rank) + ": ";
  const std::string st = to_string(static_cast<status>(d.st));
  switch (kind) {
    case diag_kind::none:
      return "";
    case diag_kind::range:
      return here + "window " + std::to_string(d.window) + ": offset " + std::to_string(d.offset) + " + " +
             std::to_string(d.bytes) + " bytes is outside the window's " + std::to_string(d.size) + " bytes";
    case diag_kind::bad_peer:
      return here + "peer " + std::to_string(d.peer) + " is not a rank of the team";
    case diag_kind::bad_window:
      return here + "window " + std::to_string(d.window) + " is not registered" +
             (d.window >= 0 && window_size(static_cast<window_t>(d.window)) == 0 ? "" : "");
    case diag_kind::bad_signal:
      return here + "signal or counter " + std::to_string(d.signal) + " is out of range (" + std::to_string(nsignals) +
             " signals)";
    case diag_kind::wait_timeout:
      if (d.signal < 0 && d.peer >= 0)
        return here + "barrier of team slot " + std::to_string(-1 - d.signal) + " timed out waiting for " +
               rank_name(d.peer) + " (generation " + std::to_string(d.expected) + " wanted, " +
               std::to_string(d.seen) + " seen): that rank is dead, stalled or not in this barrier";
      return here + "wait on signal/counter " + std::to_string(d.signal) + " timed out: wanted " +
             std::to_string(d.expected) + ", last value " + std::to_string(d.seen);
    case diag_kind::op_failed:
      return here + "an operation to " + rank_name(d.peer) + " failed (" + st +
             "): that rank is dead or unreachable, or the QP to it is in error";
  }
  return here + "unknown diagnostic kind " + std::to_string(static_cast<uint32_t>(kind));
}

}  // namespace gdaki::comm
