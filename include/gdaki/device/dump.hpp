// Host-side diagnostics for an exported QP: where its counters stand, the WQE it is stuck
// on and the last CQE, decoded. Used when a bounded wait times out. Host-only.
#pragma once

#include <string>

#include "gdaki/device/handles.hpp"

namespace gdaki::dev {

// A multi-line report: qpn, last posted (reserved / ready / rung), last completed,
// outstanding WQEBBs, the latched error, the oldest unfinished WQE decoded, and the
// most recent CQE of the send CQ decoded. Reads the handle without locking (a snapshot).
std::string dump_qp_state(const qp_handle& qp);

}  // namespace gdaki::dev
