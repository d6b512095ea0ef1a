// The libfabric poster: proxy descriptors executed as libfabric RMA and atomic operations
// on an RDM endpoint. See proxy/libfabric_poster.hpp and docs/proxy.md.
#include "gdaki/proxy/libfabric_poster.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <cstdlib>
#include <cstring>
#include <deque>

#include "libfabric_loader.hpp"

namespace gdaki::proxy {

namespace {

// Operand staging for one operation in flight: libfabric reads operand buffers any time
// until the operation completes, and FI_MR_LOCAL providers need them registered, so they
// live in one registered array, one cache line per operation.
struct alignas(64) stage {
  uint64_t operand;  // atomic operand / swap / signal value
  uint64_t compare;  // compare-and-swap comparand
  uint64_t inline_bytes[2];
  uint64_t discard;  // old value of a signal's fetching atomic (see issue_signal)
  uint64_t pad[3];
};
static_assert(sizeof(stage) == 64, "one staging line per operation");

// Per-operation context. fi_context2 first: libfabric (FI_CONTEXT / FI_CONTEXT2 modes)
// owns that storage while the operation runs and hands its address back in the CQ entry.
struct op_ctx {
  fi_context2 fctx;
  uint64_t cookie;
  descriptor d;
  uint32_t index;
  uint8_t phase;  // put_signal: 0 = data write in flight, 1 = signal in flight
};

struct local_region {
  fid_mr* mr;
  void* desc;
  uint64_t base;
  uint64_t length;
};

struct remote_region {
  uint16_t peer;
  uint64_t base;
  uint64_t length;
  uint64_t key;
};

bool inside(uint64_t base, uint64_t length, uint64_t addr, uint64_t bytes) {
  return addr >= base && bytes <= length && addr - base <= length - bytes;
}

}  // namespace

struct libfabric_poster::impl {
  const ofi::api* api = nullptr;
  libfabric_options options;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  uint64_t mr_mode = 0;
  uint64_t next_key = 1;
  bool fetch_write = false;  // fetching FI_ATOMIC_WRITE on u64 (signal set as an atomic swap)
  bool fetch_add = false;
  bool compare_swap = false;
  std::string provider;
  std::string display;

  std::vector<local_region> locals;
  std::vector<remote_region> remotes;
  std::vector<fi_addr_t> peers;

  std::vector<op_ctx> ops;
  std::vector<uint32_t> free_ops;
  stage* staging = nullptr;
  fid_mr* staging_mr = nullptr;
  void* staging_desc = nullptr;
  std::vector<uint32_t> deferred;  // put_signal ops whose signal phase got FI_EAGAIN
  std::deque<completion> ready;

  ~impl() {
    if (ep) fi_close(&ep->fid);
    for (auto& l : locals)
      if (l.mr) fi_close(&l.mr->fid);
    if (staging_mr) fi_close(&staging_mr->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) api->freeinfo(info);
    std::free(staging);
  }

  std::string err(const char* what, int rc) const {
    return std::string(what) + " failed on " + options.provider + ": " + api->strerror(-rc) + " (" +
           std::to_string(rc) + ")";
  }

  // Registers memory the way the provider asked (info->domain_attr->mr_mode):
  //  FI_MR_PROV_KEY  the provider picks the key; otherwise we request unique ones;
  //  FI_MR_ENDPOINT  the region is bound to our endpoint and enabled before use;
  //  FI_MR_LOCAL     local buffers need the registration's descriptor (we always pass it);
  //  FI_MR_VIRT_ADDR remote addresses are virtual addresses (else offsets; see raddr);
  //  FI_MR_ALLOCATED only allocated memory may be registered: we never register anything else.
  int reg(void* addr, size_t len, fid_mr** mr) {
    const uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    const uint64_t requested = (mr_mode & FI_MR_PROV_KEY) ? 0 : next_key++;
    int rc = fi_mr_reg(domain, addr, len, access, 0, requested, 0, mr, nullptr);
    if (rc != 0) return rc;
    if (mr_mode & FI_MR_ENDPOINT) {
      rc = fi_mr_bind(*mr, &ep->fid, 0);
      if (rc == 0) rc = fi_mr_enable(*mr);
      if (rc != 0) {
        fi_close(&(*mr)->fid);
        *mr = nullptr;
      }
    }
    return rc;
  }

  // The target address the provider wants for virtual address va of region r.
  uint64_t raddr(const remote_region& r, uint64_t va) const { return (mr_mode & FI_MR_VIRT_ADDR) ? va : va - r.base; }

  const remote_region* remote(uint16_t peer, uint32_t key, uint64_t va, uint64_t bytes) const {
    if (key >= remotes.size()) return nullptr;
    const remote_region& r = remotes[key];
    if (r.peer != peer || !inside(r.base, r.length, va, bytes)) return nullptr;
    return &r;
  }

  const local_region* local(uint32_t key, uint64_t va, uint64_t bytes) const {
    if (key >= locals.size()) return nullptr;
    const local_region& l = locals[key];
    return inside(l.base, l.length, va, bytes) ? &l : nullptr;
  }

  // Every operation completes only once it is delivered: its effect is in the target's
  // memory, as a mlx5 RC completion means the responder acknowledged it (quiet, put_signal
  // and get-after-put rely on it). libfabric's default completion (transmit complete)
  // only frees our buffer, so writes ask for FI_DELIVERY_COMPLETE per operation, and
  // signals are fetching atomics (their completion needs the target's reply) with the old
  // value discarded, as the mlx5 path does. Endpoint-wide FI_DELIVERY_COMPLETE is not
  // used: with libfabric 1.17's shm it corrupts non-fetching atomics.
  ssize_t write_delivered(op_ctx& c, void* buf, size_t len, void* desc, uint64_t addr, uint64_t key) {
    iovec iov{buf, len};
    fi_rma_iov rma{addr, len, key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = peers[c.d.peer];
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = &c.fctx;
    return fi_writemsg(ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
  }

  // The signal of a signal or put_signal descriptor: add (fetching FI_SUM) or set
  // (fetching FI_ATOMIC_WRITE, or a delivered 8-byte write where the provider lacks it).
  ssize_t issue_signal(op_ctx& c, bool set, uint64_t sig_va, uint32_t sig_key) {
    const remote_region* r = remote(c.d.peer, sig_key, sig_va, 8);
    if (r == nullptr) return -FI_EINVAL;
    stage& s = staging[c.index];
    s.operand = c.d.operand0;
    if (!set || fetch_write) {
      if (!set && !fetch_add) return -FI_EOPNOTSUPP;
      return fi_fetch_atomic(ep, &s.operand, 1, staging_desc, &s.discard, staging_desc, peers[c.d.peer],
                             raddr(*r, sig_va), r->key, FI_UINT64, set ? FI_ATOMIC_WRITE : FI_SUM, &c.fctx);
    }
    return write_delivered(c, &s.operand, 8, staging_desc, raddr(*r, sig_va), r->key);
  }

  // Starts (the first phase of) c.d. Returns 0 or a negative fi_errno.
  ssize_t issue(op_ctx& c) {
    const descriptor& d = c.d;
    if (d.peer >= peers.size()) return -FI_EINVAL;
    const fi_addr_t to = peers[d.peer];
    stage& s = staging[c.index];
    switch (d.op) {
      case opcode::put:
      case opcode::get: {
        const remote_region* r = remote(d.peer, d.remote_key, d.remote_addr, d.length);
        const local_region* l = local(d.local_key, d.local_addr, d.length);
        if (r == nullptr || l == nullptr) return -FI_EINVAL;
        void* buf = reinterpret_cast<void*>(d.local_addr);
        if (d.op == opcode::put) return write_delivered(c, buf, d.length, l->desc, raddr(*r, d.remote_addr), r->key);
        return fi_read(ep, buf, d.length, l->desc, to, raddr(*r, d.remote_addr), r->key, &c.fctx);
      }
      case opcode::put_inline: {
        const remote_region* r = remote(d.peer, d.remote_key, d.remote_addr, d.length);
        if (r == nullptr) return -FI_EINVAL;
        s.inline_bytes[0] = d.operand0;
        s.inline_bytes[1] = d.operand1;
        return write_delivered(c, s.inline_bytes, d.length, staging_desc, raddr(*r, d.remote_addr), r->key);
      }
      case opcode::signal_add:
      case opcode::signal_set:
        return issue_signal(c, d.op == opcode::signal_set, d.remote_addr, d.remote_key);
      case opcode::put_signal_add:
      case opcode::put_signal_set: {
        const remote_region* r = remote(d.peer, d.remote_key, d.remote_addr, d.length);
        const local_region* l = local(d.local_key, d.local_addr, d.length);
        if (r == nullptr || l == nullptr || remote(d.peer, d.signal_key, d.operand1, 8) == nullptr) return -FI_EINVAL;
        if (d.length == 0) {
          c.phase = 1;
          return issue_signal(c, d.op == opcode::put_signal_set, d.operand1, d.signal_key);
        }
        // Data first, delivered (see write_delivered), and only then the signal: neither
        // tcp;ofi_rxm nor shm orders an RMA write before a later atomic (their tx
        // msg_order has no write-then-atomic bit, max_order_waw_size is 0) and neither
        // offers FI_FENCE, so waiting for the data's delivery is the portable order.
        c.phase = 0;
        return write_delivered(c, reinterpret_cast<void*>(d.local_addr), d.length, l->desc, raddr(*r, d.remote_addr),
                               r->key);
      }
      case opcode::atomic_fetch_add:
      case opcode::atomic_compare_swap: {
        const remote_region* r = remote(d.peer, d.remote_key, d.remote_addr, 8);
        const local_region* l = local(d.local_key, d.local_addr, 8);
        if (r == nullptr || l == nullptr) return -FI_EINVAL;
        void* result = reinterpret_cast<void*>(d.local_addr);
        if (d.op == opcode::atomic_fetch_add) {
          if (!fetch_add) return -FI_EOPNOTSUPP;
          s.operand = d.operand0;
          return fi_fetch_atomic(ep, &s.operand, 1, staging_desc, result, l->desc, to, raddr(*r, d.remote_addr), r->key,
                                 FI_UINT64, FI_SUM, &c.fctx);
        }
        if (!compare_swap) return -FI_EOPNOTSUPP;
        s.compare = d.operand0;
        s.operand = d.operand1;
        return fi_compare_atomic(ep, &s.operand, 1, staging_desc, &s.compare, staging_desc, result, l->desc, to,
                                 raddr(*r, d.remote_addr), r->key, FI_UINT64, FI_CSWAP, &c.fctx);
      }
      default:
        return -FI_EOPNOTSUPP;
    }
  }

  void finish(op_ctx& c, status result) {
    ready.push_back(completion{c.cookie, result});
    free_ops.push_back(c.index);
  }

  // One CQ entry for c: a put_signal's data phase moves on to its signal; anything else
  // is finished.
  void on_complete(op_ctx& c) {
    if ((c.d.op == opcode::put_signal_add || c.d.op == opcode::put_signal_set) && c.phase == 0) {
      c.phase = 1;
      start_signal_phase(c);
      return;
    }
    finish(c, status::ok);
  }

  void start_signal_phase(op_ctx& c) {
    const ssize_t rc = issue_signal(c, c.d.op == opcode::put_signal_set, c.d.operand1, c.d.signal_key);
    if (rc == -FI_EAGAIN) {
      deferred.push_back(c.index);
    } else if (rc != 0) {
      finish(c, status::io_error);
    }
  }

  static status map(ssize_t rc) {
    switch (rc) {
      case 0: return status::ok;
      case -FI_EAGAIN: return status::again;
      case -FI_EINVAL: return status::invalid;
      case -FI_EOPNOTSUPP: return status::not_supported;
      case -FI_EACCES:
      case -FI_EKEYREJECTED: return status::access;
      default: return status::io_error;
    }
  }

  void drain_cq() {
    fi_cq_entry entries[16];
    for (;;) {
      const ssize_t n = fi_cq_read(cq, entries, 16);  // also drives manual progress
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) on_complete(*static_cast<op_ctx*>(entries[i].op_context));
        if (n < 16) return;
        continue;
      }
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry e{};
        if (fi_cq_readerr(cq, &e, 0) == 1 && e.op_context != nullptr) {
          op_ctx& c = *static_cast<op_ctx*>(e.op_context);
          finish(c, e.err == FI_EACCES || e.err == FI_EKEYREJECTED ? status::access : status::io_error);
        }
        continue;
      }
      return;  // -FI_EAGAIN: nothing more now
    }
  }
};

libfabric_poster::libfabric_poster(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
libfabric_poster::~libfabric_poster() = default;

status libfabric_poster::open(const libfabric_options& options, std::unique_ptr<libfabric_poster>* out,
                              std::string* why) {
  std::string scratch;
  if (why == nullptr) why = &scratch;
  auto m = std::make_unique<impl>();
  m->options = options;
  m->api = ofi::load(why);
  if (m->api == nullptr) return status::not_supported;
  if (options.max_outstanding == 0) {
    *why = "max_outstanding must be at least 1";
    return status::invalid;
  }

  fi_info* hints = m->api->dupinfo(nullptr);  // fi_allocinfo()
  if (hints == nullptr) {
    *why = "fi_allocinfo failed";
    return status::no_memory;
  }
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;  // we give every operation a fi_context2
  // Every MR mode we can honour (see impl::reg); the provider keeps the ones it needs.
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // one thread drives the poster
  hints->fabric_attr->prov_name = strdup(options.provider.c_str());  // freed by fi_freeinfo
  const char* node = options.node.empty() ? nullptr : options.node.c_str();
  int rc = m->api->getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, nullptr, node ? FI_SOURCE : 0, hints,
                           &m->info);
  m->api->freeinfo(hints);
  if (rc != 0 || m->info == nullptr) {
    *why = "no libfabric provider '" + options.provider + "' with RDM RMA+atomics here: " + m->api->strerror(-rc);
    m->info = nullptr;
    return status::not_supported;
  }
  const auto fail = [&](const char* what, int code) {
    *why = m->err(what, code);
    return status::io_error;
  };
  m->mr_mode = m->info->domain_attr->mr_mode;
  m->provider = m->info->fabric_attr->prov_name;
  m->display = "libfabric:" + m->provider;

  if ((rc = m->api->fabric(m->info->fabric_attr, &m->fabric, nullptr)) != 0) return fail("fi_fabric", rc);
  if ((rc = fi_domain(m->fabric, m->info, &m->domain, nullptr)) != 0) return fail("fi_domain", rc);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.size = size_t{options.max_outstanding} * 2;
  cq_attr.wait_obj = FI_WAIT_NONE;  // the proxy thread polls
  if ((rc = fi_cq_open(m->domain, &cq_attr, &m->cq, nullptr)) != 0) return fail("fi_cq_open", rc);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if ((rc = fi_av_open(m->domain, &av_attr, &m->av, nullptr)) != 0) return fail("fi_av_open", rc);
  if ((rc = fi_endpoint(m->domain, m->info, &m->ep, nullptr)) != 0) return fail("fi_endpoint", rc);
  if ((rc = fi_ep_bind(m->ep, &m->cq->fid, FI_TRANSMIT | FI_RECV)) != 0) return fail("fi_ep_bind(cq)", rc);
  if ((rc = fi_ep_bind(m->ep, &m->av->fid, 0)) != 0) return fail("fi_ep_bind(av)", rc);
  if ((rc = fi_enable(m->ep)) != 0) return fail("fi_enable", rc);

  size_t count = 0;
  m->fetch_write = fi_fetch_atomicvalid(m->ep, FI_UINT64, FI_ATOMIC_WRITE, &count) == 0 && count >= 1;
  m->fetch_add = fi_fetch_atomicvalid(m->ep, FI_UINT64, FI_SUM, &count) == 0 && count >= 1;
  m->compare_swap = fi_compare_atomicvalid(m->ep, FI_UINT64, FI_CSWAP, &count) == 0 && count >= 1;

  const size_t stage_bytes = sizeof(stage) * options.max_outstanding;
  m->staging = static_cast<stage*>(std::aligned_alloc(64, stage_bytes));
  if (m->staging == nullptr) {
    *why = "staging allocation failed";
    return status::no_memory;
  }
  std::memset(static_cast<void*>(m->staging), 0, stage_bytes);
  if ((rc = m->reg(m->staging, stage_bytes, &m->staging_mr)) != 0) return fail("fi_mr_reg(staging)", rc);
  m->staging_desc = fi_mr_desc(m->staging_mr);
  m->ops.resize(options.max_outstanding);
  for (uint32_t i = options.max_outstanding; i-- > 0;) {
    m->ops[i].index = i;
    m->free_ops.push_back(i);
  }
  out->reset(new libfabric_poster(std::move(m)));
  return status::ok;
}

status libfabric_poster::register_memory(void* addr, size_t len, uint32_t* handle) {
  if (addr == nullptr || len == 0) return status::invalid;
  fid_mr* mr = nullptr;
  if (impl_->reg(addr, len, &mr) != 0) return status::io_error;
  impl_->locals.push_back(local_region{mr, fi_mr_desc(mr), reinterpret_cast<uint64_t>(addr), len});
  *handle = static_cast<uint32_t>(impl_->locals.size() - 1);
  return status::ok;
}

status libfabric_poster::export_region(uint32_t handle, region_export* out) const {
  if (handle >= impl_->locals.size()) return status::invalid;
  const local_region& l = impl_->locals[handle];
  *out = region_export{l.base, l.length, fi_mr_key(l.mr)};
  return status::ok;
}

std::vector<uint8_t> libfabric_poster::address() const {
  size_t len = 0;
  fi_getname(&impl_->ep->fid, nullptr, &len);  // -FI_ETOOSMALL, with the size in len
  std::vector<uint8_t> a(len);
  if (fi_getname(&impl_->ep->fid, a.data(), &len) != 0) return {};
  a.resize(len);
  return a;
}

status libfabric_poster::add_peer(const std::vector<uint8_t>& address, uint16_t* peer) {
  if (address.empty() || impl_->peers.size() >= no_counter) return status::invalid;
  fi_addr_t a = FI_ADDR_UNSPEC;
  if (fi_av_insert(impl_->av, address.data(), 1, &a, 0, nullptr) != 1) return status::io_error;
  impl_->peers.push_back(a);
  *peer = static_cast<uint16_t>(impl_->peers.size() - 1);
  return status::ok;
}

status libfabric_poster::add_remote_region(uint16_t peer, const region_export& region, uint32_t* key) {
  if (peer >= impl_->peers.size() || region.length == 0) return status::invalid;
  impl_->remotes.push_back(remote_region{peer, region.base, region.length, region.key});
  *key = static_cast<uint32_t>(impl_->remotes.size() - 1);
  return status::ok;
}

status libfabric_poster::post(const descriptor& d, uint64_t cookie) {
  impl& m = *impl_;
  if (m.free_ops.empty()) return status::again;
  op_ctx& c = m.ops[m.free_ops.back()];
  c.cookie = cookie;
  c.d = d;
  c.phase = 0;
  const ssize_t rc = m.issue(c);
  if (rc != 0) return impl::map(rc);
  m.free_ops.pop_back();
  return status::ok;
}

size_t libfabric_poster::poll(completion* out, size_t max) {
  impl& m = *impl_;
  if (!m.deferred.empty()) {
    std::vector<uint32_t> again;
    again.swap(m.deferred);
    for (uint32_t i : again) m.start_signal_phase(m.ops[i]);
  }
  m.drain_cq();
  size_t n = 0;
  while (n < max && !m.ready.empty()) {
    out[n++] = m.ready.front();
    m.ready.pop_front();
  }
  return n;
}

const char* libfabric_poster::name() const { return impl_->display.c_str(); }
const std::string& libfabric_poster::provider() const { return impl_->provider; }
uint64_t libfabric_poster::mr_mode() const { return impl_->mr_mode; }

}  // namespace gdaki::proxy
