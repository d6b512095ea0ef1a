// A program built against an installed gdaki: uses the header-only data path and a
// symbol from the shared library (the decoder).
#include <gdaki/device/datapath.hpp>
#include <gdaki/prm/decode.hpp>

#include <cstdio>
#include <cstring>

int main() {
  alignas(64) unsigned char ring[4 * 64];
  std::memset(ring, 0, sizeof ring);
  gdaki::dev::qp_handle qp{};
  qp.sq_buf = ring;
  qp.log_sq_wqebbs = 2;
  qp.qpn = 0x12;
  gdaki::dev::prepare_nop(qp, 0, gdaki::prm::ctrl_flags::cq_update);
  const std::string text = gdaki::prm::decode_wqe(ring, 4, 0);
  std::printf("%s", text.c_str());
  return text.find("NOP") == std::string::npos ? 1 : 0;
}
