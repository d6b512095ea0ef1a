// Toeplitz RSS hash, bit by bit as the definition reads. The classifier hashes one packet
// at a time on the port's receive thread; a table-driven version would be the next step
// if profiles ever show this function (a 12-byte IPv4+ports input is 96 iterations).
#include "gdaki/eth/toeplitz.hpp"

namespace gdaki::eth {

uint32_t toeplitz_hash(std::span<const uint8_t> key, std::span<const uint8_t> input) {
  if (input.size() + 4 > key.size()) return 0;
  // window holds key bits [i, i + 32) for input bit i; `next` feeds the key bits behind it.
  uint32_t window = (uint32_t{key[0]} << 24) | (uint32_t{key[1]} << 16) | (uint32_t{key[2]} << 8) | key[3];
  uint32_t result = 0;
  for (size_t byte = 0; byte < input.size(); ++byte) {
    const uint8_t next = key[byte + 4];
    for (int bit = 7; bit >= 0; --bit) {
      if ((input[byte] >> bit) & 1u) result ^= window;
      window = (window << 1) | ((next >> bit) & 1u);
    }
  }
  return result;
}

}  // namespace gdaki::eth
