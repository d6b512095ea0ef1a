// Test table and size parsing for `gdaki bench` (bench_options.hpp).
#include "bench_options.hpp"

#include <cctype>
#include <cstdlib>
#include <string>

namespace gdaki::tool::bench {

const std::vector<test_info>& tests() {
  static const std::vector<test_info> t = {
      {test_kind::write_bw, "write_bw", "RDMA_Write BW Test", false, false},
      {test_kind::write_lat, "write_lat", "RDMA_Write Latency Test", true, false},
      {test_kind::read_bw, "read_bw", "RDMA_Read BW Test", false, false},
      {test_kind::read_lat, "read_lat", "RDMA_Read Latency Test", true, false},
      {test_kind::atomic_rate, "atomic_rate", "Atomic FETCH_AND_ADD rate Test", false, true},
      {test_kind::put_signal_bw, "put_signal_bw", "put_signal (WRITE + signal) BW Test", false, false},
      {test_kind::send_lat, "send_lat", "Send Latency Test", true, false},
      {test_kind::send_bw, "send_bw", "Send BW Test", false, false},
  };
  return t;
}

const test_info& info(test_kind k) {
  for (const test_info& t : tests()) {
    if (t.kind == k) return t;
  }
  return tests().front();
}

std::optional<test_kind> find_test(const std::string& name) {
  for (const test_info& t : tests()) {
    if (name == t.name) return t.kind;
  }
  return std::nullopt;
}

const char* to_string(scope_kind s) {
  switch (s) {
    case scope_kind::thread: return "thread";
    case scope_kind::warp: return "warp";
    case scope_kind::block: return "block";
  }
  return "?";
}

bool parse_size(const std::string& text, uint64_t* out, std::string* why) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) {
    *why = "not a size: '" + text + "' (expected a number with an optional suffix K, KiB, M, MiB, G, GiB)";
    return false;
  }
  if (i > 12) {
    *why = "size too large: '" + text + "'";
    return false;
  }
  const uint64_t n = std::strtoull(text.substr(0, i).c_str(), nullptr, 10);
  std::string suffix = text.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // Binary multiples throughout, as perftest and ucx_perftest read sizes: 1K = 1024.
  uint64_t mult = 0;
  if (suffix.empty() || suffix == "B") mult = 1;
  if (suffix == "K" || suffix == "KB" || suffix == "KIB") mult = uint64_t{1} << 10;
  if (suffix == "M" || suffix == "MB" || suffix == "MIB") mult = uint64_t{1} << 20;
  if (suffix == "G" || suffix == "GB" || suffix == "GIB") mult = uint64_t{1} << 30;
  if (mult == 0) {
    *why = "unknown size suffix '" + text.substr(i) + "' in '" + text + "' (use K, KiB, M, MiB, G or GiB)";
    return false;
  }
  *out = n * mult;
  return true;
}

bool parse_sizes(const std::string& text, std::vector<uint64_t>* out, std::string* why) {
  out->clear();
  if (text == "all") {
    for (uint64_t s = 2; s <= max_size; s *= 2) out->push_back(s);
    return true;
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t dots = item.find("..");
    if (dots != std::string::npos) {
      uint64_t lo = 0, hi = 0;
      if (!parse_size(item.substr(0, dots), &lo, why) || !parse_size(item.substr(dots + 2), &hi, why)) return false;
      if (lo == 0 || lo > hi) {
        *why = "bad size range '" + item + "' (want LO..HI with 0 < LO <= HI)";
        return false;
      }
      for (uint64_t s = lo; s <= hi; s *= 2) out->push_back(s);
    } else {
      uint64_t s = 0;
      if (!parse_size(item, &s, why)) return false;
      out->push_back(s);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  for (uint64_t s : *out) {
    if (s < min_size || s > max_size) {
      *why = "size " + std::to_string(s) + " is outside 1 B .. 8 MiB";
      return false;
    }
  }
  return true;
}

}  // namespace gdaki::tool::bench
