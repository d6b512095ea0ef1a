// Test-only wire faults (wire_test_hooks.hpp); endpoint::execute consumes them.
#include "wire_test_hooks.hpp"

namespace gdaki::soft::wire::test_hooks {

std::atomic<uint32_t> armed{0};
std::atomic<bool> refuse_cma{false};
std::atomic<uint64_t> handshake_ns{0};
std::atomic<uint64_t> failing_ns{0};
std::atomic<uint64_t> request_sends{0};
std::atomic<uint32_t> drop_handshakes{0};
std::atomic<bool> hold_responses{false};
std::atomic<uint64_t> short_path_wqes{0};
std::atomic<uint64_t> short_path_key_lookups{0};
std::atomic<uint64_t> short_path_leases{0};
std::atomic<uint32_t> short_path_source_pause_us{0};
std::atomic<uint32_t> short_path_source_pauses{0};

void arm(fault f, uint32_t offset, uint8_t mask) {
  armed.store(static_cast<uint32_t>(f) | ((offset & 0xff) << 8) | (uint32_t{mask} << 16), std::memory_order_release);
}

fault disarm() { return static_cast<fault>(armed.exchange(0, std::memory_order_acq_rel) & 0xff); }

}  // namespace gdaki::soft::wire::test_hooks
