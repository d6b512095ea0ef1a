/*
 * write bandwidth, in the shape of DOCA GPUNetIO's verbs write-bandwidth sample, written
 * only against the DOCA API: each kernel thread posts batches of RDMA WRITEs with the
 * building blocks (reserve_wq_slots, get_wqe_ptr, wqe_prepare_write, mark_wqes_ready,
 * submit) and polls the batch's last WQE with poll_one_cq_at until it is not EBUSY. The
 * target (a second process, set up over an out-of-band socket) verifies every byte. With
 * --handler proxy a host thread of this program calls doca_gpu_verbs_cpu_proxy_progress
 * while the kernel runs. Runs on CPU threads (gdaki's host grid) against the soft NIC.
 *   write_bw [--sharing exclusive|cta|gpu] [--handler auto|db|bf|proxy] [--blocks B]
 *            [--threads T] [--iters N] [--size S] [--runs R]   (thread scope)
 */
#include <atomic>
#include <cerrno>
#include <thread>

#include "sample_common.h"

namespace {

constexpr uint32_t batch = 4;

struct kernel_args {
  doca_gpu_dev_verbs_qp* qps;
  uint64_t local, remote;
  uint32_t lkey_be, rkey_be;
  uint32_t size, iters;
  uint32_t* errors;
};

inline uint8_t pattern(uint32_t tid, uint32_t k) { return static_cast<uint8_t>(tid * 29u + k * 3u + 5u); }

template <doca_gpu_dev_verbs_resource_sharing_mode M>
SAMPLE_HD void write_bw_body(const kernel_args& a) {
  const uint32_t tid = gdaki_doca_block_index() * gdaki_doca_threads_per_block() + gdaki_doca_thread_index();
  uint32_t q = 0;
  if (M == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA) q = gdaki_doca_block_index();
  if (M == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE) q = tid;
  doca_gpu_dev_verbs_qp* qp = &a.qps[q];
  const uint32_t chunk = a.size / batch;  // each WQE of a batch writes one quarter of the slice
  const uint64_t off = uint64_t{tid} * a.size;
  for (uint32_t i = 0; i < a.iters; ++i) {
    const uint64_t base = doca_gpu_dev_verbs_reserve_wq_slots<M>(qp, batch);
    for (uint32_t j = 0; j < batch; ++j) {
      doca_gpu_dev_verbs_wqe* w = doca_gpu_dev_verbs_get_wqe_ptr(qp, base + j);
      doca_gpu_dev_verbs_wqe_prepare_write(qp, w, base + j, DOCA_GPUNETIO_IB_MLX5_OPCODE_RDMA_WRITE,
                                           j + 1 == batch ? DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE
                                                          : DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_ERROR_UPDATE,
                                           0, a.remote + off + j * chunk, a.rkey_be, a.local + off + j * chunk,
                                           a.lkey_be, chunk);
    }
    doca_gpu_dev_verbs_mark_wqes_ready<M>(qp, base, base + batch - 1);
    doca_gpu_dev_verbs_submit<M>(qp, base + batch);
    int r = EBUSY;
    while (r == EBUSY) r = doca_gpu_dev_verbs_poll_one_cq_at<M>(qp, base + batch - 1);
    if (r != 0) ++a.errors[tid];
  }
}

template <doca_gpu_dev_verbs_resource_sharing_mode M>
__global__ void write_bw_kernel(kernel_args a) {
  write_bw_body<M>(a);
}

void run(const sample::args& o, const kernel_args& k) {
  if (o.sharing == "exclusive") {
    sample::launch(o.blocks, o.threads, [k] { write_bw_body<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(k); });
  } else if (o.sharing == "cta") {
    sample::launch(o.blocks, o.threads, [k] { write_bw_body<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA>(k); });
  } else {
    sample::launch(o.blocks, o.threads, [k] { write_bw_body<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>(k); });
  }
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
  (void)x.recv<uint32_t>();
  size_t wrong = 0;
  const auto* b = static_cast<const uint8_t*>(s.buf);
  for (uint32_t t = 0; t < o.blocks * o.threads; ++t) {
    for (uint32_t k = 0; k < o.size; ++k) wrong += b[size_t{t} * o.size + k] != pattern(t, k);
  }
  std::printf("target: %zu of %zu bytes wrong\n", wrong, buffer_bytes(o));
  x.send(static_cast<uint64_t>(wrong));
  (void)x.recv<uint32_t>();
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
  // With the CPU proxy handler this sample drives the proxy itself (no progress service).
  const bool proxy = o.handler == "proxy";
  s.open(sample::qps_needed(o), sample::handler_of(o), buffer_bytes(o), /*with_service=*/false);
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

  std::atomic<bool> stop{false};
  std::thread progress;
  if (proxy) {
    progress = std::thread([&] {
      while (!stop.load(std::memory_order_acquire)) {
        bool any = false;
        for (auto* q : s.qps) {
          bool p = false;
          SAMPLE_CHECK(doca_gpu_verbs_cpu_proxy_progress(q->qp_gverbs, &p));
          any = any || p;
        }
        if (!any) std::this_thread::yield();
      }
    });
  }
  std::vector<uint32_t> errors(size_t{o.blocks} * o.threads, 0);
  kernel_args k{s.flat, reinterpret_cast<uint64_t>(s.buf), peer.buf, sample::be32(s.lkey), sample::be32(peer.rkey),
                o.size, o.iters, errors.data()};
  std::vector<double> gbps;
  for (uint32_t r = 0; r < o.runs; ++r) {
    const double t0 = sample::now_s();
    run(o, k);
    gbps.push_back(double(buffer_bytes(o)) * o.iters / (sample::now_s() - t0) / 1e9);
  }
  stop.store(true, std::memory_order_release);
  if (progress.joinable()) progress.join();
  uint32_t errs = 0;
  for (uint32_t e : errors) errs += e;
  x.send(uint32_t{1});
  const uint64_t wrong = x.recv<uint64_t>();
  x.send(uint32_t{2});
  const int child_rc = sample::reap(child);
  s.close();
  sample::report("write_bw", "GB/s", gbps, o);
  const bool ok = errs == 0 && wrong == 0 && child_rc == 0;
  std::printf("initiator: %u failed batches, target says %llu bytes wrong, target exit %d: %s\n", errs,
              static_cast<unsigned long long>(wrong), child_rc, ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  sample::args o;
  if (!sample::parse(argc, argv, &o) || o.scope != "thread" || o.size % batch != 0) {
    std::fprintf(stderr, "usage: %s [--sharing exclusive|cta|gpu] [--handler auto|db|bf|proxy] [--blocks B] "
                         "[--threads T] [--iters N] [--size S (a multiple of 4)] [--runs R]\n", argv[0]);
    return 2;
  }
  if (sample::qps_needed(o) > sample::max_qps) return 2;
  return o.role == "target" ? target(o) : initiator(argc, argv, o);
}
