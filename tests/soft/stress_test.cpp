// Stress: at least 1,000,000 mixed operations (inline and pointer WRITE, WRITE_IMM, SEND,
// READ, FA, CS) from several host threads over several QPs, two threads sharing one QP.
// Data is checked by checksums; every signalled WQE must produce exactly one CQE (no loss,
// no duplicate) and no unsignalled WQE may produce one. GDAKI_SOFT_STRESS_OPS scales the
// run (the default is 1,000,000; sanitizer runs may use fewer).
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "soft_fixture.hpp"

using namespace soft_test;

namespace {

constexpr uint32_t n_pairs = 4;
constexpr uint32_t n_posters = 5;  // poster 4 shares pair 0 with poster 0
constexpr uint32_t slots = 64;     // per-thread WRITE / READ slots of 64 bytes
constexpr uint32_t ring = 256;

uint64_t total_ops() {
  const char* e = std::getenv("GDAKI_SOFT_STRESS_OPS");
  return e ? std::strtoull(e, nullptr, 10) : 1'000'000;
}

uint8_t pattern(uint32_t tid, uint64_t seq, uint32_t i) { return static_cast<uint8_t>(tid * 31 + seq * 7 + i); }

struct qp_book {
  std::vector<std::atomic<uint8_t>> signaled, seen;  // per WQEBB index (every WQE is 1 WQEBB)
  explicit qp_book(size_t n) : signaled(n), seen(n) {}
};

TEST(soft_stress, a_million_mixed_operations_complete_exactly_once_with_correct_data) {
  const uint64_t ops = total_ops();
  const uint64_t per_thread = ops / n_posters + 1;
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pd(dev);
  verbs::qp_attr at = fast_attr();
  at.rnr_retry = 7;  // receivers may lag: wait, never fail
  endpoint a[n_pairs], b[n_pairs];
  endpoint_options o;
  o.sq_wqebbs = ring;
  o.rq_wqes = slots;
  o.cq_depth = ring;
  for (uint32_t i = 0; i < n_pairs; ++i) {
    a[i].create(dev, pd, o);
    b[i].create(dev, pd, o);
    verbs::connect_rc(a[i].qp, b[i].qp.qpn(), verbs::access::all, at);
    verbs::connect_rc(b[i].qp, a[i].qp.qpn(), verbs::access::all, at);
    a[i].export_handles(true);
    b[i].export_handles(true);
  }
  // Remote memory (at b): per-thread WRITE slots, a constant READ source, one shared FA
  // word and per-thread CS words. Local memory (at a): per-thread sources and READ slots.
  std::vector<uint8_t> wdst(n_posters * slots * 64), rsrc(slots * 64), local(n_posters * slots * 64 * 2);
  for (size_t i = 0; i < rsrc.size(); ++i) rsrc[i] = static_cast<uint8_t>(i * 13 + 1);
  alignas(8) static uint64_t words[1 + n_posters];
  alignas(8) static uint64_t results[n_posters][2];
  for (auto& w : words) w = 0;
  std::vector<uint8_t> rbuf(n_pairs * slots * 64);
  verbs::mr m_wdst(pd, wdst.data(), wdst.size(), verbs::access::all);
  verbs::mr m_rsrc(pd, rsrc.data(), rsrc.size(), verbs::access::all);
  verbs::mr m_local(pd, local.data(), local.size(), verbs::access::all);
  verbs::mr m_words(pd, words, sizeof words, verbs::access::all);
  verbs::mr m_res(pd, results, sizeof results, verbs::access::all);
  verbs::mr m_rbuf(pd, rbuf.data(), rbuf.size(), verbs::access::all);

  std::vector<std::unique_ptr<qp_book>> books;
  for (uint32_t i = 0; i < n_pairs; ++i) books.push_back(std::make_unique<qp_book>(per_thread * 2 + 16));

  std::atomic<uint64_t> expect_recv{0}, expect_recv_sum{0}, expect_fa{0};
  std::atomic<uint32_t> posters_done{0};
  std::atomic<uint64_t> bad_cqes{0};
  std::vector<uint64_t> expect_slot(n_posters * slots, 0);  // checksum of each WRITE slot's last write
  std::vector<uint64_t> cs_count(n_posters, 0);

  auto poll_send = [&](uint32_t pi) {
    dev::completion c;
    uint32_t n = 0;
    while (dev::sq_poll(*a[pi].h, &c) == gdaki::status::ok) {
      if (!c.ok()) bad_cqes.fetch_add(1);
      const uint64_t idx = dev::widen16(dev::arch::load_acquire(&a[pi].h->sq_rung), c.wqe_counter);
      if (idx < books[pi]->seen.size()) books[pi]->seen[idx].fetch_add(1);
      ++n;
    }
    return n;
  };

  auto poster = [&](uint32_t tid) {
    const uint32_t pi = tid % n_pairs;
    dev::qp_handle& h = *a[pi].h;
    uint8_t* src = local.data() + tid * slots * 64 * 2;
    uint8_t* rdst = src + slots * 64;
    uint64_t recv_n = 0, recv_sum = 0, fa_sum = 0;
    for (uint64_t seq = 0; seq < per_thread; ++seq) {
      const uint64_t start = dev::sq_reserve(h, 1);
      for (uint32_t i = 0; start + 1 > dev::arch::load_acquire(&h.sq_completed) + ring; ++i) {
        if (poll_send(pi) == 0) dev::arch::spin_pause(i);
      }
      const bool sig = seq % 16 == 15;
      const uint8_t fl = sig ? prm::ctrl_flags::cq_update : 0;
      if (sig) books[pi]->signaled[start].store(1);
      const uint32_t slot = static_cast<uint32_t>(seq % slots);
      uint8_t* s = src + slot * 64;
      const uint64_t rslot = addr(wdst.data() + (tid * slots + slot) * 64);
      switch (seq % 8) {
        case 0:
        case 1:
        case 2: {  // inline WRITE, 16 bytes
          uint8_t buf[16];
          uint64_t sum = 0;
          for (uint32_t i = 0; i < 16; ++i) sum += (buf[i] = pattern(tid, seq, i));
          dev::prepare_write_inline(h, start, rslot, m_wdst.rkey(), buf, 16, fl);
          expect_slot[tid * slots + slot] = sum;  // bytes 16..63 of a slot are never written
          break;
        }
        case 3: {  // pointer WRITE, 16 bytes from the thread's source slot
          uint64_t sum = 0;
          for (uint32_t i = 0; i < 16; ++i) sum += (s[i] = pattern(tid, seq, i));
          const dev::sge g = sg(s, 16, m_local.lkey());
          dev::prepare_write(h, start, rslot, m_wdst.rkey(), &g, 1, fl);
          expect_slot[tid * slots + slot] = sum;
          break;
        }
        case 4: {  // READ 64 bytes of the constant source into the thread's READ slot
          const dev::sge g = sg(rdst + slot * 64, 64, m_local.lkey());
          dev::prepare_read(h, start, addr(rsrc.data() + slot * 64), m_rsrc.rkey(), &g, 1, fl);
          break;
        }
        case 5:  // FA on the shared word (every poster, every QP)
          dev::prepare_atomic_fa(h, start, addr(&words[0]), m_words.rkey(), seq + 1,
                                 sg(&results[tid][0], 8, m_res.lkey()), fl);
          fa_sum += seq + 1;
          break;
        case 6:  // CS on the thread's own word: always matches, so it counts
          dev::prepare_atomic_cs(h, start, addr(&words[1 + tid]), m_words.rkey(), cs_count[tid], cs_count[tid] + 1,
                                 sg(&results[tid][1], 8, m_res.lkey()), fl);
          ++cs_count[tid];
          break;
        default: {  // SEND 32 bytes, or WRITE_IMM (zero bytes) every other time
          if ((seq / 8) % 2 == 0) {
            uint64_t sum = 0;
            for (uint32_t i = 0; i < 32; ++i) sum += (s[32 + i] = pattern(tid, seq, i + 32));
            const dev::sge g = sg(s + 32, 32, m_local.lkey());
            dev::prepare_send(h, start, &g, 1, fl);
            recv_sum += sum;
          } else {
            dev::prepare_write_imm(h, start, rslot, m_wdst.rkey(), nullptr, 0, prm::to_be32(static_cast<uint32_t>(seq)).raw,
                                   fl);
            recv_sum += static_cast<uint32_t>(seq);
          }
          ++recv_n;
          break;
        }
      }
      // Pointer sources are reused after 64 ops; the ring holds 256, so wait for this
      // slot's previous user (64 WQEs back) before overwriting: every 16th is signaled.
      dev::sq_commit(h, start, 1);
      if (seq % 8 == 0) poll_send(pi);
      for (uint32_t i = 0; dev::arch::load_acquire(&h.sq_completed) + 32 < start; ++i) {
        if (poll_send(pi) == 0) dev::arch::spin_pause(i);
      }
    }
    // A signaled NOP retires everything this thread posted.
    const uint64_t start = dev::sq_reserve(h, 1);
    for (uint32_t i = 0; start + 1 > dev::arch::load_acquire(&h.sq_completed) + ring; ++i) {
      if (poll_send(pi) == 0) dev::arch::spin_pause(i);
    }
    books[pi]->signaled[start].store(1);
    dev::prepare_nop(h, start, prm::ctrl_flags::cq_update);
    dev::sq_commit(h, start, 1);
    for (uint32_t i = 0; dev::arch::load_acquire(&h.sq_completed) < start + 1; ++i) {
      if (poll_send(pi) == 0) dev::arch::spin_pause(i);
    }
    expect_recv.fetch_add(recv_n);
    expect_recv_sum.fetch_add(recv_sum);
    expect_fa.fetch_add(fa_sum);
    posters_done.fetch_add(1);
  };

  uint64_t got_recv = 0, got_recv_sum = 0;
  auto receiver = [&] {
    for (uint32_t pi = 0; pi < n_pairs; ++pi) {
      for (uint32_t k = 0; k < slots; ++k) {
        const dev::sge r = sg(rbuf.data() + (pi * slots + k) * 64, 64, m_rbuf.lkey());
        ASSERT_EQ(dev::rq_post(*b[pi].h, &r, 1), gdaki::status::ok);
      }
    }
    for (uint32_t it = 0;; ++it) {
      bool any = false;
      for (uint32_t pi = 0; pi < n_pairs; ++pi) {
        dev::completion c;
        while (dev::rq_poll(*b[pi].h, &c) == gdaki::status::ok) {
          any = true;
          if (!c.ok()) bad_cqes.fetch_add(1);
          const uint32_t k = c.wqe_counter % slots;
          uint8_t* buf = rbuf.data() + (pi * slots + k) * 64;
          if (c.opcode == prm::cqe_opcode::resp_send) {
            for (uint32_t i = 0; i < c.byte_cnt; ++i) got_recv_sum += buf[i];
          } else {
            got_recv_sum += prm::bswap32(c.imm_raw);
          }
          ++got_recv;
          const dev::sge r = sg(buf, 64, m_rbuf.lkey());
          EXPECT_EQ(dev::rq_post(*b[pi].h, &r, 1), gdaki::status::ok);
        }
      }
      if (!any) {
        if (posters_done.load() == n_posters && got_recv == expect_recv.load()) return;
        dev::arch::spin_pause(it);
      }
    }
  };

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < n_posters; ++t) threads.emplace_back(poster, t);
  std::thread rx(receiver);
  for (auto& t : threads) t.join();
  rx.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t posted = per_thread * n_posters;
  std::printf("soft stress: %llu operations (+%u NOPs) over %u QPs from %u threads in %.2f s (%.2f Mops/s)\n",
              static_cast<unsigned long long>(posted), n_posters, n_pairs, n_posters, secs, posted / secs / 1e6);
  RecordProperty("ops", std::to_string(posted));
  RecordProperty("seconds", std::to_string(secs));

  EXPECT_GE(posted, ops);
  EXPECT_EQ(bad_cqes.load(), 0u);
  // Exactly one CQE per signaled WQE, none for the others.
  uint64_t signaled = 0, missing = 0, extra = 0;
  for (auto& bk : books) {
    for (size_t i = 0; i < bk->seen.size(); ++i) {
      const uint8_t s = bk->signaled[i].load(), n = bk->seen[i].load();
      signaled += s;
      if (n < s) ++missing;
      if (n > s) ++extra;
    }
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(extra, 0u);
  EXPECT_GT(signaled, posted / 17);
  // Data.
  EXPECT_EQ(got_recv, expect_recv.load());
  EXPECT_EQ(got_recv_sum, expect_recv_sum.load());
  EXPECT_EQ(words[0], expect_fa.load());
  for (uint32_t t = 0; t < n_posters; ++t) EXPECT_EQ(words[1 + t], cs_count[t]) << "thread " << t;
  for (uint32_t t = 0; t < n_posters; ++t) {
    for (uint32_t k = 0; k < slots; ++k) {
      uint64_t sum = 0;
      for (uint32_t i = 0; i < 64; ++i) sum += wdst[(t * slots + k) * 64 + i];
      EXPECT_EQ(sum, expect_slot[t * slots + k]) << "write slot " << t << "/" << k;
      if (k % 8 == 4) {  // the slots READs land in
        EXPECT_EQ(std::memcmp(local.data() + t * slots * 64 * 2 + slots * 64 + k * 64, rsrc.data() + k * 64, 64), 0)
            << "read slot " << t << "/" << k;
      }
    }
  }
}

}  // namespace
