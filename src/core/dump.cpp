// QP state dump: the report a user reads when an operation never completes.
#include "gdaki/device/dump.hpp"

#include <cinttypes>
#include <cstdio>

#include "gdaki/device/arch.hpp"
#include "gdaki/prm/decode.hpp"

namespace gdaki::dev {

std::string dump_qp_state(const qp_handle& qp) {
  const uint64_t reserved = arch::load_acquire(&qp.sq_reserved);
  const uint64_t ready = arch::load_acquire(&qp.sq_ready);
  const uint64_t rung = arch::load_acquire(&qp.sq_rung);
  const uint64_t completed = arch::load_acquire(&qp.sq_completed);
  const uint64_t err_state = arch::load_acquire(&qp.err_state);
  const uint64_t err = err_index_of(err_state);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "QP 0x%x: sq %u WQEBBs; reserved %" PRIu64 ", ready %" PRIu64 ", rung %" PRIu64 ", completed %" PRIu64
                ", outstanding %" PRIu64 " WQEBBs\n",
                qp.qpn, sq_wqebbs(qp), reserved, ready, rung, completed, rung - completed);
  std::string s = buf;
  if (err != no_error_index) {
    std::snprintf(buf, sizeof buf, "  first error: WQE at %" PRIu64 " (wqe_index 0x%04x), syndrome %s (0x%02x)\n", err,
                  static_cast<unsigned>(err & 0xffff),
                  prm::to_string(err_syndrome_of(err_state)), static_cast<unsigned>(err_syndrome_of(err_state)));
    s += buf;
  } else {
    s += "  no error latched\n";
  }
  if (completed < rung && qp.sq_buf != nullptr) {
    std::snprintf(buf, sizeof buf, "  stuck WQE (oldest unfinished, at %" PRIu64 "):\n", completed);
    s += buf;
    const std::string w = prm::decode_wqe(qp.sq_buf, sq_wqebbs(qp), static_cast<uint32_t>(completed & (sq_wqebbs(qp) - 1)));
    for (size_t pos = 0; pos < w.size();) {
      const size_t nl = w.find('\n', pos);
      s += "    " + w.substr(pos, nl - pos) + "\n";
      pos = nl == std::string::npos ? w.size() : nl + 1;
    }
  }
  if (qp.send_cq != nullptr && qp.send_cq->cqes != nullptr) {
    const uint64_t ci = arch::load_acquire(&qp.send_cq->ci);
    std::snprintf(buf, sizeof buf, "  send CQ 0x%x: %u entries, consumed %" PRIu64 "\n", qp.send_cq->cqn,
                  cqe_count(*qp.send_cq), ci);
    s += buf;
    if (ci > 0) {
      const auto* last = qp.send_cq->cqes + ((ci - 1) & (cqe_count(*qp.send_cq) - 1));
      s += "  last CQE: " + prm::decode_cqe(last);
    }
  }
  return s;
}

}  // namespace gdaki::dev
