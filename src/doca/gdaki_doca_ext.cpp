// gdaki_doca_*: the protection domain, memory registration and GID a DOCA program would get
// from libibverbs, served by gdaki's control path for gdaki's devices (gdaki_doca_ext.h).
#include <cstring>

#include "doca/doca_objects.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki_doca_ext.h"

struct gdaki_doca_mr {
  gdaki::verbs::mr mr;
};

namespace gdaki::doca {
pd_object* pd_of(struct ibv_pd* p) {
  auto* o = reinterpret_cast<pd_object*>(p);
  return o != nullptr && o->magic == pd_object::magic_value ? o : nullptr;
}
}  // namespace gdaki::doca

namespace {
using gdaki::doca::fail;
using gdaki::doca::guarded;
}  // namespace

extern "C" doca_error_t gdaki_doca_pd_open(const char* device_name, struct ibv_pd** pd) {
  if (pd == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "gdaki_doca_pd_open", "pd is NULL");
  return guarded("gdaki_doca_pd_open", [&] {
    std::string name = device_name != nullptr ? device_name : "";
    if (name.empty()) {
      const auto list = gdaki::verbs::device::list();
      if (list.empty()) return fail(DOCA_ERROR_NOT_FOUND, "gdaki_doca_pd_open", "no gdaki device is listed");
      name = list.front().name;
    }
    auto o = std::make_unique<gdaki::doca::pd_object>();
    o->device = gdaki::verbs::device::open(name);
    o->pd = gdaki::verbs::pd(o->device);
    *pd = reinterpret_cast<struct ibv_pd*>(o.release());
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t gdaki_doca_pd_close(struct ibv_pd* pd) {
  gdaki::doca::pd_object* o = gdaki::doca::pd_of(pd);
  if (o == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "gdaki_doca_pd_close", "pd is NULL or not a gdaki PD");
  return guarded("gdaki_doca_pd_close", [&] {
    o->magic = 0;  // a second close is refused rather than freeing twice
    delete o;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t gdaki_doca_mr_register(struct ibv_pd* pd, void* addr, size_t length, uint32_t access,
                                               struct gdaki_doca_mr** mr, uint32_t* lkey, uint32_t* rkey) {
  gdaki::doca::pd_object* o = gdaki::doca::pd_of(pd);
  if (o == nullptr || addr == nullptr || length == 0 || mr == nullptr) {
    return fail(DOCA_ERROR_INVALID_VALUE, "gdaki_doca_mr_register",
                "pd must be a gdaki PD, addr not NULL, length not 0 and mr not NULL");
  }
  return guarded("gdaki_doca_mr_register", [&] {
    // GDAKI_DOCA_ACCESS_* have gdaki's verbs::access values.
    auto m = std::make_unique<gdaki_doca_mr>(gdaki_doca_mr{gdaki::verbs::mr(o->pd, addr, length, access)});
    if (lkey != nullptr) *lkey = m->mr.lkey();
    if (rkey != nullptr) *rkey = m->mr.rkey();
    *mr = m.release();
    return DOCA_SUCCESS;
  });
}
static_assert(GDAKI_DOCA_ACCESS_LOCAL_WRITE == gdaki::verbs::access::local_write &&
                  GDAKI_DOCA_ACCESS_REMOTE_WRITE == gdaki::verbs::access::remote_write &&
                  GDAKI_DOCA_ACCESS_REMOTE_READ == gdaki::verbs::access::remote_read &&
                  GDAKI_DOCA_ACCESS_REMOTE_ATOMIC == gdaki::verbs::access::remote_atomic,
              "the access bits are passed through unchanged");

extern "C" doca_error_t gdaki_doca_mr_deregister(struct gdaki_doca_mr* mr) {
  if (mr == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "gdaki_doca_mr_deregister", "mr is NULL");
  return guarded("gdaki_doca_mr_deregister", [&] {
    delete mr;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t gdaki_doca_query_gid(struct ibv_pd* pd, struct doca_verbs_gid* gid) {
  gdaki::doca::pd_object* o = gdaki::doca::pd_of(pd);
  if (o == nullptr || gid == nullptr) {
    return fail(DOCA_ERROR_INVALID_VALUE, "gdaki_doca_query_gid", "pd must be a gdaki PD and gid not NULL");
  }
  return guarded("gdaki_doca_query_gid", [&] {
    if (o->device.provider_name() == "soft") {
      const auto a = gdaki::soft::local_address(o->device);  // also starts the device's wire listener
      std::memcpy(gid->raw, a.data(), 16);
    } else {
      const gdaki::verbs::port_attr p = o->device.query_port(1);
      std::memcpy(gid->raw, p.gid, 16);
    }
    return DOCA_SUCCESS;
  });
}
