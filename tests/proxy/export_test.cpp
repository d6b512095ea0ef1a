// gdaki::choose_backend (every provider / initiator / request combination) and
// gdaki::exported_qp on the soft NIC: each backend, with its own service thread or driven
// by progress(), carries the device API's operations end to end (data and results checked).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gdaki/device/ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/export.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "proxy/export_pair.hpp"

namespace {

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;
using gdaki_test::check_every_operation;
using gdaki_test::pair_world;
using gdaki::backend_inputs;
using gdaki::backend_request;
using gdaki::initiator;
using uar = backend_inputs::uar_mapping;

gdaki::backend_choice choose(const char* provider, initiator who, uar u, backend_request req) {
  backend_inputs in;
  in.provider = provider;
  in.initiator = who;
  in.gpu_uar = u;
  return gdaki::choose_backend(in, req);
}

struct expected_choice {
  const char* provider;
  initiator who;
  uar u;
  const char* name;
  dev::qp_backend backend;
  dev::doorbell_mode db_mode;
  bool cpu_service;
  const char* reason_part;
};

TEST(choose_backend, automatic_picks_the_fastest_backend_the_set_up_supports_and_says_why) {
  using dev::doorbell_mode;
  using dev::qp_backend;
  const expected_choice table[] = {
      {"soft", initiator::cpu, uar::unknown, "direct", qp_backend::direct, doorbell_mode::db_store, false, "host hook"},
      {"soft", initiator::gpu, uar::no, "direct", qp_backend::direct, doorbell_mode::db_store, false, "engine thread polls"},
      {"mlx5", initiator::cpu, uar::no, "direct", qp_backend::direct, doorbell_mode::db_store, false, "CPU threads store"},
      {"mlx5", initiator::gpu, uar::yes, "direct", qp_backend::direct, doorbell_mode::db_store, false, "works"},
      {"mlx5", initiator::gpu, uar::no, "cpu-assisted", qp_backend::direct, doorbell_mode::cpu_assisted, true, "failed"},
      {"mlx5", initiator::gpu, uar::unknown, "cpu-assisted", qp_backend::direct, doorbell_mode::cpu_assisted, true,
       "not known"},
      {"libfabric", initiator::cpu, uar::unknown, "proxy", qp_backend::proxy, doorbell_mode::db_store, true,
       "does not execute mlx5 WQEs"},
      {"libfabric", initiator::gpu, uar::yes, "proxy", qp_backend::proxy, doorbell_mode::db_store, true, "libfabric"},
  };
  for (const expected_choice& e : table) {
    SCOPED_TRACE(std::string(e.provider) + (e.who == initiator::gpu ? " gpu" : " cpu") + " uar " +
                 std::to_string(static_cast<int>(e.u)));
    const gdaki::backend_choice c = choose(e.provider, e.who, e.u, backend_request::automatic);
    EXPECT_EQ(c.name, e.name);
    EXPECT_EQ(c.backend, e.backend);
    EXPECT_EQ(c.db_mode, e.db_mode);
    EXPECT_EQ(c.cpu_service, e.cpu_service);
    EXPECT_NE(c.reason.find(e.reason_part), std::string::npos) << c.reason;
  }
}

TEST(choose_backend, explicit_requests_are_honoured_where_they_can_run) {
  for (const char* provider : {"soft", "mlx5"}) {
    for (initiator who : {initiator::cpu, initiator::gpu}) {
      EXPECT_EQ(choose(provider, who, uar::unknown, backend_request::direct).name, "direct");
      EXPECT_EQ(choose(provider, who, uar::yes, backend_request::cpu_assisted).db_mode, dev::doorbell_mode::cpu_assisted);
      EXPECT_EQ(choose(provider, who, uar::no, backend_request::proxy).backend, dev::qp_backend::proxy);
      EXPECT_EQ(choose(provider, who, uar::no, backend_request::proxy).reason, "requested");
    }
  }
  // The soft NIC never maps a UAR: GPU doorbells on it are direct even when told "no".
  EXPECT_EQ(choose("soft", initiator::gpu, uar::no, backend_request::direct).name, "direct");
}

void expect_refused(const char* provider, initiator who, uar u, backend_request req, const char* why_part) {
  try {
    (void)choose(provider, who, u, req);
    ADD_FAILURE() << "expected not_supported for " << provider;
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), gdaki::status::not_supported);
    EXPECT_NE(std::string(e.what()).find(provider), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(why_part), std::string::npos) << e.what();
  }
}

TEST(choose_backend, impossible_requests_fail_naming_the_provider_and_the_cause) {
  expect_refused("mlx5", initiator::gpu, uar::no, backend_request::direct, "UAR");
  expect_refused("libfabric", initiator::cpu, uar::unknown, backend_request::direct, "does not execute mlx5 WQEs");
  expect_refused("libfabric", initiator::gpu, uar::unknown, backend_request::cpu_assisted, "use the proxy backend");
}

// The choice reads the provider's declared capabilities, never its name: a provider named
// like neither built-in one gets exactly the built-in one's choice when it declares the
// same capabilities, and the proxy when it declares a NIC that executes no WQEs.
TEST(choose_backend, decides_by_declared_capabilities_not_by_provider_name) {
  for (const char* builtin : {"soft", "mlx5"}) {
    const auto caps = gdaki::verbs::caps_of(builtin);
    if (!caps) GTEST_SKIP() << "provider " << builtin << " is not built here";
    for (initiator who : {initiator::cpu, initiator::gpu}) {
      for (uar u : {uar::no, uar::yes, uar::unknown}) {
        SCOPED_TRACE(std::string(builtin) + (who == initiator::gpu ? " gpu" : " cpu") + " uar " +
                     std::to_string(static_cast<int>(u)));
        backend_inputs in;
        in.provider = "acme";
        in.caps = *caps;
        in.initiator = who;
        in.gpu_uar = u;
        const gdaki::backend_choice named = choose(builtin, who, u, backend_request::automatic);
        const gdaki::backend_choice declared = gdaki::choose_backend(in);
        EXPECT_EQ(declared.name, named.name);
        EXPECT_EQ(declared.backend, named.backend);
        EXPECT_EQ(declared.db_mode, named.db_mode);
        EXPECT_EQ(declared.cpu_service, named.cpu_service);
        EXPECT_NE(declared.reason.find("acme"), std::string::npos) << declared.reason;
      }
    }
  }
  backend_inputs in;
  in.provider = "soft";  // the name of a WQE-executing provider, with caps that say otherwise
  in.caps = gdaki::verbs::provider_caps{};
  EXPECT_EQ(gdaki::choose_backend(in).name, "proxy");
  EXPECT_FALSE(gdaki::verbs::caps_of("no-such-provider").has_value());
}

struct export_case {
  backend_request request;
  bool own_thread;
  const char* name;
  dev::qp_backend backend;
  dev::doorbell_mode db_mode;
};

class exported_qp_on_soft : public ::testing::TestWithParam<export_case> {};

TEST_P(exported_qp_on_soft, carries_put_p_signal_get_and_atomics_end_to_end) {
  const export_case& c = GetParam();
  pair_world w;
  gdaki::exported_qp x(w.a, &w.a_send, &w.a_recv, w.options(c.request, c.own_thread));
  EXPECT_EQ(x.choice().name, c.name);
  dev::qp_handle& h = x.handle();
  EXPECT_EQ(h.backend, c.backend);
  EXPECT_EQ(x.nic_handle().db_mode, c.db_mode);
  EXPECT_EQ(x.nic_handle().qpn, w.a.qpn());
  if (c.backend == dev::qp_backend::direct) {
    EXPECT_EQ(&x.nic_handle(), &h);
  }

  check_every_operation(w, x);
  EXPECT_EQ(dev::last_error(h).syndrome, gdaki::prm::syndrome::none);
  if (c.backend == dev::qp_backend::proxy) {
    const gdaki::proxy::proxy_stats s = x.proxy_stats();
    EXPECT_EQ(s.consumed, 6u);  // one descriptor per operation above
    EXPECT_EQ(s.failed, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    backends, exported_qp_on_soft,
    ::testing::Values(
        export_case{backend_request::automatic, true, "direct", dev::qp_backend::direct, dev::doorbell_mode::db_store},
        export_case{backend_request::cpu_assisted, true, "cpu-assisted", dev::qp_backend::direct,
                    dev::doorbell_mode::cpu_assisted},
        export_case{backend_request::cpu_assisted, false, "cpu-assisted", dev::qp_backend::direct,
                    dev::doorbell_mode::cpu_assisted},
        export_case{backend_request::proxy, true, "proxy", dev::qp_backend::proxy, dev::doorbell_mode::db_store},
        export_case{backend_request::proxy, false, "proxy", dev::qp_backend::proxy, dev::doorbell_mode::db_store}),
    [](const ::testing::TestParamInfo<export_case>& i) {
      std::string n = i.param.name;
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n + (i.param.own_thread ? "_own_thread" : "_driven_by_progress");
    });

// The placed CQ handles may sit where the host cannot load from them (GPU memory, for GPU
// initiators): the export must not read them. How it failed: qp::export_handle checked the
// send CQ's depth through the placed handle, and tests/gpu's first GPU run (CQ handles in
// cudaMalloc'd memory) died with SIGSEGV on direct, cpu-assisted and automatic; here the
// PROT_NONE page faults the same way. After the export the page becomes readable, the
// handles are written into it, and every operation must work through them.
TEST(exported_qp, export_never_reads_the_placed_cq_handles) {
  for (const backend_request req : {backend_request::automatic, backend_request::cpu_assisted, backend_request::proxy}) {
    SCOPED_TRACE(static_cast<int>(req));
    pair_world w;
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    auto* placed = static_cast<dev::cq_handle*>(page);
    {
      gdaki::exported_qp x(w.a, &placed[0], &placed[1], w.options(req, false));
      ASSERT_EQ(mprotect(page, 4096, PROT_READ | PROT_WRITE), 0);
      placed[0] = w.a_send;
      placed[1] = w.a_recv;
      check_every_operation(w, x);
      EXPECT_EQ(dev::last_error(x.handle()).syndrome, gdaki::prm::syndrome::none);
    }
    munmap(page, 4096);
  }
}

TEST(exported_qp, gpu_initiators_without_the_cuda_driver_fail_naming_the_cause) {
  // No libcuda here (or GDAKI_LIBCUDA pointing nowhere): the GPU-memory handle is impossible.
  setenv("GDAKI_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  pair_world w;
  gdaki::export_options o = w.options(backend_request::automatic, true);
  o.initiator = initiator::gpu;
  try {
    gdaki::exported_qp x(w.a, &w.a_send, &w.a_recv, o);
    GTEST_SKIP() << "a CUDA driver is loaded in this process; the missing-driver path cannot be shown";
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), gdaki::status::not_supported);
    EXPECT_NE(std::string(e.what()).find("needs the CUDA driver"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qp"), std::string::npos) << e.what();
  }
}

TEST(exported_qp, a_ring_size_out_of_range_is_refused_naming_it) {
  pair_world w;
  gdaki::export_options o = w.options(backend_request::proxy, false);
  o.log2_ring_slots = 30;
  try {
    gdaki::exported_qp x(w.a, &w.a_send, &w.a_recv, o);
    ADD_FAILURE() << "expected invalid";
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), gdaki::status::invalid);
    EXPECT_NE(std::string(e.what()).find("log2_ring_slots 30"), std::string::npos) << e.what();
  }
}

}  // namespace
