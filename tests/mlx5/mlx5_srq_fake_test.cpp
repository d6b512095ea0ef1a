// The mlx5 provider's shared receive queues (DEVX RMPs) driven through its ops table against
// the fake libibverbs / libmlx5 tables (mlx5_devx_fakes.hpp): which commands go out in which
// order with which fields, the QP bound to the SRQ, failures, the refusal to destroy an SRQ
// a QP still uses, and the exported handle driven by the unchanged data path
// (dev::srq_post / dev::srq_free on the CPU) with its bytes read back from the memory the
// provider placed. Nothing here has run on a ConnectX (docs/mlx5.md).
#include "mlx5_devx_fakes.hpp"

#include <cstring>

#include "gdaki/device/cq.hpp"
#include "gdaki/device/sq.hpp"

namespace {

uint16_t be16_at(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t be32_at(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint64_t be64_at(const uint8_t* p) { return (uint64_t{be32_at(p)} << 32) | be32_at(p + 4); }

// What the NIC writes for a receive that took SRQ WQE `wqe` of QP `qpn`, at position pos.
void nic_writes_recv_cqe(const gdaki::dev::cq_handle& cq, uint32_t pos, uint32_t qpn, uint16_t wqe) {
  gdaki::prm::cqe64& c = cq.cqes[pos & ((1u << cq.log_cqe_cnt) - 1)];
  std::memset(&c, 0, sizeof c);
  c.sop_drop_qpn = gdaki::prm::to_be32(qpn);
  c.wqe_counter = gdaki::prm::to_be16(wqe);
  c.byte_cnt = gdaki::prm::to_be32(8);
  const auto op = static_cast<uint8_t>(gdaki::prm::cqe_opcode::resp_send);
  c.op_own = static_cast<uint8_t>((op << 4) | ((pos >> cq.log_cqe_cnt) & 1));
}

class mlx5_srq_fake : public mlx5_devx_fake {
 protected:
  verbs::provider_object* make_srq(verbs::provider_object* pd, uint32_t max_wr, uint32_t max_sge,
                                   uint32_t* srqn = nullptr, verbs::srq_caps* caps = nullptr) {
    verbs::srq_init in;
    in.max_wr = max_wr;
    in.max_sge = max_sge;
    verbs::provider_object* s = nullptr;
    uint32_t n = 0;
    verbs::srq_caps c;
    std::string why;
    EXPECT_EQ(ops.create_srq(pd, in, &s, srqn != nullptr ? srqn : &n, caps != nullptr ? caps : &c, &why),
              status::ok)
        << why;
    return s;
  }
  verbs::provider_object* make_qp_on(verbs::provider_object* pd, verbs::provider_object* scq,
                                     verbs::provider_object* rcq, verbs::provider_object* srq,
                                     verbs::qp_caps* caps, status want = status::ok, std::string* why_out = nullptr) {
    verbs::qp_init in;
    in.sq_wqebbs = 64;
    in.rq_wqes = 32;  // ignored on an SRQ, and so is an RQ placement apart from the SQ's
    in.max_recv_sge = 4;
    static uint8_t elsewhere[64];
    in.rq_ring.buffer = elsewhere;
    in.rq_ring.size = sizeof elsewhere;
    verbs::qp_create_args a;
    a.init = &in;
    a.send_cq = scq;
    a.recv_cq = rcq;
    a.srq = srq;
    verbs::provider_object* qp = nullptr;
    uint32_t qpn = 0;
    std::string why;
    EXPECT_EQ(ops.create_qp(pd, a, &qp, &qpn, caps, &why), want) << why;
    if (why_out != nullptr) *why_out = why;
    return qp;
  }
};

}  // namespace

TEST_F(mlx5_srq_fake, create_srq_links_the_free_list_then_registers_ring_and_record_then_sends_create_rmp) {
  auto* pd = make_pd();
  r.calls.clear();
  uint32_t srqn = 0;
  verbs::srq_caps caps;
  auto* srq = make_srq(pd, 100, 3, &srqn, &caps);  // 101 WQEs -> 128; 16 + 3 * 16 B -> 64 B
  ASSERT_NE(srq, nullptr);
  EXPECT_EQ(srqn, 0x300u);  // the RMP number from create_rmp_out
  const std::vector<std::string> order = {"umem_reg", "umem_reg", "CREATE_RMP"};
  EXPECT_EQ(r.calls, order);  // no UAR: posting to an SRQ only writes its doorbell record
  EXPECT_EQ(caps.wqes, 128u);
  EXPECT_EQ(caps.stride, 64u);
  EXPECT_EQ(caps.max_wr, 127u);
  EXPECT_EQ(caps.max_sge, 3u);

  const auto in = last_command(pc::op::create_rmp);
  ASSERT_EQ(in.size(), pc::size::create_rmp_in);
  const uint32_t w = 0x280;                            // rmpc at 0x100, its wq at rmpc 0x180
  EXPECT_EQ(pc::get_bits(in, 0x100 + 0x08, 4), 1u);    // rmpc.state: RDY
  EXPECT_EQ(pc::get_bits(in, w + 0x00, 4), 0u);        // wq_type: linked list (the NIC follows the links)
  EXPECT_EQ(pc::get_bits(in, w + 0x48, 24), 0x42u);    // pd
  EXPECT_EQ(pc::get_bits(in, w + 0x10c, 4), 6u);       // log_wq_stride: 64 B
  EXPECT_EQ(pc::get_bits(in, w + 0x113, 5), 0u);       // log_wq_pg_sz: 4 KiB umem pages
  EXPECT_EQ(pc::get_bits(in, w + 0x11b, 5), 7u);       // log_wq_sz: 128 WQEs
  EXPECT_EQ(pc::get_bits(in, w + 0x120, 1), 1u);       // dbr_umem_valid
  EXPECT_EQ(pc::get_bits(in, w + 0x121, 1), 1u);       // wq_umem_valid
  EXPECT_EQ(pc::get_bits(in, w + 0x140, 32), 0x101u);  // dbr_umem_id: the second umem
  EXPECT_EQ(pc::get_bits(in, w + 0x160, 32), 0x100u);  // wq_umem_id: the ring, first
  EXPECT_EQ(pc::get_bits(in, w + 0x180, 64), 0u);      // wq_umem_offset
  EXPECT_EQ(pc::get_bits(in, w + 0x80, 64), 0u);       // dbr_addr: offset in the DBR umem

  // The ring umem covers 128 x 64 bytes, every WQE linked to the next in ring order (the
  // last back to 0) before CREATE_RMP; the doorbell record is zero.
  ASSERT_EQ(r.umem_ranges.size(), 2u);
  EXPECT_EQ(r.umem_ranges[0].second, 128u * 64);
  const auto* ring = static_cast<const uint8_t*>(r.umem_ranges[0].first);
  for (uint32_t i = 0; i < 128; ++i) ASSERT_EQ(be16_at(ring + i * 64 + 2), (i + 1) % 128) << "WQE " << i;
  const auto* dbr = static_cast<const uint8_t*>(r.umem_ranges[1].first);
  EXPECT_EQ(be32_at(dbr), 0u);

  EXPECT_EQ(ops.destroy_srq(srq), status::ok);
  const std::vector<std::string> tail = {"destroy RMP", "umem_dereg", "umem_dereg"};
  ASSERT_GE(r.calls.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(r.calls.end() - 3, r.calls.end()), tail);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_srq_fake, exported_handle_posts_and_frees_through_the_unchanged_data_path) {
  auto* pd = make_pd();
  auto* srq = make_srq(pd, 3, 2);  // 4 WQEs of 64 B (next segment + 3 data segments)
  gdaki::dev::srq_handle h{};
  std::string why;
  ASSERT_EQ(ops.export_srq(srq, &h, &why), status::ok) << why;
  ASSERT_EQ(r.umem_ranges.size(), 2u);
  auto* ring = static_cast<uint8_t*>(r.umem_ranges[0].first);
  auto* dbr = static_cast<uint8_t*>(r.umem_ranges[1].first);
  EXPECT_EQ(h.buf, ring);
  EXPECT_EQ(static_cast<void*>(h.dbrec), static_cast<void*>(dbr));
  EXPECT_EQ(h.log_wqes, 2u);
  EXPECT_EQ(h.log_stride, 6u);
  EXPECT_EQ(h.srqn, 0x300u);
  EXPECT_EQ(h.max_sge, 3u);
  // The free-list state verbs::srq gives a fresh handle (src/verbs/srq.cpp).
  h.head = 0;
  h.tail = gdaki::dev::srq_wqes(h) - 1;

  const gdaki::dev::sge two[2] = {{0x1122334455667788ull, 0x100, 0xaabbccdd}, {0x10000, 8, 0x0101}};
  uint32_t idx = 99;
  ASSERT_EQ(gdaki::dev::srq_post(h, two, 2, &idx), status::ok);
  EXPECT_EQ(idx, 0u);
  const uint8_t* w0 = ring;
  EXPECT_EQ(be16_at(w0 + 2), 1u);  // the link stays: the NIC follows it to WQE 1
  EXPECT_EQ(be32_at(w0 + 16), 0x100u);
  EXPECT_EQ(be32_at(w0 + 20), 0xaabbccddu);
  EXPECT_EQ(be64_at(w0 + 24), 0x1122334455667788ull);
  EXPECT_EQ(be32_at(w0 + 32), 8u);
  EXPECT_EQ(be32_at(w0 + 36), 0x0101u);
  EXPECT_EQ(be64_at(w0 + 40), 0x10000ull);
  EXPECT_EQ(be32_at(w0 + 48), 0u);      // terminator: zero length
  EXPECT_EQ(be32_at(w0 + 52), 0x100u);  // and MLX5_INVALID_LKEY
  EXPECT_EQ(be32_at(dbr), 1u);          // doorbell record receive word: WQEs posted
  EXPECT_EQ(be32_at(dbr + 4), 0u);

  // Fill the ring: WQEs 1 and 2 follow the links; WQE 3 (the tail) stays on the list.
  ASSERT_EQ(gdaki::dev::srq_post(h, two, 1, &idx), status::ok);
  EXPECT_EQ(idx, 1u);
  ASSERT_EQ(gdaki::dev::srq_post(h, two, 1, &idx), status::ok);
  EXPECT_EQ(idx, 2u);
  EXPECT_EQ(gdaki::dev::srq_post(h, two, 1, &idx), status::again);
  EXPECT_EQ(be32_at(dbr), 3u);

  // A completion of WQE 1 (out of order) links it after the tail, and the next post takes
  // the tail WQE 3, then WQE 1.
  ASSERT_EQ(gdaki::dev::srq_free(h, 1), status::ok);
  EXPECT_EQ(be16_at(ring + 3 * 64 + 2), 1u);
  ASSERT_EQ(gdaki::dev::srq_post(h, two, 1, &idx), status::ok);
  EXPECT_EQ(idx, 3u);
  EXPECT_EQ(be32_at(dbr), 4u);
  EXPECT_EQ(gdaki::dev::srq_post(h, two, 1, &idx), status::again);  // WQE 1 is the kept one
  ASSERT_EQ(gdaki::dev::srq_free(h, 0), status::ok);
  EXPECT_EQ(be16_at(ring + 1 * 64 + 2), 0u);
  ASSERT_EQ(gdaki::dev::srq_post(h, two, 1, &idx), status::ok);
  EXPECT_EQ(idx, 1u);
  EXPECT_EQ(be32_at(dbr), 5u);

  EXPECT_EQ(ops.destroy_srq(srq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_srq_fake, qp_on_an_srq_names_the_rmp_with_rq_type_srq_and_has_no_rq) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  auto* srq = make_srq(pd, 15, 1);
  r.calls.clear();
  r.umem_ranges.clear();
  verbs::qp_caps caps;
  auto* qp = make_qp_on(pd, scq, rcq, srq, &caps);
  ASSERT_NE(qp, nullptr);
  const std::vector<std::string> order = {"umem_reg", "umem_reg", "alloc_uar(NC)", "CREATE_QP"};
  EXPECT_EQ(r.calls, order);
  EXPECT_EQ(caps.rq_wqes, 0u);
  EXPECT_EQ(caps.rq_stride, 0u);
  const auto in = last_command(pc::op::create_qp);
  const uint32_t q = 0xc0;
  EXPECT_EQ(pc::get_bits(in, q + 0x565, 3), 1u);        // rq_type: SRQ
  EXPECT_EQ(pc::get_bits(in, q + 0x568, 24), 0x300u);   // srqn_rmpn_xrqn: the RMP
  EXPECT_EQ(pc::get_bits(in, q + 0x49, 4), 0u);         // log_rq_size: no RQ
  EXPECT_EQ(pc::get_bits(in, q + 0x4d, 3), 0u);         // log_rq_stride
  EXPECT_EQ(pc::get_bits(in, q + 0x51, 4), 6u);         // log_sq_size: 64
  EXPECT_EQ(pc::get_bits(in, q + 0x4e8, 24), 0x41u);    // cqn_rcv: the QP's own receive CQ
  // The work queue is the SQ alone: 64 x 64 B, one page.
  ASSERT_EQ(r.umem_ranges.size(), 2u);
  EXPECT_EQ(r.umem_ranges[0].second, 4096u);
  gdaki::dev::qp_handle h{};
  std::string why;
  ASSERT_EQ(ops.export_qp(qp, verbs::qp_export_options{}, &h, &why), status::ok) << why;
  EXPECT_EQ(static_cast<void*>(h.sq_buf), r.umem_ranges[0].first);
  EXPECT_EQ(h.rq_buf, nullptr);
  EXPECT_EQ(h.log_rq_wqes, 0u);

  // A QP whose PD is not the SRQ's is refused before anything is created.
  auto* pd2 = make_pd();
  r.calls.clear();
  verbs::qp_caps caps2;
  EXPECT_EQ(make_qp_on(pd2, scq, rcq, srq, &caps2, status::invalid, &why), nullptr);
  EXPECT_NE(why.find("another PD"), std::string::npos) << why;
  EXPECT_TRUE(r.calls.empty());

  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_srq(srq), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd2), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_srq_fake, destroy_srq_is_refused_while_a_qp_uses_it_and_goes_through_after) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  auto* srq = make_srq(pd, 15, 1);
  verbs::qp_caps caps;
  auto* qp1 = make_qp_on(pd, scq, rcq, srq, &caps);
  auto* qp2 = make_qp_on(pd, scq, rcq, srq, &caps);
  r.calls.clear();
  EXPECT_EQ(ops.destroy_srq(srq), status::busy);
  EXPECT_TRUE(r.calls.empty());  // nothing destroyed, nothing deregistered
  EXPECT_EQ(ops.destroy_qp(qp1), status::ok);
  EXPECT_EQ(ops.destroy_srq(srq), status::busy);  // qp2 still receives from it
  EXPECT_EQ(ops.destroy_qp(qp2), status::ok);
  r.calls.clear();
  EXPECT_EQ(ops.destroy_srq(srq), status::ok);
  const std::vector<std::string> gone = {"destroy RMP", "umem_dereg", "umem_dereg"};
  EXPECT_EQ(r.calls, gone);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_srq_fake, create_srq_failure_names_the_srq_the_command_status_and_syndrome_and_releases_everything) {
  auto* pd = make_pd();
  r.fail[pc::op::create_rmp] = {0x03, 0x0badf00d};
  verbs::srq_init in;
  verbs::provider_object* s = nullptr;
  uint32_t srqn = 0;
  verbs::srq_caps caps;
  std::string why;
  EXPECT_EQ(ops.create_srq(pd, in, &s, &srqn, &caps, &why), status::io_error);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(why.find("shared receive queue (an RMP on mlx5_fake)"), std::string::npos) << why;
  EXPECT_NE(why.find("CREATE_RMP failed: status BAD_PARAM (0x3), syndrome 0x0badf00d"), std::string::npos) << why;
  EXPECT_NE(why.find("mlx5dv_devx_obj_create"), std::string::npos) << why;
  EXPECT_EQ(r.umems, 0);  // both umems deregistered (TearDown checks the rest)
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_srq_fake, create_srq_needs_devx_and_a_ring_the_cpu_can_link) {
  auto* nodevx = make_device_for_test("mlx5_nodevx", &ibv, &dv, &ctx, false);
  verbs::provider_object* pd = nullptr;
  uint32_t pdn = 0;
  std::string why;
  ASSERT_EQ(ops.alloc_pd(nodevx, &pd, &pdn, &why), status::ok) << why;
  r.calls.clear();
  verbs::srq_init in;
  verbs::provider_object* s = nullptr;
  uint32_t srqn = 0;
  verbs::srq_caps caps;
  EXPECT_EQ(ops.create_srq(pd, in, &s, &srqn, &caps, &why), status::not_supported);
  EXPECT_NE(why.find("needs DEVX"), std::string::npos) << why;
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
  ops.close_device(nodevx);

  pd = make_pd();
  r.calls.clear();
  in.ring.kind = verbs::memory_kind::device;
  EXPECT_EQ(ops.create_srq(pd, in, &s, &srqn, &caps, &why), status::not_supported);
  EXPECT_NE(why.find("host or host_pinned"), std::string::npos) << why;
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

// RESET of a QP on an SRQ returns the SRQ WQEs of its unpolled receive CQEs to the free
// list the CPU tracks (set_srq_free_list), as rdma-core's cq clean does; another QP's
// receive stays in the CQ with its WQE. With no CPU free list (a kernel drives the SRQ)
// nothing is freed. (Before: each such CQE cost the SRQ a WQE until it was recreated.)
TEST_F(mlx5_srq_fake, reset_of_a_qp_on_an_srq_returns_the_wqes_of_its_discarded_receives) {
  for (const bool cpu_list : {true, false}) {
    SCOPED_TRACE(cpu_list ? "CPU free list" : "no CPU free list");
    auto* pd = make_pd();
    auto* srq = make_srq(pd, 3, 1);  // 4 WQEs, 3 postable
    gdaki::dev::srq_handle h{};
    std::string why;
    ASSERT_EQ(ops.export_srq(srq, &h, &why), status::ok) << why;
    h.head = 0;
    h.tail = gdaki::dev::srq_wqes(h) - 1;
    ASSERT_EQ(ops.set_srq_free_list(srq, cpu_list ? &h : nullptr), status::ok);
    auto* scq = make_cq(8);
    auto* rcq = make_cq(8);
    verbs::qp_caps caps;
    auto* qp = make_qp_on(pd, scq, rcq, srq, &caps);
    gdaki::dev::qp_handle qh{};
    ASSERT_EQ(ops.export_qp(qp, verbs::qp_export_options{}, &qh, &why), status::ok) << why;
    const gdaki::dev::sge one{0x1000, 8, 0x0101};
    for (uint32_t k = 0; k < 3; ++k) ASSERT_EQ(gdaki::dev::srq_post(h, &one, 1), status::ok);
    ASSERT_EQ(gdaki::dev::srq_post(h, &one, 1), status::again);
    gdaki::dev::cq_handle rc{};
    ASSERT_EQ(ops.export_cq(rcq, &rc, &why), status::ok) << why;
    nic_writes_recv_cqe(rc, 0, qh.qpn, 2);
    nic_writes_recv_cqe(rc, 1, 0x4004, 1);  // another QP's, on the same SRQ and CQ
    nic_writes_recv_cqe(rc, 2, qh.qpn, 0);

    verbs::qp_attr a;
    a.state = verbs::qp_state::reset;
    ASSERT_EQ(ops.modify_qp(qp, a, verbs::qp_attr_mask::state, &why), status::ok) << why;
    EXPECT_EQ(h.freed, cpu_list ? 2u : 0u);
    for (uint32_t k = 0; k < (cpu_list ? 2u : 0u); ++k) EXPECT_EQ(gdaki::dev::srq_post(h, &one, 1), status::ok) << k;
    EXPECT_EQ(gdaki::dev::srq_post(h, &one, 1), status::again);
    gdaki::dev::cq_handle r2{};
    ASSERT_EQ(ops.export_cq(rcq, &r2, &why), status::ok) << why;
    EXPECT_EQ(r2.ci, 2u);
    gdaki::dev::completion c{};
    ASSERT_EQ(gdaki::dev::cq_poll_one(r2, &c), status::ok);
    EXPECT_EQ(c.qpn, 0x4004u);
    EXPECT_EQ(c.wqe_counter, 1u);

    EXPECT_EQ(ops.destroy_qp(qp), status::ok);
    EXPECT_EQ(ops.destroy_cq(scq), status::ok);
    EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
    EXPECT_EQ(ops.destroy_srq(srq), status::ok);
    EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
  }
}
