// internal: the provider interface. One provider = one folder, one const ops table, one
// registration line (src/verbs/builtin_providers.cpp). The control-path objects (device,
// pd, mr, cq, qp) call the provider only through this table; an empty slot is filled by
// with_defaults() with a function that returns status::not_supported, never null.
//
// Every slot returns a status; on failure it writes the cause (without the object name,
// which the caller adds) to *why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gdaki/device/handles.hpp"
#include "gdaki/status.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/provider_caps.hpp"
#include "gdaki/verbs/qp.hpp"
#include "gdaki/verbs/srq.hpp"

namespace gdaki::verbs {

struct provider_ops;

// Base of every provider-side object; the provider derives its own types from it.
struct provider_object {
  const provider_ops* ops = nullptr;
};

struct mr_keys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

struct qp_create_args {
  const qp_init* init = nullptr;
  provider_object* send_cq = nullptr;
  provider_object* recv_cq = nullptr;
  provider_object* srq = nullptr;  // init->srq's provider object, or null (the QP has an RQ)
};

struct provider_ops {
  const char* name = nullptr;
  provider_caps caps{};  // what the NIC does; choices read these, never the name
  status (*list_devices)(std::vector<device_info>* out) = nullptr;
  status (*open_device)(std::string_view name, provider_object** out, std::string* why) = nullptr;
  status (*close_device)(provider_object* dev) = nullptr;
  status (*query_device)(provider_object* dev, device_attr* out, std::string* why) = nullptr;
  status (*query_port)(provider_object* dev, uint32_t port, port_attr* out, std::string* why) = nullptr;
  status (*alloc_pd)(provider_object* dev, provider_object** out, uint32_t* pdn, std::string* why) = nullptr;
  status (*dealloc_pd)(provider_object* pd) = nullptr;
  status (*reg_mr)(provider_object* pd, void* addr, size_t length, uint32_t access, provider_object** out,
                   mr_keys* keys, std::string* why) = nullptr;
  status (*dereg_mr)(provider_object* mr) = nullptr;
  status (*create_cq)(provider_object* dev, const cq_init& init, provider_object** out, uint32_t* cqn,
                      uint32_t* depth, std::string* why) = nullptr;
  status (*destroy_cq)(provider_object* cq) = nullptr;
  status (*export_cq)(provider_object* cq, dev::cq_handle* out, std::string* why) = nullptr;
  status (*cq_in_error)(provider_object* cq, bool* out) = nullptr;
  status (*create_qp)(provider_object* pd, const qp_create_args& args, provider_object** out, uint32_t* qpn,
                      qp_caps* caps, std::string* why) = nullptr;
  status (*modify_qp)(provider_object* qp, const qp_attr& attr, uint32_t mask, std::string* why) = nullptr;
  status (*query_qp)(provider_object* qp, qp_attr* out, std::string* why) = nullptr;
  status (*destroy_qp)(provider_object* qp) = nullptr;
  status (*export_qp)(provider_object* qp, const qp_export_options& opt, dev::qp_handle* out,
                      std::string* why) = nullptr;
  // Shared receive queues. export_srq fills the geometry (buf, log_wqes, log_stride, dbrec,
  // srqn, max_sge) with the WQE links already in place (i -> i + 1, ring order); the
  // control path sets the free-list state.
  status (*create_srq)(provider_object* pd, const srq_init& init, provider_object** out, uint32_t* srqn,
                       srq_caps* caps, std::string* why) = nullptr;
  status (*destroy_srq)(provider_object* srq) = nullptr;
  status (*export_srq)(provider_object* srq, dev::srq_handle* out, std::string* why) = nullptr;
  // The free list the CPU posts through (verbs::srq::host_handle()), or null once a copy
  // was exported for a kernel or the srq object went: where a RESET or destroy of a QP on
  // this SRQ returns the WQEs of the receive CQEs it discards, as rdma-core's cq clean does
  // (src/core/cq_clean.hpp). A provider without it (not_supported) leaves them taken.
  status (*set_srq_free_list)(provider_object* srq, dev::srq_handle* list) = nullptr;
};

// The not_supported defaults (src/verbs/provider_defaults.cpp).
namespace defaults {
status list_devices(std::vector<device_info>*);
status open_device(std::string_view, provider_object**, std::string*);
status destroy(provider_object*);
status query_device(provider_object*, device_attr*, std::string*);
status query_port(provider_object*, uint32_t, port_attr*, std::string*);
status alloc_pd(provider_object*, provider_object**, uint32_t*, std::string*);
status reg_mr(provider_object*, void*, size_t, uint32_t, provider_object**, mr_keys*, std::string*);
status create_cq(provider_object*, const cq_init&, provider_object**, uint32_t*, uint32_t*, std::string*);
status export_cq(provider_object*, dev::cq_handle*, std::string*);
status cq_in_error(provider_object*, bool*);
status create_qp(provider_object*, const qp_create_args&, provider_object**, uint32_t*, qp_caps*, std::string*);
status modify_qp(provider_object*, const qp_attr&, uint32_t, std::string*);
status query_qp(provider_object*, qp_attr*, std::string*);
status export_qp(provider_object*, const qp_export_options&, dev::qp_handle*, std::string*);
status create_srq(provider_object*, const srq_init&, provider_object**, uint32_t*, srq_caps*, std::string*);
status export_srq(provider_object*, dev::srq_handle*, std::string*);
status set_srq_free_list(provider_object*, dev::srq_handle*);
}  // namespace defaults

// Fills every empty slot with its not_supported default. Use it to build the const table:
//   const provider_ops my_ops = with_defaults({.name = "x", .open_device = ...});
constexpr provider_ops with_defaults(provider_ops o) {
  if (!o.list_devices) o.list_devices = defaults::list_devices;
  if (!o.open_device) o.open_device = defaults::open_device;
  if (!o.close_device) o.close_device = defaults::destroy;
  if (!o.query_device) o.query_device = defaults::query_device;
  if (!o.query_port) o.query_port = defaults::query_port;
  if (!o.alloc_pd) o.alloc_pd = defaults::alloc_pd;
  if (!o.dealloc_pd) o.dealloc_pd = defaults::destroy;
  if (!o.reg_mr) o.reg_mr = defaults::reg_mr;
  if (!o.dereg_mr) o.dereg_mr = defaults::destroy;
  if (!o.create_cq) o.create_cq = defaults::create_cq;
  if (!o.destroy_cq) o.destroy_cq = defaults::destroy;
  if (!o.export_cq) o.export_cq = defaults::export_cq;
  if (!o.cq_in_error) o.cq_in_error = defaults::cq_in_error;
  if (!o.create_qp) o.create_qp = defaults::create_qp;
  if (!o.modify_qp) o.modify_qp = defaults::modify_qp;
  if (!o.query_qp) o.query_qp = defaults::query_qp;
  if (!o.destroy_qp) o.destroy_qp = defaults::destroy;
  if (!o.export_qp) o.export_qp = defaults::export_qp;
  if (!o.create_srq) o.create_srq = defaults::create_srq;
  if (!o.destroy_srq) o.destroy_srq = defaults::destroy;
  if (!o.export_srq) o.export_srq = defaults::export_srq;
  if (!o.set_srq_free_list) o.set_srq_free_list = defaults::set_srq_free_list;
  return o;
}

// Adds a provider (out-of-tree providers call this; built-in ones are listed in
// src/verbs/builtin_providers.cpp so a static link keeps them). Registering the same
// table twice is a no-op. Returns ok, or invalid for a table without a name.
status register_provider(const provider_ops* ops);

// Returns the registered providers, built-in ones first.
std::vector<const provider_ops*> providers();

}  // namespace gdaki::verbs
