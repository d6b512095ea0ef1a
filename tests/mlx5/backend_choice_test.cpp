// gdaki::choose_backend over every combination of provider, initiator, UAR mapping, ring /
// doorbell-record / CQ placement and request, against an oracle written independently of
// it: a table of which party touches which memory under each backend. A backend may be
// chosen only if every party reaches all it touches; an explicit request is refused
// exactly when it cannot work; the automatic choice never picks one that cannot work and
// refuses only when none can. Then the same for the placements gpu::decide gives on every
// machine it models, which must all export (the two decisions agree on the doorbell).
//
// Before placement was an input (choose_backend ignoring it, decide() putting the doorbell
// record next to GPU-memory rings and assuming GPU doorbell stores while unconfirmed), all
// three tests failed: the export picked cpu-assisted for GPU initiators with an unconfirmed
// UAR mapping while the record sat in GPU memory, where the CPU doorbell service read a
// device pointer, and decide() said gpu_store for the same machine.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gpu/placement.hpp"

namespace {

using gdaki::backend_inputs;
using gdaki::backend_request;
using gdaki::initiator;
using memory = backend_inputs::memory;
using uar = backend_inputs::uar_mapping;

// ---- the oracle --------------------------------------------------------------------------

struct party {
  bool gpu_thread;
  bool rings, record, cqs;  // what it touches
};

bool reaches(bool gpu_thread, memory m) {
  if (m == memory::unknown) return true;  // not given: not checked
  return gpu_thread ? (m == memory::host_pinned || m == memory::gpu) : (m == memory::host || m == memory::host_pinned);
}

// Who touches what when `b` serves these inputs.
std::vector<party> parties(const backend_inputs& in, backend_request b) {
  const bool gpu = in.initiator == initiator::gpu;
  std::vector<party> p;
  switch (b) {
    case backend_request::direct: p.push_back({gpu, true, true, true}); break;
    case backend_request::cpu_assisted:
      p.push_back({gpu, true, true, true});
      p.push_back({false, false, true, false});  // the CPU doorbell service reads the record
      break;
    case backend_request::proxy: p.push_back({false, true, true, true}); break;  // the proxy thread
    case backend_request::automatic: break;
  }
  if (in.provider == "soft") p.push_back({false, true, true, true});  // the engine, a CPU thread
  return p;
}

bool can_work(const backend_inputs& in, backend_request b) {
  for (const party& p : parties(in, b)) {
    if ((p.rings && !reaches(p.gpu_thread, in.rings)) || (p.record && !reaches(p.gpu_thread, in.doorbell_record)) ||
        (p.cqs && !reaches(p.gpu_thread, in.cqs))) {
      return false;
    }
  }
  // GPU stores ring an mlx5 doorbell only through a mapped UAR page.
  if (b == backend_request::direct && in.provider == "mlx5" && in.initiator == initiator::gpu &&
      in.gpu_uar == uar::no) {
    return false;
  }
  return true;
}

backend_request as_request(const gdaki::backend_choice& c) {
  if (c.backend == gdaki::dev::qp_backend::proxy) return backend_request::proxy;
  return c.db_mode == gdaki::dev::doorbell_mode::cpu_assisted ? backend_request::cpu_assisted
                                                              : backend_request::direct;
}

std::string describe(const backend_inputs& in, backend_request r) {
  static const char* req[] = {"automatic", "direct", "cpu_assisted", "proxy"};
  static const char* uars[] = {"no", "yes", "unknown"};
  return in.provider + (in.initiator == initiator::gpu ? " gpu" : " cpu") + " uar " +
         uars[static_cast<int>(in.gpu_uar)] + " rings " + gdaki::to_string(in.rings) + " record " +
         gdaki::to_string(in.doorbell_record) + " cqs " + gdaki::to_string(in.cqs) + " request " +
         req[static_cast<int>(r)];
}

const memory all_memory[] = {memory::unknown, memory::host, memory::host_pinned, memory::gpu};

TEST(backend_choice, every_combination_is_chosen_only_where_every_party_reaches_its_memory) {
  const backend_request concrete[] = {backend_request::direct, backend_request::cpu_assisted, backend_request::proxy};
  int combinations = 0, refused = 0, automatic_refused = 0;
  for (const char* provider : {"soft", "mlx5"}) {
    for (initiator who : {initiator::cpu, initiator::gpu}) {
      for (uar u : {uar::no, uar::yes, uar::unknown}) {
        for (memory rings : all_memory) {
          for (memory record : all_memory) {
            for (memory cqs : all_memory) {
              backend_inputs in;
              in.provider = provider;
              in.initiator = who;
              in.gpu_uar = u;
              in.rings = rings;
              in.doorbell_record = record;
              in.cqs = cqs;
              bool any = false;
              for (backend_request r : concrete) {
                ++combinations;
                SCOPED_TRACE(describe(in, r));
                const bool expect = can_work(in, r);
                any |= expect;
                try {
                  const gdaki::backend_choice c = gdaki::choose_backend(in, r);
                  EXPECT_TRUE(expect) << "chose " << c.name << " which cannot work";
                  EXPECT_EQ(as_request(c), r);
                } catch (const gdaki::error& e) {
                  ++refused;
                  EXPECT_FALSE(expect) << "refused a backend that can work: " << e.what();
                  EXPECT_EQ(e.code(), gdaki::status::not_supported);
                  EXPECT_NE(std::string(e.what()).find(provider), std::string::npos) << e.what();
                }
              }
              ++combinations;
              SCOPED_TRACE(describe(in, backend_request::automatic));
              try {
                const gdaki::backend_choice c = gdaki::choose_backend(in);
                EXPECT_TRUE(can_work(in, as_request(c))) << "automatic chose " << c.name << ": " << c.reason;
                EXPECT_FALSE(c.reason.empty());
                // Where GPU stores are confirmed to reach the UAR and direct can work,
                // nothing slower is picked; where they are not confirmed, direct is the
                // last resort.
                if (can_work(in, backend_request::direct) &&
                    (who == initiator::cpu || std::string(provider) == "soft" || u == uar::yes)) {
                  EXPECT_EQ(c.name, "direct") << c.reason;
                }
                if (std::string(provider) == "mlx5" && who == initiator::gpu && u != uar::yes &&
                    (can_work(in, backend_request::cpu_assisted) || can_work(in, backend_request::proxy))) {
                  EXPECT_NE(c.name, "direct") << c.reason;
                }
              } catch (const gdaki::error& e) {
                ++automatic_refused;
                EXPECT_FALSE(any) << "automatic refused although a backend can work: " << e.what();
                EXPECT_NE(std::string(e.what()).find("no backend can work"), std::string::npos) << e.what();
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(combinations, 2 * 2 * 3 * 64 * 4);
  // The table is not vacuous: both outcomes occur.
  EXPECT_GT(refused, 0);
  EXPECT_GT(automatic_refused, 0);
}

TEST(backend_choice, the_known_bad_combinations_are_refused_naming_the_party_and_the_object) {
  backend_inputs in;
  in.provider = "mlx5";
  in.initiator = initiator::gpu;
  in.gpu_uar = uar::no;
  in.rings = memory::gpu;
  in.cqs = memory::gpu;
  in.doorbell_record = memory::gpu;
  // GPU rings, record in GPU memory, UAR not mappable: nothing can ring the doorbell.
  try {
    (void)gdaki::choose_backend(in);
    ADD_FAILURE() << "expected a refusal";
  } catch (const gdaki::error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("CPU doorbell service cannot read a doorbell record in gpu memory"), std::string::npos) << w;
    EXPECT_NE(w.find("the proxy thread (CPU) cannot reach the work-queue rings (gpu memory)"), std::string::npos) << w;
    EXPECT_NE(w.find("UAR"), std::string::npos) << w;
  }
  // With the record in host-pinned memory (where the mlx5 provider now puts it) the CPU
  // rings for the GPU.
  in.doorbell_record = memory::host_pinned;
  EXPECT_EQ(gdaki::choose_backend(in).name, "cpu-assisted");
  // CPU initiators cannot post into GPU-memory rings, whatever is requested.
  in.initiator = initiator::cpu;
  try {
    (void)gdaki::choose_backend(in, backend_request::direct);
    ADD_FAILURE() << "expected a refusal";
  } catch (const gdaki::error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU initiators cannot reach the work-queue rings (gpu memory)"),
              std::string::npos)
        << e.what();
  }
}

backend_inputs::memory from_location(gdaki::gpu::location l) {
  switch (l) {
    case gdaki::gpu::location::host: return memory::host;
    case gdaki::gpu::location::host_pinned: return memory::host_pinned;
    case gdaki::gpu::location::gpu: return memory::gpu;
  }
  return memory::unknown;
}

TEST(backend_choice, every_placement_decide_makes_exports_and_agrees_on_the_doorbell) {
  namespace g = gdaki::gpu;
  for (unsigned bits = 0; bits < 1024; ++bits) {
    for (g::tristate t : {g::tristate::no, g::tristate::yes, g::tristate::unknown}) {
      g::capabilities c;
      c.cuda_driver = bits & 1;
      c.gpu_count = (bits & 2) ? 1 : 0;
      c.gpu_dma_buf = bits & 4;
      c.gpu_direct_rdma = bits & 8;
      c.gpu_host_register = bits & 16;
      c.cuda_dma_buf_export = bits & 32;
      c.peermem = bits & 64;
      c.gdrcopy = bits & 128;
      c.rdma_core = bits & 256;
      c.mlx5_devices = (bits & 512) ? 1 : 0;
      c.ibv_dmabuf_mr = c.devx_umem_dmabuf = bits & 4;
      c.uar_gpu_mappable = t;
      const g::placement_decision d = g::decide(c);
      backend_inputs in;
      in.provider = d.nic.value == g::nic_kind::mlx5 ? "mlx5" : "soft";
      in.initiator = d.initiator.value == g::initiator_kind::gpu ? initiator::gpu : initiator::cpu;
      // What the export can know: confirmed only when the GPU can register I/O memory at all.
      in.gpu_uar = !c.gpu_host_register ? uar::no : t == g::tristate::yes ? uar::yes : t == g::tristate::no ? uar::no
                                                                                                           : uar::unknown;
      in.rings = from_location(d.rings.value);
      in.doorbell_record = from_location(d.doorbell_records.value);
      in.cqs = from_location(d.cqs.value);
      SCOPED_TRACE("bits " + std::to_string(bits) + ": " + describe(in, backend_request::automatic));
      try {
        const gdaki::backend_choice b = gdaki::choose_backend(in);
        EXPECT_TRUE(can_work(in, as_request(b)));
        if (in.provider == "mlx5" && in.initiator == initiator::gpu) {
          EXPECT_EQ(b.db_mode == gdaki::dev::doorbell_mode::cpu_assisted,
                    d.doorbell.value == g::doorbell_path::cpu_assisted)
              << b.name << " vs " << g::to_string(d.doorbell.value);
        }
      } catch (const gdaki::error& e) {
        ADD_FAILURE() << "decide()'s placement cannot be exported: " << e.what();
      }
    }
  }
}

}  // namespace
