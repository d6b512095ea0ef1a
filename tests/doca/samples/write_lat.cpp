/*
 * write latency, in the shape of DOCA GPUNetIO's verbs write-latency sample, written only
 * against the DOCA API: two processes ping-pong an 8-byte value. The initiator's kernel
 * writes iteration i+1 into the target's flag with doca_gpu_dev_verbs_p and spins until
 * its own flag reads i+1; the target's kernel spins on its flag and writes the value back.
 * Each side waits for its writes' tickets with poll_cq_at. Round trip / 2, median, min
 * and max of the runs. Runs on CPU threads (gdaki's host grid) against the soft NIC.
 *   write_lat [--sharing exclusive|cta|gpu] [--handler auto|db|bf|proxy] [--iters N] [--runs R]
 */
#include "sample_common.h"

namespace {

struct kernel_args {
  doca_gpu_dev_verbs_qp* qp;
  uint64_t* my_flag;
  uint64_t peer_flag;
  uint32_t rkey_be;
  uint32_t iters;
  uint64_t base;  // values written in this run: base + 1 .. base + iters
  bool initiator;
  uint32_t* errors;
};

// The peer's write lands by RDMA: read the flag fresh each time, then order later reads.
SAMPLE_HD inline uint64_t load_flag(const uint64_t* p) {
  const uint64_t v = *static_cast<const volatile uint64_t*>(p);
  doca_gpu_dev_verbs_fence_acquire<DOCA_GPUNETIO_VERBS_SYNC_SCOPE_SYS>();
  return v;
}

template <doca_gpu_dev_verbs_resource_sharing_mode M, doca_gpu_dev_verbs_nic_handler H>
SAMPLE_HD void write_lat_body(const kernel_args& a) {
  doca_gpu_dev_verbs_ticket_t t = 0;
  for (uint32_t i = 0; i < a.iters; ++i) {
    const uint64_t v = a.base + i + 1;
    if (!a.initiator) {
      while (load_flag(a.my_flag) < v) {
      }
    }
    doca_gpu_dev_verbs_p<uint64_t, M, H>(a.qp, {a.peer_flag, a.rkey_be}, v, &t);
    if (doca_gpu_dev_verbs_poll_cq_at<M>(a.qp, t) != 0) ++*a.errors;
    if (a.initiator) {
      while (load_flag(a.my_flag) < v) {
      }
    }
  }
}

template <doca_gpu_dev_verbs_resource_sharing_mode M, doca_gpu_dev_verbs_nic_handler H>
__global__ void write_lat_kernel(kernel_args a) {
  write_lat_body<M, H>(a);
}

template <doca_gpu_dev_verbs_resource_sharing_mode M>
void run_handler(const sample::args& o, const kernel_args& k) {
  switch (sample::handler_of(o)) {
    case DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY:
      return sample::launch(1, 1, [k] { write_lat_body<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY>(k); });
    case DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_BF:
      return sample::launch(1, 1, [k] { write_lat_body<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_BF>(k); });
    default:
      return sample::launch(1, 1, [k] { write_lat_body<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>(k); });
  }
}

void run(const sample::args& o, const kernel_args& k) {
  if (o.sharing == "exclusive") return run_handler<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(o, k);
  if (o.sharing == "cta") return run_handler<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA>(o, k);
  run_handler<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>(o, k);
}

// Both sides run the same steps; only the kernel's role and who listens differ.
int side_main(int argc, char** argv, const sample::args& o, bool initiator) {
  sample::oob x;
  pid_t child = -1;
  if (initiator) {
    sample::ensure_secret();
    x.listen_any();
    child = sample::spawn_peer(argc, argv, x.port);
    if (child <= 0) return 1;
  }
  sample::side s;
  s.open(1, sample::handler_of(o), 4096);
  uint8_t token[16] = {};
  sample::blob peer{};
  if (initiator) {
    std::random_device rd;
    for (uint8_t& v : token) v = static_cast<uint8_t>(rd());
    x.accept_one();
    x.send(s.describe(token));
    peer = x.recv<sample::blob>();
  } else {
    x.connect_to(o.port);
    peer = x.recv<sample::blob>();
    x.send(s.describe(peer.token));
  }
  s.connect(peer);
  uint32_t errors = 0;
  kernel_args k{&s.flat[0], static_cast<uint64_t*>(s.buf), peer.buf, sample::be32(peer.rkey), o.iters, 0, initiator,
                &errors};
  std::vector<double> us;
  for (uint32_t r = 0; r < o.runs; ++r) {
    if (initiator) {  // a step together, so neither side runs ahead of a run
      x.send(uint32_t{r});
      (void)x.recv<uint32_t>();
    } else {
      (void)x.recv<uint32_t>();
      x.send(uint32_t{r});
    }
    k.base = uint64_t{r} * o.iters;
    const double t0 = sample::now_s();
    run(o, k);
    us.push_back((sample::now_s() - t0) / o.iters / 2 * 1e6);
  }
  const uint64_t last = *static_cast<uint64_t*>(s.buf);
  const bool flag_ok = last == uint64_t{o.runs} * o.iters;  // the peer's final value landed
  x.send(errors + (flag_ok ? 0u : 1u));
  const uint32_t peer_bad = x.recv<uint32_t>();
  int child_rc = 0;
  if (initiator) child_rc = sample::reap(child);
  s.close();
  if (!initiator) return errors == 0 && flag_ok ? 0 : 1;
  sample::report("write_lat", "us one way", us, o);
  const bool ok = errors == 0 && flag_ok && peer_bad == 0 && child_rc == 0;
  std::printf("initiator: %u failed polls, final flag %s, peer reports %u problems, peer exit %d: %s\n", errors,
              flag_ok ? "right" : "WRONG", peer_bad, child_rc, ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  sample::args o;
  o.iters = 2000;
  if (!sample::parse(argc, argv, &o) || o.scope != "thread") {
    std::fprintf(stderr, "usage: %s [--sharing exclusive|cta|gpu] [--handler auto|db|bf|proxy] [--iters N] [--runs R]\n",
                 argv[0]);
    return 2;
  }
  return side_main(argc, argv, o, o.role != "target");
}
