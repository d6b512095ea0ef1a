// The communicator across processes on this host (the soft NIC's same-host wire): 2, 3
// and 4 ranks of gdaki_comm_rank created through a unique id written by rank 0, and
// through RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT; and a rank killed with SIGKILL,
// which the others must name within their timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <functional>
#include <vector>

#include "wire/netns.hpp"

extern char** environ;

namespace {

uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string s;
  for (size_t i = 0; i < 2 * bytes; ++i) s += "0123456789abcdef"[rd() & 15];
  return s;
}

// Per rank: a command the rank runs under (e.g. `ip netns exec NS`) and extra variables.
using per_rank = std::function<std::vector<std::string>(int)>;

// Starts `size` ranks with `args`; returns each one's raw wait status (killed after 240 s).
std::vector<int> run_ranks(int size, const std::vector<std::string>& args, const per_rank& prefix = {},
                           const per_rank& extra_env = {}, const std::string& master = "127.0.0.1") {
  const std::string port = std::to_string(free_port()), secret = random_hex(32);
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      if (kv.rfind("RANK=", 0) && kv.rfind("WORLD_SIZE=", 0) && kv.rfind("MASTER_", 0) && kv.rfind("GDAKI_SOFT_SECRET=", 0) &&
          kv.rfind("GDAKI_SOFT_WIRE_TIMEOUT_MS=", 0))
        env.push_back(kv);
    }
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(size));
    env.push_back("MASTER_ADDR=" + master);
    env.push_back("MASTER_PORT=" + port);
    env.push_back("GDAKI_SOFT_SECRET=" + secret);
    if (extra_env)
      for (auto& kv : extra_env(r)) env.push_back(kv);
    std::vector<char*> ev, av;
    for (auto& s : env) ev.push_back(s.data());
    ev.push_back(nullptr);
    std::vector<std::string> a = prefix ? prefix(r) : std::vector<std::string>{};
    a.push_back(GDAKI_COMM_RANK_EXE);
    for (auto& s : args) a.push_back(s);
    for (auto& s : a) av.push_back(s.data());
    av.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawnp(&pid, a[0].c_str(), nullptr, nullptr, av.data(), ev.data()) != 0) pid = -1;
    pids.push_back(pid);
  }
  std::vector<int> st(pids.size(), -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0 || st[i] != -1) continue;
      int s = 0;
      if (::waitpid(pids[i], &s, WNOHANG) == pids[i]) {
        st[i] = s;
        --left;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (pids[i] > 0 && st[i] == -1) ::kill(pids[i], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return st;
}

bool exited_ok(int s) { return WIFEXITED(s) && WEXITSTATUS(s) == 0; }

class comm_procs : public ::testing::TestWithParam<int> {};

TEST_P(comm_procs, unique_id_every_scenario) {
  const std::string path = ::testing::TempDir() + "gdaki_comm_id_" + std::to_string(::getpid()) + "_" +
                           std::to_string(GetParam());
  std::remove(path.c_str());
  const auto st = run_ranks(GetParam(), {"--boot", "id-file:" + path, "--scenario", "all"});
  std::remove(path.c_str());
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(exited_ok(st[r])) << "rank " << r << " wait status " << st[r];
}

TEST_P(comm_procs, environment_variables_every_scenario) {
  const auto st = run_ranks(GetParam(), {"--boot", "env", "--scenario", "all"});
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(exited_ok(st[r])) << "rank " << r << " wait status " << st[r];
}

INSTANTIATE_TEST_SUITE_P(ranks, comm_procs, ::testing::Values(2, 3, 4));

// Two "hosts": rank 0 and rank 1 in two network namespaces joined by a veth pair, the
// rendezvous and the soft wire over TCP between them.
TEST(comm_procs_netns, two_ranks_in_two_namespaces_over_the_tcp_wire) {
  netns::veth_pair pair;
  std::string why;
  if (!pair.create(&why)) GTEST_SKIP() << "two network namespaces joined by a veth pair: " << why;
  const auto st = run_ranks(
      2, {"--boot", "env", "--scenario", "all"},
      [&](int r) { return std::vector<std::string>{"ip", "netns", "exec", r == 0 ? pair.ns1 : pair.ns2}; },
      [&](int r) {
        return std::vector<std::string>{"GDAKI_SOFT_WIRE=tcp", "GDAKI_SOFT_LISTEN=" + (r == 0 ? pair.ip1 : pair.ip2)};
      },
      pair.ip1);
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(exited_ok(st[r])) << "rank " << r << " wait status " << st[r];
}

TEST(comm_procs_failure, killed_rank_is_named_by_the_others_within_the_timeout) {
  const auto st = run_ranks(3, {"--boot", "env", "--scenario", "kill"});
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(exited_ok(st[0])) << "rank 0 wait status " << st[0];
  EXPECT_TRUE(exited_ok(st[1])) << "rank 1 wait status " << st[1];
  EXPECT_TRUE(WIFSIGNALED(st[2]) && WTERMSIG(st[2]) == SIGKILL) << "rank 2 wait status " << st[2];
}

}  // namespace
