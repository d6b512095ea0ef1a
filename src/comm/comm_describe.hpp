// internal: the communicator's errors in words: ranks named by number, pid and host, and
// the device API's latched diagnostic record turned into one sentence.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gdaki/comm/device_comm.hpp"

namespace gdaki::comm {

std::string describe_rank(int rank, int32_t pid, const char* host);
std::string hex(uint64_t v);
// "" when nothing was latched.
std::string describe_diag(const comm_diag& d, int my_rank, const std::function<std::string(int)>& rank_name,
                          const std::function<uint64_t(window_t)>& window_size, uint32_t nsignals);

}  // namespace gdaki::comm
