// Two processes, one RC connection over the soft NIC's wire: run without arguments, this
// program starts itself again as the target (`--role target --port N`), the two exchange
// their wire address, QPN, rkey and a connection token over a small TCP rendezvous
// (gdaki/oob/tcp_exchange.hpp), and the initiator posts one put_signal: a 4 KiB RDMA WRITE
// and then an 8-byte signal on the same QP, which the target can never see before the
// data. The target spins on the signal word, checks the bytes and reports back; the exit
// status is 0 only if both processes say ok.
//
// Both processes must hold the job's wire secret (docs/soft-nic.md, Security): the
// documented way is GDAKI_SOFT_SECRET in the environment of both. If it is not set, the
// first process makes a random one and puts it in its own environment, which the target
// inherits; nothing else ever carries it.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gdaki/device/arch.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/oob/tcp_exchange.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

extern char** environ;

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;
namespace oob = gdaki::oob;

namespace {

constexpr uint32_t data_bytes = 4096;
constexpr uint64_t signal_offset = 8192;  // the signal word, after the data in the target buffer
constexpr uint64_t signal_value = 0x600d5167ull;
constexpr uint64_t timeout_ns = 10'000'000'000ull;

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 13 + 7); }

// What each side tells the other at setup.
struct setup_blob {
  uint8_t address[16];  // soft::local_address(): the device's wire address (its "GID")
  uint8_t token[16];    // chosen by the initiator; both QPs are connected with it
  uint32_t qpn;
  uint32_t rkey;        // target only: its buffer's key and address
  uint64_t buf;
};
std::vector<uint8_t> to_bytes(const setup_blob& b) {
  std::vector<uint8_t> v(sizeof(b));
  std::memcpy(v.data(), &b, sizeof(b));
  return v;
}
setup_blob from_bytes(const std::vector<uint8_t>& v) {
  if (v.size() != sizeof(setup_blob)) throw gdaki::error(gdaki::status::invalid, "bad setup blob from the peer");
  setup_blob b{};
  std::memcpy(&b, v.data(), sizeof(b));
  return b;
}

// One side's device, PD and RC QP (with its two CQs).
struct side {
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd{d};
  verbs::cq scq, rcq;
  verbs::qp qp;
  side() {
    verbs::cq_init ci;
    ci.depth = 64;
    scq = verbs::cq(d, ci);
    rcq = verbs::cq(d, ci);
    verbs::qp_init qi;
    qi.send_cq = &scq;
    qi.recv_cq = &rcq;
    qi.sq_wqebbs = 64;
    qp = verbs::qp(pd, qi);
  }
  setup_blob blob(const uint8_t* token) const {
    setup_blob b{};
    const auto a = gdaki::soft::local_address(d);  // also starts this device's listener
    std::memcpy(b.address, a.data(), 16);
    std::memcpy(b.token, token, 16);
    b.qpn = qp.qpn();
    return b;
  }
  // RESET -> RTS towards the peer: its wire address in av.dgid (is_global) plus the token.
  void connect(const setup_blob& peer, const uint8_t* token) {
    verbs::qp_attr at;
    at.av.is_global = true;
    std::memcpy(at.av.dgid, peer.address, 16);
    std::memcpy(at.av.token, token, 16);
    verbs::connect_rc(qp, peer.qpn, verbs::access::all, at);
  }
};

int target(uint16_t port) {
  // The target buffer comes from alloc_shared: on the same host the initiator maps it and
  // the WRITE is one memcpy (any registered memory works; other memory takes one copy).
  void* mem = gdaki::soft::alloc_shared(signal_offset + 4096);
  int rc = 1;
  {
    side s;
    verbs::mr mr(s.pd, mem, signal_offset + 4096, verbs::access::all);
    oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
    const setup_blob peer = from_bytes(x.recv());
    s.connect(peer, peer.token);
    setup_blob mine = s.blob(peer.token);
    mine.rkey = mr.rkey();
    mine.buf = reinterpret_cast<uint64_t>(mem);
    x.send(to_bytes(mine));

    // Nothing tells this process that the WRITE came but the signal word itself.
    const auto* sig = reinterpret_cast<const uint64_t*>(static_cast<uint8_t*>(mem) + signal_offset);
    const uint64_t t0 = dev::arch::clock_ns();
    while (dev::arch::load_acquire(sig) != signal_value && dev::arch::clock_ns() - t0 < timeout_ns) {
      ::usleep(100);
    }
    const bool signalled = dev::arch::load_acquire(sig) == signal_value;
    size_t wrong = 0;
    for (size_t i = 0; i < data_bytes; ++i) wrong += static_cast<const uint8_t*>(mem)[i] != pattern(i);
    const std::string report = !signalled ? "no signal within 10 s"
                               : wrong    ? std::to_string(wrong) + " of 4096 bytes wrong"
                                          : "ok";
    std::printf("target (pid %d): signal %s, %zu of %u bytes wrong: %s\n", static_cast<int>(::getpid()),
                signalled ? "seen" : "NOT seen", wrong, data_bytes, report.c_str());
    x.send(std::vector<uint8_t>(report.begin(), report.end()));
    (void)x.recv();  // "bye": stay until the initiator is done with this QP
    rc = report == "ok" ? 0 : 1;
  }  // the MR goes before the memory under it
  gdaki::soft::free_shared(mem);
  return rc;
}

// Starts this very program as the target; it inherits our environment, secret included.
pid_t spawn_target(uint16_t port) {
  char exe[] = "/proc/self/exe", role_flag[] = "--role", role[] = "target", port_flag[] = "--port";
  std::string port_text = std::to_string(port);
  char* argv[] = {exe, role_flag, role, port_flag, port_text.data(), nullptr};
  pid_t pid = -1;
  if (::posix_spawn(&pid, exe, nullptr, nullptr, argv, environ) != 0) return -1;
  return pid;
}

int reap(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return 1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int initiator() {
  std::random_device rd;
  if (std::getenv("GDAKI_SOFT_SECRET") == nullptr) {  // before any device opens a wire
    std::string hex;
    for (int i = 0; i < 64; ++i) hex += "0123456789abcdef"[rd() & 15];
    ::setenv("GDAKI_SOFT_SECRET", hex.c_str(), 0);
  }
  oob::tcp_exchange x = oob::tcp_exchange::listen("127.0.0.1");
  const pid_t child = spawn_target(x.port());
  if (child <= 0) throw gdaki::error(gdaki::status::io_error, "cannot start the target process");
  bool ok = false;
  try {
    side s;
    std::vector<uint8_t> src(data_bytes);
    for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
    verbs::mr msrc(s.pd, src.data(), src.size(), verbs::access::local_write);
    uint8_t token[16];
    for (uint8_t& b : token) b = static_cast<uint8_t>(rd());

    x.accept();
    x.send(to_bytes(s.blob(token)));
    const setup_blob peer = from_bytes(x.recv());
    s.connect(peer, token);
    dev::cq_handle hs = s.scq.export_handle(), hr = s.rcq.export_handle();
    dev::qp_handle h = s.qp.export_handle(&hs, &hr);

    // The data, then signal := signal_value, as one reservation on one QP (RC order).
    uint64_t ticket = 0;
    gdaki::status st = dev::put_signal(h, {peer.buf, peer.rkey}, {reinterpret_cast<uint64_t>(src.data()), msrc.lkey()},
                                       data_bytes, {peer.buf + signal_offset, peer.rkey}, dev::signal_op::set,
                                       signal_value, &ticket, dev::op_flags::none, timeout_ns);
    if (st == gdaki::status::ok) st = dev::quiet(h, timeout_ns);
    const std::vector<uint8_t> r = x.recv(15000);
    const std::string report(r.begin(), r.end());
    std::printf("initiator (pid %d): put_signal + quiet: %s; the target says: %s\n", static_cast<int>(::getpid()),
                gdaki::to_string(st), report.c_str());
    x.send({'b', 'y', 'e'});
    ok = st == gdaki::status::ok && report == "ok";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "initiator: %s\n", e.what());
    ::kill(child, SIGTERM);
  }
  const int child_rc = reap(child);
  std::printf("target exit status %d\n%s\n", child_rc, ok && child_rc == 0 ? "OK" : "FAILED");
  return ok && child_rc == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc == 5 && std::strcmp(argv[1], "--role") == 0 && std::strcmp(argv[2], "target") == 0 &&
      std::strcmp(argv[3], "--port") == 0)
    return target(static_cast<uint16_t>(std::stoul(argv[4])));
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s   (starts its own target process)\n", argv[0]);
    return 2;
  }
  return initiator();
} catch (const std::exception& e) {
  std::fprintf(stderr, "two_processes_wire: %s\n", e.what());
  return 1;
}
