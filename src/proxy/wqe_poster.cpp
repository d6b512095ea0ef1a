// The WQE poster: descriptors -> WQEs on direct QP handles. See proxy/wqe_poster.hpp.
#include "gdaki/proxy/wqe_poster.hpp"

#include "gdaki/device/ops.hpp"

namespace gdaki::proxy {

namespace {
using dev::scope_thread;
constexpr auto excl = dev::sharing::exclusive;  // the proxy thread is the QP's only poster

// The most WQEBBs one descriptor becomes: put_signal is one WRITE plus one signal WQE
// (a descriptor moves at most max_descriptor_bytes, one WRITE's worth).
constexpr uint32_t max_wqebbs_per_descriptor = 2;
static_assert(max_descriptor_bytes <= dev::max_message_bytes, "a descriptor's put is one WRITE WQE");
}  // namespace

wqe_poster::wqe_poster(std::vector<dev::qp_handle*> peers, uint32_t max_pending)
    : peers_(std::move(peers)), fifo_(max_pending == 0 ? 1 : max_pending) {}

status wqe_poster::post(const descriptor& d, uint64_t cookie) {
  if (d.peer >= peers_.size() || peers_[d.peer] == nullptr) return status::invalid;
  dev::qp_handle& qp = *peers_[d.peer];
  if (qp.backend != dev::qp_backend::direct) return status::invalid;  // would loop back into a ring
  if (tail_ - head_ == fifo_.size()) return status::again;
  // Flow control before reserving: the data-path calls below wait for ring space after
  // they reserve, and a reservation can not be taken back. We are the only poster, so
  // space seen here stays ours.
  auto room = [&] { return dev::sq_wqebbs(qp) - (qp.sq_reserved - dev::arch::load_acquire(&qp.sq_completed)); };
  if (room() < max_wqebbs_per_descriptor) {
    dev::sq_progress(qp);
    if (room() < max_wqebbs_per_descriptor) return status::again;
  }
  const dev::remote_ptr remote{d.remote_addr, d.remote_key};
  const dev::local_ptr local{d.local_addr, d.local_key};
  uint64_t t = 0;
  status st = status::not_supported;
  // Every WQE is signalled: its CQE is how we learn the descriptor finished, and fence
  // flags were already honoured by the service (it starts a fenced descriptor only when
  // nothing is in flight).
  switch (d.op) {
    case opcode::put:
      st = dev::put<scope_thread, excl>(qp, remote, local, d.length, &t);
      break;
    case opcode::put_inline: {
      uint8_t bytes[max_inline_bytes];
      for (uint32_t k = 0; k < max_inline_bytes; ++k) bytes[k] = static_cast<uint8_t>((k < 8 ? d.operand0 : d.operand1) >> (8 * (k % 8)));
      st = dev::p<scope_thread, excl>(qp, remote, bytes, d.length, &t);
      break;
    }
    case opcode::get:
      st = dev::get<scope_thread, excl>(qp, local, remote, d.length, &t);
      break;
    case opcode::signal_add:
    case opcode::signal_set:
      st = dev::signal<scope_thread, excl>(qp, remote, d.op == opcode::signal_set ? dev::signal_op::set : dev::signal_op::add,
                                           d.operand0, &t);
      break;
    case opcode::put_signal_add:
    case opcode::put_signal_set:
      st = dev::put_signal<scope_thread, excl>(
          qp, remote, local, d.length, {d.operand1, d.signal_key},
          d.op == opcode::put_signal_set ? dev::signal_op::set : dev::signal_op::add, d.operand0, &t);
      break;
    case opcode::atomic_fetch_add:
      st = dev::atomic_fetch_add<scope_thread, excl>(qp, remote, d.operand0, local, &t);
      break;
    case opcode::atomic_compare_swap:
      st = dev::atomic_compare_swap<scope_thread, excl>(qp, remote, d.operand0, d.operand1, local, &t);
      break;
    default:  // fence, quiet: the service's own business
      break;
  }
  if (st != status::ok) return st;
  fifo_[tail_++ % fifo_.size()] = pending{t, cookie, d.peer};
  return status::ok;
}

size_t wqe_poster::poll(completion* out, size_t max) {
  size_t n = 0;
  while (n < max && head_ != tail_) {
    const pending& p = fifo_[head_ % fifo_.size()];
    const status st = dev::test(*peers_[p.peer], p.ticket);
    if (st == status::again) break;
    out[n++] = completion{p.cookie, st == status::ok ? status::ok : status::io_error};
    ++head_;
  }
  return n;
}

}  // namespace gdaki::proxy
