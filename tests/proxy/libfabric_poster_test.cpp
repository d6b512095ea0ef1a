// The libfabric poster live between two processes (fork), over libfabric's tcp (with rxm)
// and shm providers: puts, inline puts, gets, signals (add and set), put_signal ordering
// (checked by the target while it happens), fetch-add and compare-swap results, all
// through the proxy ring and the proxy service; data verified byte for byte on both
// sides and every operation's completion counted exactly once. A provider that this
// machine lacks makes the test SKIP with libfabric's reason.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gdaki/device/arch.hpp"
#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/libfabric_poster.hpp"
#include "gdaki/proxy/proxy_service.hpp"

using namespace gdaki;
using namespace gdaki::proxy;

namespace {

constexpr uint32_t puts = 64, put_stride = 4096;
constexpr uint32_t ps_rounds = 32, ps_bytes = 8192;  // first half signal add, second half set
constexpr uint32_t fetch_adds = 16;
constexpr uint32_t signal_adds = 10, signal_add_value = 3;
constexpr uint64_t signal_set_value = 0x0123456789abcdefull;
constexpr uint32_t get_src_bytes = 64 * 1024;
constexpr uint64_t wait_ns = 30'000'000'000ull;

// The target's registered memory (child process).
struct alignas(64) target_mem {
  uint8_t put_area[puts * put_stride];
  uint8_t inline_area[64];
  uint8_t ps_area[ps_rounds * ps_bytes];
  uint8_t get_src[get_src_bytes];
  uint64_t sig_add;
  uint64_t sig_set;
  uint64_t ps_count;  // put_signal_add target
  uint64_t ps_last;   // put_signal_set target
  uint64_t fa_word;
  uint64_t cas_word;
};

// The initiator's registered memory (parent process).
struct alignas(64) initiator_mem {
  uint8_t src[puts * put_stride];
  uint8_t ps_src[ps_rounds * ps_bytes];
  uint8_t get_dst[puts * put_stride];
  uint8_t get_pattern[get_src_bytes];
  uint64_t fa_results[fetch_adds];
  uint64_t cas_results[2];
};

uint8_t pattern(uint32_t stream, uint32_t i) { return static_cast<uint8_t>((stream * 131u + i * 7u + 1u) & 0xff); }
uint32_t put_len(uint32_t i) { return 1 + (i * 613u) % put_stride; }
const uint8_t inline_bytes[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                  0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0, 0x0f};
constexpr uint32_t inline_lens[3] = {1, 7, 16};
constexpr uint32_t inline_offsets[3] = {0, 8, 32};

template <typename T>
T* alloc_zeroed() {
  void* p = std::aligned_alloc(64, sizeof(T));
  std::memset(p, 0, sizeof(T));
  return static_cast<T*>(p);
}

// --- out-of-band channel: a socketpair between parent and child ---------------------------

bool send_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, b, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* p, size_t n, int timeout_ms = 60000) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    const ssize_t k = ::recv(fd, b, n, 0);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_blob(int fd, const void* p, uint32_t n) { return send_all(fd, &n, sizeof n) && send_all(fd, p, n); }
bool send_string(int fd, const std::string& s) { return send_blob(fd, s.data(), static_cast<uint32_t>(s.size())); }
bool recv_blob(int fd, std::vector<uint8_t>* out) {
  uint32_t n = 0;
  if (!recv_all(fd, &n, sizeof n) || n > (1u << 20)) return false;
  out->resize(n);
  return n == 0 || recv_all(fd, out->data(), n);
}
bool recv_string(int fd, std::string* s) {
  std::vector<uint8_t> b;
  if (!recv_blob(fd, &b)) return false;
  s->assign(b.begin(), b.end());
  return true;
}

libfabric_options options_for(const std::string& provider) {
  libfabric_options o;
  o.provider = provider;
  if (provider.find("tcp") != std::string::npos) o.node = "127.0.0.1";  // loopback only
  return o;
}

// --- the target (child process): exports memory, drives progress, checks as it goes -------

std::string check_slot(const target_mem& m, uint32_t round) {
  for (uint32_t j = 0; j < ps_bytes; ++j)
    if (m.ps_area[round * ps_bytes + j] != pattern(1000 + round, j))
      return "put_signal round " + std::to_string(round) + ": signal seen before data byte " + std::to_string(j);
  return {};
}

int run_target(int fd, const std::string& provider) {
  alarm(120);  // never outlive a stuck parent
  std::unique_ptr<libfabric_poster> p;
  std::string why;
  if (libfabric_poster::open(options_for(provider), &p, &why) != status::ok) {
    send_string(fd, "SKIP " + why);
    return 0;
  }
  target_mem* m = alloc_zeroed<target_mem>();
  for (uint32_t j = 0; j < get_src_bytes; ++j) m->get_src[j] = pattern(2000, j);
  m->cas_word = 100;
  uint32_t handle = 0;
  region_export region{};
  if (p->register_memory(m, sizeof *m, &handle) != status::ok || p->export_region(handle, &region) != status::ok) {
    send_string(fd, "FAIL register_memory");
    return 1;
  }
  const std::vector<uint8_t> addr = p->address();
  if (!send_string(fd, "OK") || !send_blob(fd, addr.data(), static_cast<uint32_t>(addr.size())) ||
      !send_all(fd, &region, sizeof region))
    return 1;
  std::vector<uint8_t> peer_addr;
  uint16_t peer = 0;
  if (!recv_blob(fd, &peer_addr) || p->add_peer(peer_addr, &peer) != status::ok) return 1;

  // Serve: drive progress (manual-progress providers execute incoming RMA and atomics
  // inside poll) and check put_signal ordering live, until the parent says done.
  std::string problems;
  uint64_t adds_checked = 0;
  completion none[4];
  for (;;) {
    p->poll(none, 4);
    const uint64_t count = dev::arch::load_acquire(&m->ps_count);
    for (; adds_checked < count && adds_checked < ps_rounds / 2; ++adds_checked) {
      // Signals may arrive in any order, but count c means c data puts are visible;
      // which c is not known, so check that at least c slots are complete.
      uint32_t complete = 0;
      for (uint32_t r = 0; r < ps_rounds / 2; ++r) complete += check_slot(*m, r).empty() ? 1 : 0;
      if (complete < count && problems.empty())
        problems = "put_signal_add: count " + std::to_string(count) + " with " + std::to_string(complete) +
                   " complete slots";
    }
    const uint64_t last = dev::arch::load_acquire(&m->ps_last);
    if (last != 0 && problems.empty()) {
      if (last <= ps_rounds / 2 || last > ps_rounds) {
        problems = "put_signal_set: bad value " + std::to_string(last);
      } else {
        const std::string e = check_slot(*m, static_cast<uint32_t>(last - 1));
        if (!e.empty()) problems = e;
      }
    }
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0) break;
  }
  std::string cmd;
  if (!recv_string(fd, &cmd) || cmd != "DONE") return 1;

  // Final state, byte for byte.
  auto add = [&](const std::string& s) {
    if (problems.size() < 2000) problems += s + "; ";
  };
  for (uint32_t i = 0; i < puts; ++i) {
    for (uint32_t j = 0; j < put_stride; ++j) {
      const uint8_t want = j < put_len(i) ? pattern(i, j) : 0;
      if (m->put_area[i * put_stride + j] != want) {
        add("put " + std::to_string(i) + " byte " + std::to_string(j));
        break;
      }
    }
  }
  for (int k = 0; k < 3; ++k)
    if (std::memcmp(m->inline_area + inline_offsets[k], inline_bytes, inline_lens[k]) != 0)
      add("put_inline " + std::to_string(k));
  if (m->inline_area[inline_offsets[0] + 1] != 0) add("put_inline wrote past its length");
  for (uint32_t r = 0; r < ps_rounds; ++r) {
    const std::string e = check_slot(*m, r);
    if (!e.empty()) add("final " + e);
  }
  if (m->sig_add != uint64_t{signal_adds} * signal_add_value) add("sig_add " + std::to_string(m->sig_add));
  if (m->sig_set != signal_set_value) add("sig_set " + std::to_string(m->sig_set));
  if (m->ps_count != ps_rounds / 2) add("ps_count " + std::to_string(m->ps_count));
  if (m->ps_last < ps_rounds / 2 + 1 || m->ps_last > ps_rounds) add("ps_last " + std::to_string(m->ps_last));
  if (m->fa_word != fetch_adds) add("fa_word " + std::to_string(m->fa_word));
  if (m->cas_word != 200) add("cas_word " + std::to_string(m->cas_word));
  send_string(fd, problems);
  std::string bye;
  recv_string(fd, &bye);  // keep the endpoint up until the parent is finished with it
  return problems.empty() ? 0 : 1;
}

// --- the initiator (parent) ---------------------------------------------------------------

struct child_process {
  pid_t pid = -1;
  int fd = -1;
  int wait_exit() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid) {
      pid = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    return -1;
  }
  ~child_process() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      wait_exit();
    }
  }
};

bool start_target(const std::string& provider, child_process* c) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::close(sv[0]);
    _exit(run_target(sv[1], provider));
  }
  ::close(sv[1]);
  c->pid = pid;
  c->fd = sv[0];
  return true;
}

class libfabric_poster_live : public ::testing::TestWithParam<const char*> {};

TEST_P(libfabric_poster_live, rma_signals_and_atomics_through_the_proxy_are_exact) {
  const std::string provider = GetParam();
  child_process child;
  ASSERT_TRUE(start_target(provider, &child));
  std::string hello;
  ASSERT_TRUE(recv_string(child.fd, &hello)) << "target did not answer";
  if (hello.rfind("SKIP ", 0) == 0) {
    child.wait_exit();
    GTEST_SKIP() << "libfabric provider " << provider << " unavailable: " << hello.substr(5);
  }
  ASSERT_EQ(hello, "OK");

  std::unique_ptr<libfabric_poster> fab;
  std::string why;
  ASSERT_EQ(libfabric_poster::open(options_for(provider), &fab, &why), status::ok) << why;
  std::cout << "[ INFO     ] provider " << fab->provider() << ", mr_mode 0x" << std::hex << fab->mr_mode()
            << std::dec << "\n";

  std::vector<uint8_t> target_addr;
  region_export target{};
  ASSERT_TRUE(recv_blob(child.fd, &target_addr));
  ASSERT_TRUE(recv_all(child.fd, &target, sizeof target));
  const std::vector<uint8_t> my_addr = fab->address();
  ASSERT_TRUE(send_blob(child.fd, my_addr.data(), static_cast<uint32_t>(my_addr.size())));
  uint16_t peer = 0;
  uint32_t rkey = 0;
  ASSERT_EQ(fab->add_peer(target_addr, &peer), status::ok);
  ASSERT_EQ(fab->add_remote_region(peer, target, &rkey), status::ok);

  std::unique_ptr<initiator_mem, decltype(&std::free)> mem(alloc_zeroed<initiator_mem>(), &std::free);
  initiator_mem& m = *mem;
  for (uint32_t i = 0; i < puts; ++i)
    for (uint32_t j = 0; j < put_stride; ++j) m.src[i * put_stride + j] = pattern(i, j);
  for (uint32_t r = 0; r < ps_rounds; ++r)
    for (uint32_t j = 0; j < ps_bytes; ++j) m.ps_src[r * ps_bytes + j] = pattern(1000 + r, j);
  uint32_t lkey = 0;
  ASSERT_EQ(fab->register_memory(&m, sizeof m, &lkey), status::ok);

  const auto at = [&](size_t offset) { return target.base + offset; };
  const auto local = [&](const void* p) { return reinterpret_cast<uint64_t>(p); };
  enum : uint16_t { c_put, c_inline, c_signal, c_put_signal, c_fetch_add, c_cas, c_get, c_quiet, n_counters };

  host_ring ring;
  ASSERT_EQ(ring.init(6, n_counters), status::ok);
  ring_handle& r = ring.handle();
  proxy_service service(r, *fab);
  ASSERT_EQ(service.start(), status::ok);
  const auto push = [&](const descriptor& d) { return ring_push(r, d, wait_ns); };

  // Puts of odd lengths and inline puts.
  for (uint32_t i = 0; i < puts; ++i)
    ASSERT_EQ(push(make_put(peer, at(offsetof(target_mem, put_area) + i * put_stride), rkey,
                            local(m.src + i * put_stride), lkey, put_len(i), c_put)),
              status::ok);
  for (int k = 0; k < 3; ++k) {
    uint64_t lo = 0, hi = 0;
    std::memcpy(&lo, inline_bytes, 8);
    std::memcpy(&hi, inline_bytes + 8, 8);
    ASSERT_EQ(push(make_put_inline(peer, at(offsetof(target_mem, inline_area) + inline_offsets[k]), rkey, lo, hi,
                                   inline_lens[k], c_inline)),
              status::ok);
  }
  // Signals: adds, and one set.
  for (uint32_t i = 0; i < signal_adds; ++i)
    ASSERT_EQ(push(make_signal(peer, at(offsetof(target_mem, sig_add)), rkey, false, signal_add_value, c_signal)),
              status::ok);
  ASSERT_EQ(push(make_signal(peer, at(offsetof(target_mem, sig_set)), rkey, true, signal_set_value, c_signal)),
            status::ok);
  // put_signal: the target checks that no signal is visible before its data.
  for (uint32_t i = 0; i < ps_rounds; ++i) {
    const bool set = i >= ps_rounds / 2;
    const size_t sig = set ? offsetof(target_mem, ps_last) : offsetof(target_mem, ps_count);
    ASSERT_EQ(push(make_put_signal(peer, at(offsetof(target_mem, ps_area) + i * ps_bytes), rkey,
                                   local(m.ps_src + i * ps_bytes), lkey, ps_bytes, at(sig), rkey, set,
                                   set ? i + 1 : 1, c_put_signal)),
              status::ok);
  }
  // Fetch-adds: the old values are a permutation of 0..n-1.
  for (uint32_t i = 0; i < fetch_adds; ++i)
    ASSERT_EQ(push(make_fetch_add(peer, at(offsetof(target_mem, fa_word)), rkey, 1, local(&m.fa_results[i]), lkey,
                                  c_fetch_add)),
              status::ok);
  // Compare-swap: succeeds (100 -> 200), then fails (expects 100, finds 200).
  ASSERT_EQ(push(make_compare_swap(peer, at(offsetof(target_mem, cas_word)), rkey, 100, 200,
                                   local(&m.cas_results[0]), lkey, c_cas)),
            status::ok);
  ASSERT_EQ(ring_wait_counter(r, c_cas, 1, wait_ns), status::ok);
  ASSERT_EQ(push(make_compare_swap(peer, at(offsetof(target_mem, cas_word)), rkey, 100, 300,
                                   local(&m.cas_results[1]), lkey, c_cas)),
            status::ok);

  ASSERT_EQ(ring_wait_counter(r, c_put, puts, wait_ns), status::ok) << to_string(ring_error(r));
  ASSERT_EQ(ring_wait_counter(r, c_inline, 3, wait_ns), status::ok);
  // Gets: the puts read back (their completions mean delivered), and the target's pattern.
  for (uint32_t i = 0; i < puts; ++i)
    ASSERT_EQ(push(make_get(peer, local(m.get_dst + i * put_stride), lkey,
                            at(offsetof(target_mem, put_area) + i * put_stride), rkey, put_len(i), c_get)),
              status::ok);
  ASSERT_EQ(push(make_get(peer, local(m.get_pattern), lkey, at(offsetof(target_mem, get_src)), rkey, get_src_bytes,
                          c_get)),
            status::ok);
  ASSERT_EQ(push(make_barrier(true, c_quiet)), status::ok);
  ASSERT_EQ(ring_wait_counter(r, c_quiet, 1, wait_ns), status::ok) << to_string(ring_error(r));

  // Every completion counted exactly once: after the quiet nothing is in flight, so the
  // counters are final.
  EXPECT_EQ(ring_counter(r, c_put), puts);
  EXPECT_EQ(ring_counter(r, c_inline), 3u);
  EXPECT_EQ(ring_counter(r, c_signal), signal_adds + 1);
  EXPECT_EQ(ring_counter(r, c_put_signal), ps_rounds);
  EXPECT_EQ(ring_counter(r, c_fetch_add), fetch_adds);
  EXPECT_EQ(ring_counter(r, c_cas), 2u);
  EXPECT_EQ(ring_counter(r, c_get), puts + 1);
  EXPECT_EQ(ring_counter(r, c_quiet), 1u);
  EXPECT_EQ(ring_error(r), status::ok);
  service.stop();
  const proxy_stats st = service.stats();
  EXPECT_EQ(st.posted, st.completed);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.rejected, 0u);

  for (uint32_t i = 0; i < puts; ++i)
    EXPECT_EQ(std::memcmp(m.get_dst + i * put_stride, m.src + i * put_stride, put_len(i)), 0) << "get " << i;
  for (uint32_t j = 0; j < get_src_bytes; ++j)
    if (m.get_pattern[j] != pattern(2000, j)) {
      ADD_FAILURE() << "get of the target's pattern differs at byte " << j;
      break;
    }
  std::vector<uint64_t> olds(m.fa_results, m.fa_results + fetch_adds);
  std::sort(olds.begin(), olds.end());
  for (uint32_t i = 0; i < fetch_adds; ++i) EXPECT_EQ(olds[i], i) << "fetch-add old values";
  EXPECT_EQ(m.cas_results[0], 100u) << "successful compare-swap returns the old value";
  EXPECT_EQ(m.cas_results[1], 200u) << "failed compare-swap returns the current value";

  // The poster on its own: every cookie comes back exactly once.
  std::multiset<uint64_t> seen;
  const uint32_t direct = 48;
  for (uint32_t i = 0; i < direct; ++i) {
    const descriptor d = i % 2 ? make_put(peer, at(offsetof(target_mem, get_src) + i * 16), rkey,
                                          local(m.src + i * put_stride), lkey, 16, 0)
                               : make_signal(peer, at(offsetof(target_mem, sig_add)), rkey, false, 0, 0);
    status s;
    completion c[8];
    while ((s = fab->post(d, 5000 + i)) == status::again) {
      const size_t n = fab->poll(c, 8);
      for (size_t k = 0; k < n; ++k) seen.insert(c[k].cookie);
    }
    ASSERT_EQ(s, status::ok);
  }
  // Collect until all are back (10 s at most), then 100 ms more: a duplicate would show.
  const uint64_t t0 = dev::arch::clock_ns();
  uint64_t all_back = 0;
  for (;;) {
    const uint64_t now = dev::arch::clock_ns();
    if (now - t0 > 10'000'000'000ull || (all_back != 0 && now - all_back > 100'000'000ull)) break;
    completion c[8];
    const size_t n = fab->poll(c, 8);
    for (size_t k = 0; k < n; ++k) {
      EXPECT_EQ(c[k].result, status::ok);
      seen.insert(c[k].cookie);
    }
    if (all_back == 0 && seen.size() >= direct) all_back = now;
  }
  ASSERT_EQ(seen.size(), direct);
  for (uint32_t i = 0; i < direct; ++i) EXPECT_EQ(seen.count(5000 + i), 1u) << "cookie " << i;

  // The target's verdict, from its side of the wire.
  std::string report;
  ASSERT_TRUE(send_string(child.fd, "DONE"));
  ASSERT_TRUE(recv_string(child.fd, &report));
  EXPECT_EQ(report, "") << "target saw: " << report;
  send_string(child.fd, "BYE");
  EXPECT_EQ(child.wait_exit(), 0);
}

TEST(libfabric_poster, unknown_provider_is_not_supported_with_a_reason) {
  std::unique_ptr<libfabric_poster> p;
  std::string why;
  libfabric_options o;
  o.provider = "no-such-provider";
  EXPECT_EQ(libfabric_poster::open(o, &p, &why), status::not_supported);
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(p, nullptr);
}

std::string provider_test_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(providers, libfabric_poster_live, ::testing::Values("tcp;ofi_rxm", "shm"), provider_test_name);

}  // namespace
