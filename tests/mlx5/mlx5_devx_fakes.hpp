// Fake libibverbs / libmlx5 tables for the mlx5 provider's control-path tests: they
// record every call and command mailbox and answer with programmed object numbers, QP
// states and command failures; the mlx5_devx_fake fixture gives each test a fake device
// and checks at its end that every object is gone. Shared by mlx5_devx_fake_test.cpp and
// mlx5_srq_fake_test.cpp (each test file gets its own copy: everything is file-local).
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "gdaki/verbs/provider.hpp"
#include "providers/mlx5/mlx5_loader.hpp"
#include "providers/mlx5/mlx5_ops.hpp"
#include "providers/mlx5/mlx5_prm_cmd.hpp"

using gdaki::status;
using namespace gdaki::mlx5;
namespace verbs = gdaki::verbs;
namespace pc = gdaki::mlx5::prm_cmd;

namespace {

// ---- the fake rdma-core -------------------------------------------------------------------

struct fake_obj {
  uint16_t opcode = 0;  // CREATE_CQ, CREATE_QP or CREATE_RMP
  uint32_t number = 0;  // cqn / qpn / rmpn
  uint8_t state = 0;    // QP: PRM state as the fake NIC sees it
};

struct recorder {
  std::vector<std::string> calls;              // "umem_reg", "alloc_uar", "CREATE_CQ", ...
  std::vector<std::vector<uint8_t>> commands;  // every create / modify / query mailbox, in order
  std::map<uint16_t, std::pair<uint8_t, uint32_t>> fail;  // opcode -> (status, syndrome)
  uint32_t next_umem = 0x100;
  uint32_t next_cqn = 0x40;
  uint32_t next_qpn = 0x1000;
  uint32_t next_rmpn = 0x300;
  int umems = 0, uars = 0, objs = 0, pds = 0, mrs = 0, ahs = 0;  // live counts
  int last_mr_access = -1;
  uint8_t cq_status = 0;  // QUERY_CQ answer
  // QUERY_HCA_CAP (atomic) answer: endianness mode, atomic_operations, atomic_size_qp
  uint32_t endian_mode = 1, atomic_ops = 0xf, atomic_size_qp = 0xc;
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::vector<std::pair<void*, size_t>> umem_ranges;
  alignas(4096) uint8_t uar_page[4096] = {};
  mlx5_wqe_av av{};
  ibv_ah_attr last_ah{};
};

recorder* rec = nullptr;

std::vector<uint8_t> copy_in(const void* in, size_t inlen) {
  const auto* p = static_cast<const uint8_t*>(in);
  return {p, p + inlen};
}

// Answers a command: the programmed failure, or success.
bool answer(uint16_t opcode, void* out, size_t outlen) {
  std::memset(out, 0, outlen);
  auto it = rec->fail.find(opcode);
  if (it == rec->fail.end()) return true;
  std::span<uint8_t> o(static_cast<uint8_t*>(out), outlen);
  pc::set_bits(o, 0x00, 8, it->second.first);
  pc::set_bits(o, 0x20, 32, it->second.second);
  return false;
}

ibv_pd* f_alloc_pd(ibv_context* ctx) {
  rec->calls.push_back("alloc_pd");
  ++rec->pds;
  auto* pd = new ibv_pd{};
  pd->context = ctx;
  return pd;
}
int f_dealloc_pd(ibv_pd* pd) {
  rec->calls.push_back("dealloc_pd");
  --rec->pds;
  delete pd;
  return 0;
}
ibv_mr* f_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  rec->calls.push_back("reg_mr");
  rec->last_mr_access = access;
  ++rec->mrs;
  auto* mr = new ibv_mr{};
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = 0x1111;
  mr->rkey = 0x2222;
  return mr;
}
int f_dereg_mr(ibv_mr* mr) {
  rec->calls.push_back("dereg_mr");
  --rec->mrs;
  delete mr;
  return 0;
}
int f_close_device(ibv_context*) { return 0; }
int f_query_port_compat(ibv_context*, uint8_t, _compat_ibv_port_attr* attr) {
  // mlx5::query_port hands the full, zeroed ibv_port_attr to the compat entry point.
  auto* pa = reinterpret_cast<ibv_port_attr*>(attr);
  pa->state = IBV_PORT_ACTIVE;
  pa->link_layer = rec->link_layer;
  pa->lid = 0x11;
  return 0;
}
ibv_ah* f_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  rec->calls.push_back("create_ah");
  rec->last_ah = *attr;
  ++rec->ahs;
  auto* ah = new ibv_ah{};
  ah->pd = pd;
  return ah;
}
int f_destroy_ah(ibv_ah* ah) {
  rec->calls.push_back("destroy_ah");
  --rec->ahs;
  delete ah;
  return 0;
}

int f_init_obj(mlx5dv_obj* obj, uint64_t type) {
  if (type == MLX5DV_OBJ_PD) {
    obj->pd.out->pdn = 0x42;
    return 0;
  }
  if (type == MLX5DV_OBJ_AH) {
    obj->ah.out->av = &rec->av;
    return 0;
  }
  return EINVAL;
}
mlx5dv_devx_uar* f_alloc_uar(ibv_context*, uint32_t flags) {
  rec->calls.push_back(flags == MLX5DV_UAR_ALLOC_TYPE_NC ? "alloc_uar(NC)" : "alloc_uar(BF)");
  ++rec->uars;
  auto* u = new mlx5dv_devx_uar{};
  u->base_addr = rec->uar_page;
  u->reg_addr = rec->uar_page + 0x800;
  u->page_id = 0x77;
  return u;
}
void f_free_uar(mlx5dv_devx_uar* u) {
  rec->calls.push_back("free_uar");
  --rec->uars;
  delete u;
}
mlx5dv_devx_umem* f_umem_reg(ibv_context*, void* addr, size_t size, uint32_t) {
  rec->calls.push_back("umem_reg");
  rec->umem_ranges.emplace_back(addr, size);
  ++rec->umems;
  auto* u = new mlx5dv_devx_umem{};
  u->umem_id = rec->next_umem++;
  return u;
}
int f_umem_dereg(mlx5dv_devx_umem* u) {
  rec->calls.push_back("umem_dereg");
  --rec->umems;
  delete u;
  return 0;
}
int f_query_eqn(ibv_context*, uint32_t, uint32_t* eqn) {
  *eqn = 9;
  return 0;
}
mlx5dv_devx_obj* f_obj_create(ibv_context*, const void* in, size_t inlen, void* out, size_t outlen) {
  const auto cmd = copy_in(in, inlen);
  const auto opcode = static_cast<uint16_t>(pc::get_bits(cmd, 0, 16));
  rec->calls.push_back(pc::opcode_name(opcode));
  rec->commands.push_back(cmd);
  if (!answer(opcode, out, outlen)) {
    errno = EREMOTEIO;
    return nullptr;
  }
  auto* o = new fake_obj;
  o->opcode = opcode;
  o->number = opcode == pc::op::create_cq    ? rec->next_cqn++
              : opcode == pc::op::create_rmp ? rec->next_rmpn++
                                             : rec->next_qpn++;
  pc::set_bits({static_cast<uint8_t*>(out), outlen}, 0x48, 24, o->number);
  ++rec->objs;
  return reinterpret_cast<mlx5dv_devx_obj*>(o);
}
int f_obj_modify(mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  auto* o = reinterpret_cast<fake_obj*>(obj);
  const auto cmd = copy_in(in, inlen);
  const auto opcode = static_cast<uint16_t>(pc::get_bits(cmd, 0, 16));
  rec->calls.push_back(pc::opcode_name(opcode));
  rec->commands.push_back(cmd);
  if (!answer(opcode, out, outlen)) return EREMOTEIO;
  switch (opcode) {
    case pc::op::rst2init_qp: o->state = 1; break;
    case pc::op::init2rtr_qp: o->state = 2; break;
    case pc::op::rtr2rts_qp: o->state = 3; break;
    case pc::op::to_err_qp: o->state = 6; break;
    case pc::op::to_rst_qp: o->state = 0; break;
    default: break;
  }
  return 0;
}
int f_obj_query(mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  auto* o = reinterpret_cast<fake_obj*>(obj);
  const auto cmd = copy_in(in, inlen);
  const auto opcode = static_cast<uint16_t>(pc::get_bits(cmd, 0, 16));
  rec->commands.push_back(cmd);
  if (!answer(opcode, out, outlen)) return EREMOTEIO;
  if (opcode == pc::op::query_cq) {
    pc::set_bits({static_cast<uint8_t*>(out), outlen}, 0x80, 4, rec->cq_status);
  } else {
    pc::set_bits({static_cast<uint8_t*>(out), outlen}, 0xc0, 4, o->state);
  }
  return 0;
}
int f_general_cmd(ibv_context*, const void* in, size_t inlen, void* out, size_t outlen) {
  const auto cmd = copy_in(in, inlen);
  const auto opcode = static_cast<uint16_t>(pc::get_bits(cmd, 0, 16));
  rec->calls.push_back(pc::opcode_name(opcode));
  rec->commands.push_back(cmd);
  if (!answer(opcode, out, outlen)) return EREMOTEIO;
  std::span<uint8_t> o(static_cast<uint8_t*>(out), outlen);
  if (opcode == pc::op::query_hca_cap && pc::get_bits(cmd, 0x30, 16) == 0x7) {  // atomic caps, current
    pc::set_bits(o, 0x80 + 0x40, 2, rec->endian_mode);
    pc::set_bits(o, 0x80 + 0x90, 16, rec->atomic_ops);
    pc::set_bits(o, 0x80 + 0xb0, 16, rec->atomic_size_qp);
  }
  return 0;
}
int f_query_device(ibv_context*, ibv_device_attr* a) {
  *a = ibv_device_attr{};
  a->vendor_id = 0x02c9;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->phys_port_cnt = 1;
  return 0;
}
// The object a create command made, as destroy calls are recorded ("destroy QP").
const char* object_name(uint16_t create_opcode) {
  switch (create_opcode) {
    case pc::op::create_cq: return "CQ";
    case pc::op::create_rmp: return "RMP";
    case pc::op::create_qp: return "QP";
    case pc::op::alloc_transport_domain: return "TD";
    case pc::op::create_tis: return "TIS";
    case pc::op::create_sq: return "SQ";
    case pc::op::create_rq: return "RQ";
    case pc::op::create_rqt: return "RQT";
    case pc::op::create_tir: return "TIR";
    case pc::op::create_flow_table: return "flow table";
    case pc::op::create_flow_group: return "flow group";
    case pc::op::set_flow_table_entry: return "flow entry";
    case pc::op::alloc_flow_counter: return "flow counter";
  }
  return "object";
}
int f_obj_destroy(mlx5dv_devx_obj* obj) {
  auto* o = reinterpret_cast<fake_obj*>(obj);
  rec->calls.push_back(std::string("destroy ") + object_name(o->opcode));
  --rec->objs;
  delete o;
  return 0;
}

ibverbs_api fake_ibverbs() {
  ibverbs_api a{};
  a.alloc_pd = f_alloc_pd;
  a.dealloc_pd = f_dealloc_pd;
  a.reg_mr = f_reg_mr;
  a.dereg_mr = f_dereg_mr;
  a.close_device = f_close_device;
  a.query_port_compat = f_query_port_compat;
  a.create_ah = f_create_ah;
  a.destroy_ah = f_destroy_ah;
  a.query_device = f_query_device;
  return a;
}

mlx5dv_api fake_mlx5dv() {
  mlx5dv_api a{};
  a.init_obj = f_init_obj;
  a.devx_alloc_uar = f_alloc_uar;
  a.devx_free_uar = f_free_uar;
  a.devx_umem_reg = f_umem_reg;
  a.devx_umem_dereg = f_umem_dereg;
  a.devx_query_eqn = f_query_eqn;
  a.devx_obj_create = f_obj_create;
  a.devx_obj_modify = f_obj_modify;
  a.devx_obj_query = f_obj_query;
  a.devx_obj_destroy = f_obj_destroy;
  a.devx_general_cmd = f_general_cmd;
  return a;
}

// One fake device per test; every object must be gone (counts back to 0) at the end.
class mlx5_devx_fake : public ::testing::Test {
 protected:
  void SetUp() override {
    rec = &r;
    ibv = fake_ibverbs();
    dv = fake_mlx5dv();
    std::memset(&ctx, 0, sizeof ctx);  // not extended: query_port takes the compat path
    dev = make_device_for_test("mlx5_fake", &ibv, &dv, &ctx, true);
  }
  void TearDown() override {
    ops.close_device(dev);
    EXPECT_EQ(r.umems, 0);
    EXPECT_EQ(r.uars, 0);
    EXPECT_EQ(r.objs, 0);
    EXPECT_EQ(r.pds, 0);
    EXPECT_EQ(r.mrs, 0);
    EXPECT_EQ(r.ahs, 0);
    rec = nullptr;
  }

  verbs::provider_object* make_pd() {
    verbs::provider_object* pd = nullptr;
    uint32_t pdn = 0;
    std::string why;
    EXPECT_EQ(ops.alloc_pd(dev, &pd, &pdn, &why), status::ok) << why;
    EXPECT_EQ(pdn, 0x42u);
    return pd;
  }
  verbs::provider_object* make_cq(uint32_t depth = 64) {
    verbs::cq_init ci;
    ci.depth = depth;
    verbs::provider_object* cq = nullptr;
    uint32_t cqn = 0, n = 0;
    std::string why;
    EXPECT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::ok) << why;
    return cq;
  }
  verbs::provider_object* make_qp(verbs::provider_object* pd, verbs::provider_object* scq,
                                  verbs::provider_object* rcq, uint32_t* qpn, verbs::qp_caps* caps) {
    verbs::qp_init in;
    in.sq_wqebbs = 64;
    in.rq_wqes = 32;
    in.max_recv_sge = 4;
    in.max_inline = 64;
    in.user_index = 0x55;
    verbs::qp_create_args a;
    a.init = &in;
    a.send_cq = scq;
    a.recv_cq = rcq;
    verbs::provider_object* qp = nullptr;
    std::string why;
    EXPECT_EQ(ops.create_qp(pd, a, &qp, qpn, caps, &why), status::ok) << why;
    return qp;
  }
  std::vector<uint8_t> last_command(uint16_t opcode) const {
    for (auto it = r.commands.rbegin(); it != r.commands.rend(); ++it) {
      if (pc::get_bits(*it, 0, 16) == opcode) return *it;
    }
    ADD_FAILURE() << "no " << pc::opcode_name(opcode) << " was sent";
    return std::vector<uint8_t>(512, 0);
  }

  recorder r;
  ibverbs_api ibv{};
  mlx5dv_api dv{};
  ibv_context ctx{};
  verbs::provider_object* dev = nullptr;
};

}  // namespace
