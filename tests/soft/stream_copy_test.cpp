// The copies of the mapped WRITE path (src/providers/soft/wire/stream_copy.hpp): streaming
// stores move exactly the bytes asked for at any alignment of source and destination, and
// the per-destination chooser measures both kinds of store in runs, keeps to the cheaper
// one and looks at the other one again at the start of every epoch.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../../src/providers/soft/wire/stream_copy.hpp"

namespace {

using gdaki::soft::store_chooser;

TEST(stream_copy, every_length_and_alignment_copies_exactly_and_touches_nothing_else) {
  std::vector<uint8_t> src(600), dst(800);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t so = 0; so < 64; so += 5) {
    for (size_t dof = 0; dof < 64; dof += 3) {
      for (size_t n : {0ul, 1ul, 63ul, 64ul, 65ul, 127ul, 128ul, 200ul, 511ul, 512ul}) {
        std::fill(dst.begin(), dst.end(), uint8_t{0xee});
        gdaki::soft::stream_copy(dst.data() + 64 + dof, src.data() + so, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= 64 + dof && i < 64 + dof + n;
          const uint8_t want = inside ? src[so + (i - 64 - dof)] : uint8_t{0xee};
          ASSERT_EQ(dst[i], want) << "src offset " << so << ", dst offset " << dof << ", length " << n << ", byte " << i;
        }
      }
    }
  }
}

// Drives a chooser through `epochs` (long) epochs whose copies cost plain_ns or stream_ns
// (per MiB) as the chooser measures them; counts the copies of each kind.
void drive(store_chooser& ch, uint32_t epochs, uint64_t plain_ns, uint64_t stream_ns, uint32_t* plain,
           uint32_t* streamed) {
  for (uint32_t i = 0; i < epochs * store_chooser::epoch; ++i) {
    const store_chooser::choice c = ch.pick();
    (c.streaming ? *streamed : *plain) += 1;
    if (c.measure) ch.record(c.streaming, c.streaming ? stream_ns : plain_ns, 1 << 20);
  }
}

TEST(stream_copy, the_chooser_measures_both_in_runs_then_keeps_the_cheaper_and_looks_again) {
  store_chooser ch;
  // The first (short) epoch: plain is the default; streaming is probed first (8 copies,
  // the last 4 measured), plain measured after its own warm-up.
  for (uint32_t k = 0; k < store_chooser::first_epoch; ++k) {
    const store_chooser::choice c = ch.pick();
    EXPECT_EQ(c.streaming, k < store_chooser::probe) << "copy " << k;
    EXPECT_EQ(c.measure, (k >= store_chooser::warm && k < store_chooser::probe) ||
                             k >= store_chooser::probe + store_chooser::warm)
        << "copy " << k;
    if (c.measure) ch.record(c.streaming, c.streaming ? 2000 : 4000, 1 << 20);
  }
  EXPECT_LT(ch.cost(true), ch.cost(false));
  // Streaming is cheaper: it takes every epoch but its 8-copy look at plain stores.
  uint32_t plain = 0, streamed = 0;
  drive(ch, 4, 4000, 2000, &plain, &streamed);
  EXPECT_EQ(plain, 4 * store_chooser::probe);
  EXPECT_EQ(streamed, 4 * (store_chooser::epoch - store_chooser::probe));
  // Streaming gets dearer (the target stopped reading what arrives): the averages cross
  // within a few epochs and plain stores take over, looking at streaming 8 copies an epoch.
  plain = streamed = 0;
  drive(ch, 4, 4000, 12000, &plain, &streamed);
  EXPECT_GT(ch.cost(true), ch.cost(false));
  plain = streamed = 0;
  drive(ch, 4, 4000, 12000, &plain, &streamed);
  EXPECT_EQ(streamed, 4 * store_chooser::probe);
  EXPECT_EQ(plain, 4 * (store_chooser::epoch - store_chooser::probe));
}

TEST(stream_copy, chosen_copies_copy_and_record_what_they_cost) {
  store_chooser ch;
  std::vector<uint8_t> src(1 << 16), dst(1 << 16, 0);
  for (uint32_t k = 0; k < store_chooser::first_epoch; ++k) {
    for (size_t i = 0; i < src.size(); i += 4096) src[i] = static_cast<uint8_t>(k + i);
    gdaki::soft::chosen_copy(ch, dst.data(), src.data(), src.size());
    ASSERT_EQ(dst, src) << "copy " << k;
  }
  EXPECT_GT(ch.cost(false), 0u);
  EXPECT_GT(ch.cost(true), 0u);
}

}  // namespace
