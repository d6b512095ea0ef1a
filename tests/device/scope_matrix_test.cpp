// Every scope x sharing combination (thread / warp / block x exclusive / block / grid),
// run on CPU threads through the host grid launcher against the soft NIC. Each thread
// runs the same kernel body (device_kernels.hpp: matrix_kernel): put, p, get, fetch-add,
// CAS (+ _wait forms), signal add / set, put_signal, fence, quiet. Exclusive sharing gives
// every thread / warp / block its own QP; block sharing one QP per block; grid one QP.
//
// Geometry: 2 blocks of 48 threads, so each block has a full warp and a partial one
// (16 lanes), and warp/block collectives are exercised with uneven lane counts.
#include <algorithm>
#include <set>

#include "device/device_fixture.hpp"

using namespace device_test;
using gdaki::status;
namespace d = gdaki::dev;

namespace {

constexpr uint32_t blocks = 2, threads = 48, total = blocks * threads;
constexpr uint32_t region = 4096;

template <typename Scope, sharing S>
uint32_t qps_needed() {
  if constexpr (S == sharing::grid) {
    return 1;
  } else if constexpr (S == sharing::block) {
    return blocks;
  } else if constexpr (std::is_same_v<Scope, d::scope_thread>) {
    return total;
  } else if constexpr (std::is_same_v<Scope, d::scope_warp>) {
    return blocks * ((threads + 31) / 32);
  } else {
    return blocks;
  }
}

template <typename Scope, sharing S>
void run_matrix() {
  world w;
  const uint32_t nqp = qps_needed<Scope, S>();
  pair_options o;
  o.sq_wqebbs = 128;  // a block's batch of 48 put_signals is 96 WQEBBs
  w.make_pairs(nqp, o);
  reg_buffer src(w.pda, size_t{total} * region, verbs::access::local_write);
  reg_buffer got(w.pda, size_t{total} * region, verbs::access::local_write);
  reg_buffer results(w.pda, size_t{total} * 32, verbs::access::local_write);
  reg_buffer dst(w.pdb, size_t{total} * region, verbs::access::all);
  reg_buffer words(w.pdb, 8 * (matrix_word::per_thread + 4 * total), verbs::access::all);
  std::vector<uint64_t> steps(size_t{total} * matrix_step::count, ~0ull);
  std::vector<uint64_t> values(size_t{total} * matrix_value::count, ~0ull);
  matrix_args a{w.handles.data(), src.local(), got.local(), results.local(), dst.remote(), words.remote(), region,
                steps.data(), values.data(), 5'000'000'000ull};

  const uint64_t t0 = now_ns();
  d::host::launch(blocks, threads, [&] { matrix_kernel<Scope, S>(a); });
  ::testing::Test::RecordProperty("elapsed_ms", static_cast<int>((now_ns() - t0) / 1000000));

  uint64_t skipped = 0, fa_sum = 0;
  std::set<uint64_t> fa_olds;
  for (uint32_t t = 0; t < total; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    const uint64_t* s = &steps[size_t{t} * matrix_step::count];
    const uint64_t* v = &values[size_t{t} * matrix_value::count];
    for (uint32_t i = 0; i < matrix_step::count; ++i) {
      if (i == matrix_step::get_bad) {
        EXPECT_EQ(s[i], 0u) << "get read back mismatching bytes";
      } else {
        EXPECT_EQ(st(s[i]), status::ok) << "step " << i;
      }
    }
    const uint32_t bytes = matrix_put_bytes(t);
    const uint8_t* mine = dst.data() + size_t{t} * region;
    EXPECT_EQ(mismatches(reinterpret_cast<uint64_t>(mine), t, 0, bytes), 0u) << "put data";
    EXPECT_EQ(mine[bytes], 0) << "put wrote past its length";
    uint64_t pv;
    std::memcpy(&pv, mine + 1024, 8);
    EXPECT_EQ(pv, 0x5050000000000000ull | t) << "p value";
    EXPECT_EQ(mismatches(reinterpret_cast<uint64_t>(mine + 2048), t, 1, bytes), 0u) << "put_signal data";
    const uint64_t* pw = words.words() + matrix_word::per_thread + 4 * t;
    EXPECT_EQ(pw[0], 0xabc0000000000000ull | t) << "signal set";
    EXPECT_EQ(v[matrix_value::cas_old], 0u) << "successful CAS returns the compare value";
    EXPECT_EQ(v[matrix_value::cas_fail_old], t + 1) << "failed CAS returns the current value";
    EXPECT_EQ(pw[1], t + 1u) << "failed CAS left the word alone";
    EXPECT_EQ(v[matrix_value::fa_wait_old], 0u);
    EXPECT_EQ(pw[2], 1000u + t);
    fa_olds.insert(v[matrix_value::fa_old]);
    fa_sum += t + 1;
    skipped += v[matrix_value::skipped_signal];
  }
  EXPECT_EQ(words.words()[matrix_word::fa_counter], fa_sum);
  EXPECT_EQ(fa_olds.size(), size_t{total}) << "fetch-add old values are distinct";
  EXPECT_EQ(words.words()[matrix_word::signal_add], total - skipped) << "skipping lanes posted nothing";
  if (!std::is_same_v<Scope, d::scope_thread>) {
    EXPECT_GT(skipped, 0u);
  }
  EXPECT_EQ(words.words()[matrix_word::ps_counter], total);
  for (uint32_t q = 0; q < nqp; ++q) {
    const qp_handle& h = w.nic(q);
    EXPECT_EQ(h.sq_completed, h.sq_reserved) << "QP " << q;
    EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), d::no_error_index) << "QP " << q;
  }
}

#define MATRIX_TEST(scope, share)                                     \
  TEST(device_scope_matrix, scope##_scope_with_##share##_sharing) {   \
    run_matrix<d::scope_##scope, sharing::share>();                   \
  }

MATRIX_TEST(thread, exclusive)
MATRIX_TEST(thread, block)
MATRIX_TEST(thread, grid)
MATRIX_TEST(warp, exclusive)
MATRIX_TEST(warp, block)
MATRIX_TEST(warp, grid)
MATRIX_TEST(block, exclusive)
MATRIX_TEST(block, block)
MATRIX_TEST(block, grid)

}  // namespace
