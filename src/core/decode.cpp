// WQE / CQE decoder: one source of truth for readable dumps (tests, error hooks, CLI).
#include "gdaki/prm/decode.hpp"

#include <cstdio>
#include <cstring>
#include <vector>

#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/op_traits.hpp"

namespace gdaki::prm {

const char* to_string(send_opcode op) { return traits_of(op).name; }

const char* to_string(cqe_opcode op) {
  switch (op) {
    case cqe_opcode::req: return "REQ";
    case cqe_opcode::resp_wr_imm: return "RESP_WR_IMM";
    case cqe_opcode::resp_send: return "RESP_SEND";
    case cqe_opcode::resp_send_imm: return "RESP_SEND_IMM";
    case cqe_opcode::resp_send_inv: return "RESP_SEND_INV";
    case cqe_opcode::resize_cq: return "RESIZE_CQ";
    case cqe_opcode::no_packet: return "NO_PACKET";
    case cqe_opcode::sig_err: return "SIG_ERR";
    case cqe_opcode::req_err: return "REQ_ERR";
    case cqe_opcode::resp_err: return "RESP_ERR";
    case cqe_opcode::invalid: return "INVALID";
  }
  return "UNKNOWN";
}

const char* to_string(syndrome s) {
  switch (s) {
    case syndrome::none: return "NONE";
    case syndrome::local_length: return "LOCAL_LENGTH_ERR";
    case syndrome::local_qp_op: return "LOCAL_QP_OP_ERR";
    case syndrome::local_prot: return "LOCAL_PROT_ERR";
    case syndrome::wr_flush: return "WR_FLUSH_ERR";
    case syndrome::mw_bind: return "MW_BIND_ERR";
    case syndrome::bad_resp: return "BAD_RESP_ERR";
    case syndrome::local_access: return "LOCAL_ACCESS_ERR";
    case syndrome::remote_inval_req: return "REMOTE_INVAL_REQ_ERR";
    case syndrome::remote_access: return "REMOTE_ACCESS_ERR";
    case syndrome::remote_op: return "REMOTE_OP_ERR";
    case syndrome::transport_retry_exc: return "TRANSPORT_RETRY_EXC_ERR";
    case syndrome::rnr_retry_exc: return "RNR_RETRY_EXC_ERR";
    case syndrome::remote_aborted: return "REMOTE_ABORTED_ERR";
  }
  return "UNKNOWN_SYNDROME";
}

namespace {

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

uint32_t be32_at(const uint8_t* p) {
  be32 v;
  std::memcpy(&v, p, 4);
  return from_be(v);
}
uint64_t be64_at(const uint8_t* p) {
  be64 v;
  std::memcpy(&v, p, 8);
  return from_be(v);
}

// Reads 16-byte units of a WQE, wrapping at the end of the ring.
struct unit_reader {
  const uint8_t* ring;
  uint32_t ring_units;  // 0 = flat buffer, no wrap
  uint32_t first;
  size_t flat_len;
  bool has(uint32_t i) const { return ring_units ? i < ring_units : (static_cast<size_t>(i) + 1) * 16 <= flat_len; }
  const uint8_t* unit(uint32_t i) const {
    return ring_units ? ring + (static_cast<size_t>((first + i) % ring_units) * 16) : ring + static_cast<size_t>(i) * 16;
  }
};

const char* fence_name(uint8_t fm) {
  switch (fm >> 5) {
    case 0: return "none";
    case 1: return "initiator_small";
    case 2: return "fence";
    case 3: return "strong_ordering";
    case 4: return "fence+small";
    default: return "reserved";
  }
}

std::string data_line(const uint8_t* u, const char* what) {
  const uint32_t bc = be32_at(u);
  return fmt("  %s: byte_count=%u lkey=0x%x addr=0x%llx\n", what, bc, be32_at(u + 4),
             static_cast<unsigned long long>(be64_at(u + 8)));
}

std::string decode_units(const unit_reader& r) {
  if (!r.has(0)) return "WQE: truncated (no control segment)\n";
  const uint8_t* c = r.unit(0);
  const uint32_t w0 = be32_at(c), w1 = be32_at(c + 4);
  const auto op = static_cast<send_opcode>(w0 & 0xff);
  const uint32_t ds = w1 & 0x3f;
  uint32_t imm;
  std::memcpy(&imm, c + 12, 4);
  std::string s = fmt("WQE %s (0x%02x) opmod=0x%02x wqe_index=0x%04x qpn=0x%x ds=%u wqebbs=%u\n", to_string(op),
                      w0 & 0xff, w0 >> 24, (w0 >> 8) & 0xffff, w1 >> 8, ds, wqebbs_for_ds(ds));
  const uint8_t f = c[11];
  s += fmt("  ctrl: fence=%s ce=%u%s se=%u imm=0x%08x(raw)\n", fence_name(f & ctrl_flags::fence_mask),
           (f & ctrl_flags::ce_mask) >> 2, (f & ctrl_flags::cq_update) ? "(signalled)" : "(unsignalled)",
           (f & ctrl_flags::solicited) ? 1u : 0u, be32_at(c + 12));
  uint32_t i = 1;
  auto need = [&](uint32_t k) {
    if (k < ds && r.has(k)) return true;
    s += "  (truncated)\n";
    return false;
  };
  const op_traits t = traits_of(op);
  if (t.has_raddr) {
    if (!need(i)) return s;
    const uint8_t* u = r.unit(i++);
    s += fmt("  raddr: addr=0x%llx rkey=0x%x\n", static_cast<unsigned long long>(be64_at(u)), be32_at(u + 8));
  }
  if (t.kind == op_kind::atomic) {
    if (!need(i)) return s;
    const uint8_t* u = r.unit(i++);
    s += fmt("  atomic: swap_add=0x%llx compare=0x%llx\n", static_cast<unsigned long long>(be64_at(u)),
             static_cast<unsigned long long>(be64_at(u + 8)));
  } else if (t.kind == op_kind::masked_atomic) {
    const bool eight = ((w0 >> 24) & 0x7) == 1;
    const uint32_t units = (op == send_opcode::atomic_masked_cs && eight) ? 2 : 1;
    for (uint32_t k = 0; k < units; ++k) {
      if (!need(i)) return s;
      const uint8_t* u = r.unit(i++);
      s += fmt("  masked: %08x %08x %08x %08x\n", be32_at(u), be32_at(u + 4), be32_at(u + 8), be32_at(u + 12));
    }
  } else if (op == send_opcode::wait) {
    if (!need(i)) return s;
    const uint8_t* u = r.unit(i++);
    s += fmt("  wait: max_index=0x%x qpn_cqn=0x%x\n", be32_at(u + 8), be32_at(u + 12));
  }
  while (i < ds) {
    if (!need(i)) return s;
    const uint8_t* u = r.unit(i);
    const uint32_t bc = be32_at(u);
    if (bc & inline_flag) {
      const uint32_t len = bc & ~inline_flag;
      s += fmt("  inline: len=%u data=", len);
      for (uint32_t k = 0; k < len && k < 64; ++k) {
        const uint32_t pos = 4 + k;
        if (!r.has(i + pos / 16)) break;
        s += fmt("%02x", r.unit(i + pos / 16)[pos % 16]);
      }
      s += len > 64 ? "...\n" : "\n";
      i += inline_ds(len);
    } else {
      s += data_line(u, "data");
      ++i;
    }
  }
  return s;
}

}  // namespace

std::string decode_wqe(const void* ring, uint32_t ring_wqebbs, uint32_t wqebb) {
  unit_reader r{static_cast<const uint8_t*>(ring), ring_wqebbs * 4, (wqebb % ring_wqebbs) * 4, 0};
  return decode_units(r);
}

std::string decode_wqe(const void* wqe, size_t len) {
  unit_reader r{static_cast<const uint8_t*>(wqe), 0, 0, len};
  return decode_units(r);
}

std::string decode_cqe(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  const uint8_t op_own = b[63];
  const auto op = cqe_opcode_of(op_own);
  const uint16_t counter = static_cast<uint16_t>((b[60] << 8) | b[61]);
  std::string s = fmt("CQE %s (%u) owner=%u se=%u format=%u wqe_counter=0x%04x\n", to_string(op), op_own >> 4,
                      op_own & 1, (op_own >> 1) & 1, (op_own >> 2) & 3, counter);
  if (cqe_is_error(op)) {
    const uint32_t w = be32_at(b + 56);
    s += fmt("  syndrome=%s (0x%02x) vendor_syndrome=0x%02x wqe_opcode=%s (0x%02x) qpn=0x%x\n",
             to_string(static_cast<syndrome>(b[55])), b[55], b[54], to_string(static_cast<send_opcode>(w >> 24)),
             w >> 24, w & 0xffffff);
  } else {
    const uint32_t w = be32_at(b + 56);
    s += fmt("  byte_cnt=%u qpn=0x%x src_qpn=0x%x imm=0x%08x(BE) wqe_opcode=0x%02x\n", be32_at(b + 44), w & 0xffffff,
             be32_at(b + 24) & 0xffffff, be32_at(b + 36), w >> 24);
  }
  return s;
}

std::string hex_dump(const void* data, size_t len) {
  const auto* b = static_cast<const uint8_t*>(data);
  std::string s;
  for (size_t i = 0; i < len; i += 16) {
    s += fmt("%04zx:", i);
    for (size_t k = i; k < i + 16 && k < len; ++k) s += fmt(" %02x", b[k]);
    s += "\n";
  }
  return s;
}

}  // namespace gdaki::prm
