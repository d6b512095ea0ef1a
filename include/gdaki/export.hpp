// Exporting a QP to its initiators with the backend chosen at export time: direct (the
// initiators write WQEs and ring the doorbell), CPU-assisted (they write WQEs and the
// doorbell record; a CPU thread rings) or proxy (they write 64-byte descriptors into a
// ring; a CPU thread posts them as WQEs). The same device API (device/ops.hpp) runs on
// every one; only the handle differs. `gdaki doctor` prints the choice this function
// makes, with its reason, so what doctor says is what an export gets. Host-only.
// docs/proxy.md "Choosing the backend".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gdaki/device/handles.hpp"
#include "gdaki/proxy/proxy_service.hpp"
#include "gdaki/verbs/provider_caps.hpp"

namespace gdaki::verbs {
class qp;
}

namespace gdaki {

enum class backend_request : uint8_t {
  automatic,     // the fastest backend the set-up supports (choose_backend)
  direct,        // WQEs + doorbell from the initiators
  cpu_assisted,  // WQEs + doorbell record from the initiators; a CPU thread rings
  proxy,         // descriptors from the initiators; a CPU thread posts the WQEs
};

enum class initiator : uint8_t { cpu, gpu };

// What an export needs to know about the set-up; gdaki doctor fills it from its probes.
struct backend_inputs {
  std::string provider = "soft";  // the provider's name, for messages ("soft", "mlx5", a fabric)
  // What the provider declares (verbs::provider_ops::caps); the choice reads only these.
  // Not given: those of the registered provider named `provider` (none for a libfabric
  // fabric: its NIC executes no mlx5 WQEs).
  std::optional<verbs::provider_caps> caps;
  gdaki::initiator initiator = gdaki::initiator::cpu;
  // GPU initiators on mlx5: whether GPU stores reach the NIC's doorbell (UAR) page, i.e.
  // cuMemHostRegister(IOMEMORY) of it works. Only a real UAR page can tell.
  enum class uar_mapping : uint8_t { no, yes, unknown } gpu_uar = uar_mapping::unknown;
  // Where the QP's work-queue rings, its doorbell record and its CQ rings live. A backend
  // is chosen only if every party of it reaches what it touches: the initiators (or the
  // proxy thread) write the rings and the record and poll the CQs, the CPU doorbell
  // service reads the record, the soft NIC's engine (a CPU thread) all three. CPU threads
  // reach host and host_pinned memory, GPU threads host_pinned and gpu memory. unknown:
  // not given, so not checked (gdaki::exported_qp gives the rings and the record).
  enum class memory : uint8_t { unknown, host, host_pinned, gpu };
  memory rings = memory::unknown, doorbell_record = memory::unknown, cqs = memory::unknown;
};

const char* to_string(backend_inputs::memory m);

struct backend_choice {
  dev::qp_backend backend = dev::qp_backend::direct;
  dev::doorbell_mode db_mode = dev::doorbell_mode::db_store;
  bool cpu_service = false;  // a CPU thread (doorbell or proxy service) is part of the path
  std::string name;          // "direct", "cpu-assisted", "proxy"
  std::string reason;        // one sentence: why this backend for these inputs
};

// The backend an export with `request` gets on the set-up `in`. Pure (tested for every
// combination). Throws gdaki::error(not_supported) when the request cannot work there
// (e.g. direct GPU doorbells on mlx5 when the UAR page cannot be mapped, or the CPU
// doorbell service with the doorbell record in GPU memory), naming the cause; `automatic`
// throws only when no backend can work, naming why each one cannot.
backend_choice choose_backend(const backend_inputs& in, backend_request request = backend_request::automatic);

struct export_options {
  backend_request backend = backend_request::automatic;
  gdaki::initiator initiator = gdaki::initiator::cpu;
  backend_inputs::uar_mapping gpu_uar = backend_inputs::uar_mapping::unknown;
  // Where the QP's rings, doorbell record and CQ rings were placed (backend_inputs): give
  // them, and the choice refuses a backend some party of which cannot reach them.
  backend_inputs::memory rings = backend_inputs::memory::unknown;
  backend_inputs::memory doorbell_record = backend_inputs::memory::unknown;
  backend_inputs::memory cqs = backend_inputs::memory::unknown;
  // Proxy backend: ring of 2^log2_ring_slots descriptors, and the service's tuning.
  uint32_t log2_ring_slots = 10;
  proxy::proxy_options proxy = {};
  // true: the export starts a library-owned thread for its CPU service (doorbell or proxy);
  // false: the application calls progress() from a thread it drives (one thread can then
  // serve many exports).
  bool own_thread = true;
  // The QP's scratch buffer (8 registered bytes with LOCAL_WRITE; device-api.md "Handles
  // and buffers"): where signal adds put the old value nobody reads. 0 = none.
  uint64_t scratch_addr = 0;
  uint32_t scratch_lkey = 0;
};

// One exported QP and the machinery its backend needs (ring, poster, CPU service), owned
// together so they live exactly as long as the handle. Where what initiators touch lives
// (docs/memory-ordering.md, "Every shared word"):
//   - CPU initiators: the handle and the proxy ring in ordinary host memory;
//   - GPU initiators: the QP handle, the proxy ring handle and the ring's producer words in
//     GPU memory (cuMemAlloc; where DOCA keeps a QP's device handle): only GPU threads
//     touch their counters, at GPU scope (arch::local). The words a CPU thread also
//     reaches (the proxy ring's slots, its proxy line and completion counters) are in
//     host-pinned, GPU-mapped memory (cuMemHostAlloc). The CUDA driver is loaded at run
//     time; the calling thread needs a current CUDA context.
class exported_qp {
 public:
  // Exports q (in any state; the data path checks state through CQEs) whose send / receive
  // CQ handles the caller placed at send_cq / recv_cq (never loaded from by the export
  // itself: they may be in GPU memory). With the proxy backend these CQs belong to the
  // proxy thread from now on (initiators settle through counters). GPU initiators: each
  // CQ handle goes where its pollers run. For direct and cpu-assisted a handle in host
  // memory is copied into GPU memory beside the QP handle (its claim counter is then
  // touched at GPU scope only) and one already in GPU memory is used in place; for the
  // proxy a handle in GPU memory is copied to host memory. A copied handle is read once
  // here: poll through the QP (dev::wait, dev::rq_poll), not through the handle passed in.
  // Throws gdaki::error naming the QP and the cause.
  exported_qp(const verbs::qp& q, dev::cq_handle* send_cq, dev::cq_handle* recv_cq, const export_options& opt = {});
  exported_qp(const exported_qp&) = delete;
  exported_qp& operator=(const exported_qp&) = delete;
  ~exported_qp();  // stops the CPU service (open waits then settle io_error / closed)

  // The handle initiators post through (device/ops.hpp): pass &handle() to them. With GPU
  // initiators it is in GPU memory: the host must not read or write it (use host_view()).
  dev::qp_handle& handle();
  // The handle as exported, readable on the host: geometry, backend, doorbell mode. For
  // CPU initiators this is handle() itself; for GPU initiators a copy whose counters are
  // not live (the live ones are in GPU memory).
  const dev::qp_handle& host_view() const;
  bool handle_in_gpu_memory() const;
  // With the proxy backend: the QP's own direct handle, which the proxy thread posts on
  // (its counters and error latch are where WQE-level state shows). Otherwise
  // host_view() (the doorbell record and register addresses the provider gave).
  dev::qp_handle& nic_handle();
  const backend_choice& choice() const;

  // One step of the CPU service on the caller's thread (own_thread == false): rings the
  // doorbells that moved, or drains descriptors and collects completions. Returns the work
  // done (0 = idle). With own_thread == true, or for the direct backend, returns 0.
  size_t progress();

  // Proxy backend: the service's counters (zero otherwise).
  proxy::proxy_stats proxy_stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace gdaki
