/*
 * put bandwidth, in the shape of DOCA GPUNetIO's verbs put-bandwidth sample, written only
 * against the DOCA API: two processes (this program starts itself again as the target),
 * an out-of-band socket exchange of QPNs, GIDs and the target buffer's key, then a kernel
 * whose every thread puts `size` bytes `iters` times into its own slice of the target's
 * buffer through doca_gpu_dev_verbs_put, polling its tickets with poll_cq_at. The target
 * verifies every byte. Runs on CPU threads (gdaki's host grid) against the soft NIC.
 *   put_bw [--scope thread|warp] [--sharing exclusive|cta|gpu] [--handler auto|db|bf|proxy]
 *          [--blocks B] [--threads T] [--iters N] [--size S] [--runs R]
 */
#include "sample_common.h"

namespace {

struct kernel_args {
  doca_gpu_dev_verbs_qp* qps;
  uint64_t local, remote;
  uint32_t lkey_be, rkey_be;
  uint32_t size, iters;
  uint32_t* errors;
};

inline uint8_t pattern(uint32_t tid, uint32_t k) { return static_cast<uint8_t>(tid * 131u + k * 7u + 1u); }

template <doca_gpu_dev_verbs_resource_sharing_mode M, doca_gpu_dev_verbs_nic_handler H,
          doca_gpu_dev_verbs_exec_scope S>
SAMPLE_HD void put_bw_body(const kernel_args& a) {
  const uint32_t tid = gdaki_doca_block_index() * gdaki_doca_threads_per_block() + gdaki_doca_thread_index();
  uint32_t q = 0;  // one QP per posting unit of the sharing mode
  if (M == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA) q = gdaki_doca_block_index();
  if (M == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE) {
    q = S == DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP
            ? gdaki_doca_block_index() * ((gdaki_doca_threads_per_block() + 31) / 32) + gdaki_doca_thread_index() / 32
            : tid;
  }
  doca_gpu_dev_verbs_qp* qp = &a.qps[q];
  const uint64_t off = uint64_t{tid} * a.size;
  doca_gpu_dev_verbs_ticket_t t = 0;
  for (uint32_t i = 0; i < a.iters; ++i) {
    doca_gpu_dev_verbs_put<M, H, S>(qp, {a.remote + off, a.rkey_be}, {a.local + off, a.lkey_be}, a.size, &t);
    if ((i & 15) == 15 && doca_gpu_dev_verbs_poll_cq_at<M>(qp, t) != 0) ++a.errors[tid];
  }
  if (doca_gpu_dev_verbs_poll_cq_at<M>(qp, t) != 0) ++a.errors[tid];
}

template <doca_gpu_dev_verbs_resource_sharing_mode M, doca_gpu_dev_verbs_nic_handler H,
          doca_gpu_dev_verbs_exec_scope S>
__global__ void put_bw_kernel(kernel_args a) {
  put_bw_body<M, H, S>(a);
}

template <doca_gpu_dev_verbs_resource_sharing_mode M, doca_gpu_dev_verbs_nic_handler H>
void run_scope(const sample::args& o, const kernel_args& k) {
  if (o.scope == "warp") {
    sample::launch(o.blocks, o.threads, [k] { put_bw_body<M, H, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP>(k); });
  } else {
    sample::launch(o.blocks, o.threads, [k] { put_bw_body<M, H, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>(k); });
  }
}

template <doca_gpu_dev_verbs_resource_sharing_mode M>
void run_handler(const sample::args& o, const kernel_args& k) {
  switch (sample::handler_of(o)) {
    case DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB: return run_scope<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB>(o, k);
    case DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_BF: return run_scope<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_BF>(o, k);
    case DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY: return run_scope<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY>(o, k);
    default: return run_scope<M, DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>(o, k);
  }
}

void run(const sample::args& o, const kernel_args& k) {
  if (o.sharing == "exclusive") return run_handler<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(o, k);
  if (o.sharing == "cta") return run_handler<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA>(o, k);
  run_handler<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>(o, k);
}

size_t buffer_bytes(const sample::args& o) { return size_t{o.blocks} * o.threads * o.size; }

int target(const sample::args& o) {
  sample::side s;
  s.open(sample::qps_needed(o), DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO, buffer_bytes(o));
  sample::oob x;
  x.connect_to(o.port);
  const sample::blob peer = x.recv<sample::blob>();
  x.send(s.describe(peer.token));
  s.connect(peer);
  (void)x.recv<uint32_t>();  // the initiator's kernels are done
  size_t wrong = 0;
  const auto* b = static_cast<const uint8_t*>(s.buf);
  for (uint32_t t = 0; t < o.blocks * o.threads; ++t) {
    for (uint32_t k = 0; k < o.size; ++k) wrong += b[size_t{t} * o.size + k] != pattern(t, k);
  }
  std::printf("target: %zu of %zu bytes wrong\n", wrong, buffer_bytes(o));
  x.send(static_cast<uint64_t>(wrong));
  (void)x.recv<uint32_t>();  // bye
  s.close();
  return wrong == 0 ? 0 : 1;
}

int initiator(int argc, char** argv, const sample::args& o) {
  sample::ensure_secret();
  sample::oob x;
  x.listen_any();
  const pid_t child = sample::spawn_peer(argc, argv, x.port);
  if (child <= 0) return 1;
  sample::side s;
  s.open(sample::qps_needed(o), sample::handler_of(o), buffer_bytes(o));
  auto* src = static_cast<uint8_t*>(s.buf);
  for (uint32_t t = 0; t < o.blocks * o.threads; ++t) {
    for (uint32_t k = 0; k < o.size; ++k) src[size_t{t} * o.size + k] = pattern(t, k);
  }
  uint8_t token[16];
  std::random_device rd;
  for (uint8_t& v : token) v = static_cast<uint8_t>(rd());
  x.accept_one();
  x.send(s.describe(token));
  const sample::blob peer = x.recv<sample::blob>();
  s.connect(peer);

  std::vector<uint32_t> errors(size_t{o.blocks} * o.threads, 0);
  kernel_args k{s.flat, reinterpret_cast<uint64_t>(s.buf), peer.buf, sample::be32(s.lkey), sample::be32(peer.rkey),
                o.size, o.iters, errors.data()};
  std::vector<double> gbps;
  for (uint32_t r = 0; r < o.runs; ++r) {
    const double t0 = sample::now_s();
    run(o, k);
    const double dt = sample::now_s() - t0;
    gbps.push_back(double(buffer_bytes(o)) * o.iters / dt / 1e9);
  }
  uint32_t errs = 0;
  for (uint32_t e : errors) errs += e;
  x.send(uint32_t{1});
  const uint64_t wrong = x.recv<uint64_t>();
  x.send(uint32_t{2});
  const int child_rc = sample::reap(child);
  s.close();
  sample::report("put_bw", "GB/s", gbps, o);
  const bool ok = errs == 0 && wrong == 0 && child_rc == 0;
  std::printf("initiator: %u failed polls, target says %llu bytes wrong, target exit %d: %s\n", errs,
              static_cast<unsigned long long>(wrong), child_rc, ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  sample::args o;
  if (!sample::parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: %s [--scope thread|warp] [--sharing exclusive|cta|gpu] [--handler auto|db|bf|proxy] "
                         "[--blocks B] [--threads T] [--iters N] [--size S] [--runs R]\n", argv[0]);
    return 2;
  }
  if (sample::qps_needed(o) > sample::max_qps) {
    std::fprintf(stderr, "too many QPs for this sample (%u > %u)\n", sample::qps_needed(o), sample::max_qps);
    return 2;
  }
  return o.role == "target" ? target(o) : initiator(argc, argv, o);
}
