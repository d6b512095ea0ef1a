// The input format of the WQE-parser fuzzer (wqe_parse_fuzzer.cpp), shared with the seed
// generator (make_seeds.cpp) so that seeds and harness can never disagree about it.
//
//   bytes 0..7   header: which ring, which doorbell record, where the NIC stands
//   bytes 8..    SQ ring contents (zero-filled when short, the rest ignored)
//
// The fake MR table names a few regions at fixed virtual addresses; the harness backs them
// with real (ASan-guarded) buffers, so seeds can carry valid keys and addresses although
// the real ones differ from run to run.
#pragma once

#include <cstdint>

namespace gdaki_fuzz {

struct wqe_input_header {
  uint8_t log_wqebbs;  // SQ ring of 2^(log_wqebbs % 7) WQEBBs (1..64)
  uint8_t dbr_lo;      // doorbell record: 16-bit producer counter
  uint8_t dbr_hi;
  uint8_t ci_lo;  // the NIC's consumer counter (low 16 bits; the harness adds a lap)
  uint8_t ci_hi;
  uint8_t max_inline_div4;  // the QP's max_inline / 4
  uint8_t flags;            // wqe_flag_*
  uint8_t reserved;
};
static_assert(sizeof(wqe_input_header) == 8, "the header is 8 bytes in every corpus file");

// The harness writes the expected wqe_index into each WQE before parsing it (as a correct
// producer does), so mutations spend their time past the index check.
inline constexpr uint8_t wqe_flag_stamp_index = 1;

// Access bits of the fake regions (the same meaning as verbs::access).
inline constexpr uint32_t fake_local_write = 1, fake_remote_write = 2, fake_remote_read = 4, fake_remote_atomic = 8;

struct fake_region {
  uint32_t lkey;
  uint64_t va;
  uint32_t length;
  uint32_t access;
};
inline constexpr uint32_t fake_rkey_bit = 0x80;  // rkey = lkey | 0x80, as the soft NIC's keys
inline constexpr fake_region fake_regions[] = {
    {0x0201, 0x10000000, 4096, 0xf},                                  // local buffers, all rights
    {0x0302, 0x20000000, 4096, 0xf},                                  // remote target, all rights
    {0x0403, 0x30000000, 4096, fake_remote_read},                     // remote, read only
    {0x0504, 0x40000000, 256, fake_local_write | fake_remote_atomic}, // small, atomics only
};
inline constexpr uint32_t fake_region_count = sizeof(fake_regions) / sizeof(fake_regions[0]);

}  // namespace gdaki_fuzz
