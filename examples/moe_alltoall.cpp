// MoE dispatch/combine as an all-to-all through the communicator: 4 ranks in this process,
// each a one-warp "kernel" on host-grid CPU threads (examples/moe_alltoall_kernels.hpp, the
// same bodies tests/comm compiles for sm_90). Every round each rank sends a different
// number of tokens to every peer (itself included), with one signal per chunk; receivers
// wait on the signals, read the counts, and send every token back (combine). Each rank
// checks that every token came home unchanged. Exit status 0 only if all did.
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "gdaki/comm/communicator.hpp"
#include "gdaki/device/host_grid.hpp"
#include "moe_alltoall_kernels.hpp"

namespace {

constexpr int ranks = 4, rounds = 20;
constexpr uint64_t token_bytes = 256, max_tokens = 64, slot = token_bytes * max_tokens;

uint64_t tokens(int from, int to, int round) { return (uint64_t(from) * 7 + uint64_t(to) * 3 + uint64_t(round) * 5) % (max_tokens + 1); }
uint8_t byte_of(int from, int to, int round, uint64_t i) { return static_cast<uint8_t>(from * 31 + to * 17 + round * 13 + i); }

// One rank: windows, then `rounds` dispatch + combine launches. Returns wrong bytes.
uint64_t run_rank(gdaki::comm::communicator& c, std::string* err) {
  const int me = c.rank(), n = c.size();
  const auto send = c.alloc_window(slot * n), recv = c.alloc_window(slot * n), back = c.alloc_window(slot * n),
             counts = c.alloc_window(8 * n);
  auto* s = static_cast<uint8_t*>(c.window_base(send));
  const auto* b = static_cast<const uint8_t*>(c.window_base(back));
  uint64_t wrong = 0;
  std::vector<uint64_t> bytes_to(n);
  for (int r = 1; r <= rounds && err->empty(); ++r) {
    for (int p = 0; p < n; ++p) {
      bytes_to[p] = tokens(me, p, r) * token_bytes;
      for (uint64_t i = 0; i < bytes_to[p]; ++i) s[p * slot + i] = byte_of(me, p, r, i);
    }
    moe::args a{&c.device(), send, recv, back, counts, slot, bytes_to.data(), uint64_t(r), 10'000'000'000ull};
    std::vector<gdaki::status> st(32, gdaki::status::ok);
    gdaki::dev::host::launch(1, 32, [&] { st[gdaki::dev::arch::lane_id()] = moe::dispatch(a); });
    gdaki::dev::host::launch(1, 32, [&] { st[gdaki::dev::arch::lane_id()] = moe::combine(a); });
    for (gdaki::status x : st)
      if (x != gdaki::status::ok) *err = std::string("round ") + std::to_string(r) + ": " + gdaki::to_string(x) + " " + c.describe_error();
    for (int p = 0; p < n; ++p)
      for (uint64_t i = 0; i < bytes_to[p]; ++i) wrong += b[p * slot + i] != byte_of(me, p, r, i);
    c.barrier();  // nobody starts the next round while a peer still reads this one's windows
  }
  c.finalize();
  return wrong;
}

}  // namespace

int main() try {
  gdaki::comm::options o;
  o.signals = 2 * ranks;
  auto comms = gdaki::comm::communicator::create_local(ranks, o);
  std::vector<uint64_t> wrong(ranks);
  std::vector<std::string> errs(ranks);
  std::vector<std::thread> t;
  for (int r = 0; r < ranks; ++r)
    t.emplace_back([&, r] {
      try {
        wrong[r] = run_rank(comms[r], &errs[r]);
      } catch (const std::exception& e) {
        errs[r] = e.what();
      }
    });
  for (auto& x : t) x.join();
  bool ok = true;
  for (int r = 0; r < ranks; ++r) {
    std::printf("rank %d: %d rounds of dispatch + combine, %llu wrong bytes%s%s\n", r, rounds,
                static_cast<unsigned long long>(wrong[r]), errs[r].empty() ? "" : ", error: ", errs[r].c_str());
    ok = ok && wrong[r] == 0 && errs[r].empty();
  }
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "moe_alltoall: %s\n", e.what());
  return 1;
}
