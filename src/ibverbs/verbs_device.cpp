// The soft devices as ibverbs devices: listing, open/close, device, port, GID and P_Key
// queries. A soft device is RoCE-like (link layer Ethernet, one GID per port) because its
// address, the soft wire address of docs/wire-protocol.md, is 16 bytes: exactly a GID.
// Programs exchange GIDs out of band as they do on RoCE, and modify_qp to RTR with the
// peer's GID connects the soft wire (verbs_qp.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"
#include "soft_verbs.hpp"

namespace gdaki::ibverbs {

namespace {

constexpr int max_devices = 16;

struct device_table {
  ibv_device devs[max_devices] = {};
  int count = 0;
};

device_table& table() {
  static device_table t = [] {
    device_table d;
    const uint32_t n = soft::get_config().devices;
    d.count = static_cast<int>(n < max_devices ? n : max_devices);
    for (int i = 0; i < d.count; ++i) {
      ibv_device& v = d.devs[i];
      v.node_type = IBV_NODE_CA;
      v.transport_type = IBV_TRANSPORT_IB;
      std::snprintf(v.name, sizeof v.name, "gdaki_soft%d", i);
      std::snprintf(v.dev_name, sizeof v.dev_name, "gdaki_soft%d", i);
      // No sysfs node exists: readers of these paths (ibv_devinfo's board_id) find nothing.
      std::snprintf(v.dev_path, sizeof v.dev_path, "/nonexistent/gdaki_soft%d", i);
      std::snprintf(v.ibdev_path, sizeof v.ibdev_path, "/nonexistent/gdaki_soft%d", i);
    }
    return d;
  }();
  return t;
}

int index_of(const ibv_device* d) { return static_cast<int>(d - table().devs); }

// What the soft provider's attributes say, in ibverbs terms (network order GUIDs).
uint64_t guid_of(const verbs::device_attr& a) { return htobe64(a.node_guid); }

}  // namespace

bool is_soft_device(const ibv_device* d) {
  const auto& t = table();
  const auto p = reinterpret_cast<uintptr_t>(d);
  return p >= reinterpret_cast<uintptr_t>(&t.devs[0]) && p < reinterpret_cast<uintptr_t>(&t.devs[t.count]);
}

int soft_device_count() { return table().count; }
ibv_device* soft_device_at(int i) { return &table().devs[i]; }
uint64_t soft_device_guid(const ibv_device* d) { return htobe64(0x50f7000000000000ull | static_cast<uint64_t>(index_of(d))); }

int errno_of(status st) {
  switch (st) {
    case status::ok: return 0;
    case status::not_supported: return EOPNOTSUPP;
    case status::invalid: return EINVAL;
    case status::access: return EACCES;
    case status::no_memory: return ENOMEM;
    case status::not_found: return ENODEV;
    case status::busy: return EBUSY;
    case status::timeout: return ETIMEDOUT;
    case status::again: return EAGAIN;
    default: return EIO;
  }
}

int soft_fail(const char* verb, status st, const std::string& why) {
  std::fprintf(stderr, "gdaki verbs: %s: %s\n", verb, why.c_str());
  return errno_of(st);
}

int soft_not_supported(const char* verb) {
  std::fprintf(stderr, "gdaki verbs: %s is not supported on the soft device (docs/verbs.md)\n", verb);
  return EOPNOTSUPP;
}

ibv_context* soft_open_device(ibv_device* d) {
  auto* st = new context_state;
  st->index = static_cast<uint32_t>(index_of(d));
  try {
    st->dev = verbs::device::open("soft" + std::to_string(st->index));
    (void)verbs_log_errors();  // a malformed value fails here, not in a poll
  } catch (const gdaki::error& e) {
    errno = soft_fail("ibv_open_device", e.code(), std::string(d->name) + ": " + e.what());
    delete st;
    return nullptr;
  }
  if (pipe2(st->async_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    delete st;
    errno = err;
    return nullptr;
  }
  static std::once_flag warned;
  if (std::getenv("GDAKI_SOFT_SECRET") == nullptr && std::getenv("GDAKI_SOFT_SECRET_FILE") == nullptr) {
    std::call_once(warned, [] {
      std::fprintf(stderr,
                   "gdaki verbs: neither GDAKI_SOFT_SECRET nor GDAKI_SOFT_SECRET_FILE is set: peers in other "
                   "processes will be refused (docs/verbs.md, Running a program)\n");
    });
  }
  auto* ctx = static_cast<soft_context*>(std::calloc(1, sizeof(soft_context)));
  ctx->st = st;
  verbs_context& v = ctx->vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = soft_query_port;
  v.query_device_ex = soft_query_device_ex;
  v.create_qp_ex = soft_create_qp_ex;
  ibv_context& c = v.context;
  c.device = d;
  c.cmd_fd = -1;
  c.async_fd = st->async_fd[0];
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c.ops.poll_cq = soft_poll_cq;
  c.ops.req_notify_cq = soft_req_notify_cq;
  c.ops.post_send = soft_post_send;
  c.ops.post_recv = soft_post_recv;
  c.ops.post_srq_recv = soft_post_srq_recv;
  return &c;
}

int soft_close_device(ibv_context* c) {
  soft_context* ctx = ctx_of(c);
  context_state* st = ctx->st;
  soft_stop_notifier(st);
  close(st->async_fd[0]);
  close(st->async_fd[1]);
  pthread_mutex_destroy(&c->mutex);
  delete st;
  std::free(ctx);
  return 0;
}

int soft_query_device(ibv_context* c, ibv_device_attr* a) {
  verbs::device_attr d;
  try {
    d = ctx_of(c)->st->dev.query();
  } catch (const gdaki::error& e) {
    return soft_fail("ibv_query_device", e.code(), e.what());
  }
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "gdaki-soft");
  a->node_guid = guid_of(d);
  a->sys_image_guid = guid_of(d);
  a->max_mr_size = d.max_mr_size;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = d.vendor_id;
  a->vendor_part_id = d.vendor_part_id;
  a->hw_ver = 0;
  a->max_qp = static_cast<int>(d.max_qp);
  // A WR can take up to 16 WQEBBs; the SQ ring is sized for max_send_wr of the largest
  // WR the QP was created for (verbs_qp.cpp), so the WR limit is the ring limit / 4.
  a->max_qp_wr = static_cast<int>(d.max_qp_wr / 4);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  a->max_sge = static_cast<int>(d.max_sge < 14 ? d.max_sge : 14);  // 2 + 14 DS: a 4-WQEBB WQE
  a->max_sge_rd = a->max_sge;
  a->max_cq = static_cast<int>(d.max_cq);
  a->max_cqe = static_cast<int>(d.max_cqe);
  a->max_mr = static_cast<int>(d.max_mr);
  a->max_pd = static_cast<int>(d.max_pd);
  a->max_qp_rd_atom = static_cast<int>(d.max_qp_rd_atom);
  a->max_qp_init_rd_atom = static_cast<int>(d.max_qp_rd_atom);
  a->max_res_rd_atom = static_cast<int>(d.max_qp_dest_rd_atom) * a->max_qp;
  a->atomic_cap = d.atomic_host_endian ? IBV_ATOMIC_HCA : IBV_ATOMIC_GLOB;
  a->max_pkeys = 1;
  a->phys_port_cnt = static_cast<uint8_t>(d.phys_port_cnt);
  return 0;
}

int soft_query_device_ex(ibv_context* c, const ibv_query_device_ex_input*, ibv_device_attr_ex* a, size_t size) {
  if (size < sizeof(ibv_device_attr)) return EINVAL;
  std::memset(a, 0, size);
  const int rc = soft_query_device(c, &a->orig_attr);
  if (rc != 0) return rc;
  // The extended fields stay zero (no ODP, TSO, RSS, timestamps, packet pacing, ...), which
  // is how a device says it lacks them.
  return 0;
}

int soft_local_gid(soft_context* ctx, uint8_t gid[16]) {
  context_state* st = ctx->st;
  std::lock_guard<std::mutex> lock(st->mu);
  static const uint8_t zero[16] = {};
  if (std::memcmp(st->gid, zero, 16) == 0) {
    try {
      const auto a = soft::local_address(st->dev);
      std::memcpy(st->gid, a.data(), 16);
    } catch (const gdaki::error& e) {
      return soft_fail("ibv_query_gid", e.code(), e.what());
    }
  }
  std::memcpy(gid, st->gid, 16);
  return 0;
}

int soft_query_port(ibv_context* c, uint8_t port, ibv_port_attr* a, size_t size) {
  if (port != 1) return EINVAL;
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = 1;
  p.port_cap_flags = 0;
  p.max_msg_sz = 1u << 31;
  p.pkey_tbl_len = 1;
  p.lid = 0;  // Ethernet link layer: no LIDs; peers are named by GID
  p.active_width = 2;  // 4X
  p.active_speed = 32;  // 25 Gb/s per lane: a nominal figure, the wire has no fixed rate
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  (void)c;
  std::memcpy(a, &p, size < sizeof p ? size : sizeof p);
  return 0;
}

int soft_query_gid(ibv_context* c, uint32_t port, uint32_t index, uint8_t gid[16]) {
  if (port != 1 || index != 0) return EINVAL;
  return soft_local_gid(ctx_of(c), gid);
}

int soft_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, size_t size) {
  if (size < sizeof(ibv_gid_entry)) return EINVAL;
  ibv_gid_entry g{};
  const int rc = soft_query_gid(c, port, index, g.gid.raw);
  if (rc != 0) return rc;
  g.gid_index = index;
  g.port_num = port;
  g.gid_type = IBV_GID_TYPE_ROCE_V2;
  g.ndev_ifindex = 0;
  std::memcpy(e, &g, sizeof g);
  return 0;
}

int soft_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) return EINVAL;
  *pkey = htobe16(0xffff);
  return 0;
}

}  // namespace gdaki::ibverbs
