// Same-host cross-process copies (CMA: process_vm_readv / process_vm_writev) are granted
// only after a probe of the actual peer succeeds; where it fails, the connection carries
// payloads in frames and the log says so once (docs/soft-nic.md, Wires and Security).
// (1) The probe reads the peer's own memory: a hello whose probe address does not hold its
//     nonce gets no CMA, the same hello with the honest address does. The old rule (a
//     copy from oneself) granted both, so the first half fails with it.
// (2) With every cross-memory attach of the target refused (test hook, as Yama
//     ptrace_scope 1 refuses a process that is not a descendant), 64 KiB WRITEs and READs,
//     above the single-copy threshold, still complete with the right bytes through
//     frames, and the target's log names the fallback once. With the old self-probe, CMA
//     was granted, the first 64 KiB WRITE's copy was refused, and the QP went to ERR.
// (3) The same against a real Yama ptrace_scope >= 1 as a non-root user: the target is
//     the child, so it may not attach to its parent. Run as root, the test runs itself
//     again as user nobody (root's CAP_SYS_PTRACE passes Yama). SKIPs without Yama, with
//     ptrace_scope 0 (a test does not change a machine-wide setting), or without a user
//     to drop to.
#include <gmock/gmock.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "../../src/providers/soft/wire/wire_test_hooks.hpp"
#include "rogue_client.hpp"
#include "wire_fixture.hpp"

using namespace wire_test;
using ::testing::HasSubstr;

namespace {

constexpr size_t bytes = 64 * 1024;

// The target (spawned): serves its buffer; "report" answers with its last log line and
// how many it wrote.
int target(uint16_t port, const std::string& mode) {
  if (mode == "simulate") gdaki::soft::wire::test_hooks::refuse_cma.store(true);
  use_wire("shm");
  side t(1u << 20);
  oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
  const setup_blob peer = from_bytes(x.recv());
  t.connect(peer, peer.token);
  x.send(to_bytes(t.blob(peer.token)));
  for (;;) {
    const std::string cmd = text(x.recv(60000));
    if (cmd == "report") {
      x.send(text(std::to_string(gdaki::soft::wire::auth::reports()) + " " + gdaki::soft::wire::auth::last_report()));
    } else {
      break;
    }
  }
  return 0;
}

const bool g_is_peer = run_as_peer([](const std::string& role, uint16_t port, const std::string& arg) {
  if (role == "target") return target(port, arg);
  return 3;
});

void writes_and_reads_fall_back_to_frames(const char* mode) {
  use_wire("shm");
  side s(1u << 20);
  for (size_t i = 0; i < bytes; ++i) s.buf[i] = static_cast<uint8_t>(i * 7 + 1);
  const auto token = random_token();
  oob::tcp_exchange srv = oob::tcp_exchange::listen("127.0.0.1");
  const pid_t child = spawn_peer("target", srv.port(), mode);
  srv.accept(30000);
  srv.send(to_bytes(s.blob(token.data())));
  const setup_blob t = from_bytes(srv.recv(30000));
  s.connect(t, token.data());
  for (int round = 0; round < 4; ++round) {
    const dev::sge w = sg(s.buf.data(), bytes, s.mr.lkey());
    post_write(*s.ep.h, t.buf + round * bytes, t.rkey, &w, 1);
    ASSERT_TRUE(wait_cqe(s.ep, false).c.ok()) << "WRITE " << round;
    const dev::sge r = sg(s.buf.data() + 4 * bytes, bytes, s.mr.lkey());
    post_read(*s.ep.h, t.buf + round * bytes, t.rkey, &r, 1);
    ASSERT_TRUE(wait_cqe(s.ep, false).c.ok()) << "READ " << round;
    ASSERT_EQ(std::memcmp(s.buf.data(), s.buf.data() + 4 * bytes, bytes), 0) << round;
  }
  srv.send(text("report"));
  const std::string rep = text(srv.recv(30000));
  srv.send(text("bye"));
  EXPECT_EQ(reap(child), 0);
  EXPECT_EQ(rep.substr(0, 2), "1 ") << rep;  // said once, for all eight copies
  EXPECT_THAT(rep, HasSubstr("cross-memory attach to pid " + std::to_string(::getpid()) + " refused"));
  EXPECT_THAT(rep, HasSubstr("payloads travel in frames"));
}

TEST(wire_cma, the_probe_is_made_against_the_peer_itself) {
  use_wire("shm");
  verbs::device d = verbs::device::open("soft0");
  (void)gdaki::soft::local_address(d);
  const auto secret = rogue::own_secret();
  int fd = rogue::dial_unix(::getpid(), 0);
  ASSERT_GE(fd, 0);
  rogue::handshake_result r = rogue::handshake(fd, secret, rogue::cma_ask::bad_probe);
  EXPECT_TRUE(r.accepted);
  EXPECT_FALSE(r.cma) << "granted although the peer's memory did not read back";
  ::close(fd);
  fd = rogue::dial_unix(::getpid(), 0);
  r = rogue::handshake(fd, secret, rogue::cma_ask::honest_probe);
  EXPECT_TRUE(r.accepted);
  EXPECT_TRUE(r.cma) << "the honest probe must pass here (root or no Yama restriction)";
  ::close(fd);
}

TEST(wire_cma, refused_probe_simulated_falls_back_to_frames_and_says_so_once) {
  writes_and_reads_fall_back_to_frames("simulate");
}

// Runs this test again in a new process as `user` (no capabilities: Yama then applies),
// with the same filter; returns its exit status, or -1 with *why set.
int rerun_as(const char* user, std::string* why) {
  const passwd* pw = ::getpwnam(user);
  if (pw == nullptr) {
    *why = std::string("no user '") + user + "' to drop to";
    return -1;
  }
  const uid_t uid = pw->pw_uid;
  const gid_t gid = pw->pw_gid;
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = std::string("--gtest_filter=") + t->test_suite_name() + "." + t->name();
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, filter.data(), nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    // setgroups first (it needs root), then the group, then the user: afterwards no
    // capability is left, so Yama's rule is the one that decides.
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(101);
    ::setenv("GDAKI_WIRE_TEST_DROPPED", "1", 1);
    ::execv(exe, argv);
    ::_exit(102);
  }
  if (pid < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  const int rc = reap(pid);
  if (rc == 101) *why = std::string("could not become ") + user;
  if (rc == 102) *why = std::string("could not run the test binary as ") + user + " (a directory it may not enter?)";
  return rc;
}

TEST(wire_cma, refused_by_yama_ptrace_scope_falls_back_to_frames_and_says_so_once) {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  if (!(f >> scope)) GTEST_SKIP() << "no Yama on this kernel: CMA is not refused here (the simulated case covers it)";
  if (scope < 1) GTEST_SKIP() << "Yama ptrace_scope is " << scope << ": CMA is not refused here (not changed by a test)";
  if (::geteuid() == 0) {
    // Root passes Yama (CAP_SYS_PTRACE): the case runs again as nobody.
    ASSERT_EQ(std::getenv("GDAKI_WIRE_TEST_DROPPED"), nullptr) << "still root after dropping to nobody";
    std::string why;
    const int rc = rerun_as("nobody", &why);
    if (rc < 0 || rc == 101 || rc == 102) GTEST_SKIP() << "cannot run as a non-root user: " << why;
    EXPECT_EQ(rc, 0) << "the case failed as user nobody under ptrace_scope " << scope << " (its output is above)";
    return;
  }
  writes_and_reads_fall_back_to_frames("real");
}

}  // namespace
