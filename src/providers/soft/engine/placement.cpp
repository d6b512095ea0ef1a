// Data placement and atomics.
#include "placement.hpp"

#include <cstring>

#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

void copy_message(const wqe_reader& r, const gather_entry* src, uint32_t ns, const dst_piece* dst, uint32_t nd) {
  uint32_t di = 0;
  uint64_t doff = 0;
  for (uint32_t si = 0; si < ns; ++si) {
    const gather_entry& s = src[si];
    uint64_t soff = 0;
    while (soff < s.length) {
      while (di < nd && doff == dst[di].length) {
        ++di;
        doff = 0;
      }
      if (di == nd) return;
      uint64_t n = s.length - soff;
      if (dst[di].length - doff < n) n = dst[di].length - doff;
      uint8_t* const to = dst[di].ptr + doff;
      if ((n == 8 && (reinterpret_cast<uintptr_t>(to) & 7) == 0) ||
          (n == 4 && (reinterpret_cast<uintptr_t>(to) & 3) == 0)) {
        // An aligned 4- or 8-byte piece is typically a flag or signal word that a poller
        // reads with an acquire load: place it with one release store, so the reader that
        // sees it also sees every byte placed before it (a memcpy would be a data race
        // in the C++ model, and may be split into narrower stores).
        uint64_t v = 0;
        if (s.is_inline) {
          r.copy_out(static_cast<uint32_t>(s.inline_off + soff), reinterpret_cast<uint8_t*>(&v),
                     static_cast<uint32_t>(n));
        } else {
          std::memcpy(&v, reinterpret_cast<const uint8_t*>(s.addr) + soff, n);
        }
        if (n == 8) {
          dev::arch::store_release(reinterpret_cast<uint64_t*>(to), v);
        } else {
          dev::arch::store_release(reinterpret_cast<uint32_t*>(to), static_cast<uint32_t>(v));
        }
      } else if (s.is_inline) {
        r.copy_out(static_cast<uint32_t>(s.inline_off + soff), to, static_cast<uint32_t>(n));
      } else {
        std::memcpy(dst[di].ptr + doff, reinterpret_cast<const uint8_t*>(s.addr) + soff, n);
      }
      soff += n;
      doff += n;
    }
  }
}

void copy_scatter(const uint8_t* from, uint64_t length, const dst_piece* dst, uint32_t nd) {
  for (uint32_t i = 0; i < nd && length != 0; ++i) {
    const uint64_t n = dst[i].length < length ? dst[i].length : length;
    // A zero-length scatter entry is legal and its address is never checked (0 bytes need
    // no key), so it may be null or wild; memcpy must not see it, even for 0 bytes (UB).
    // Found by the WQE-parser fuzzer (tests/fuzz/regress/wqe_parse/).
    if (n == 0) continue;
    std::memcpy(dst[i].ptr, from, n);
    from += n;
    length -= n;
  }
}

namespace {

// Masked fetch-and-add (PRM 2.6): a 1 in `boundary` marks the top bit of a field, whose
// carry-out is dropped; boundary 0 is a plain add. Computed bit-serially per field.
uint64_t masked_add(uint64_t a, uint64_t b, uint64_t boundary, uint32_t bits) {
  uint64_t out = 0, carry = 0;
  for (uint32_t i = 0; i < bits; ++i) {
    const uint64_t x = (a >> i) & 1, y = (b >> i) & 1;
    out |= ((x ^ y ^ carry) & 1) << i;
    carry = (x & y) | (x & carry) | (y & carry);
    if ((boundary >> i) & 1) carry = 0;
  }
  return out;
}

template <typename T>
uint64_t rmw(T* p, const parsed_wqe& w) {
  using prm::send_opcode;
  const auto op = static_cast<send_opcode>(w.opcode);
  const T swap = static_cast<T>(w.swap_add), cmp = static_cast<T>(w.compare);
  const T swap_mask = static_cast<T>(w.swap_mask), cmp_mask = static_cast<T>(w.compare_mask);
  for (;;) {
    const T old = dev::arch::load_acquire(p);
    T next = old;
    switch (op) {
      case send_opcode::atomic_cs:
        if (old != cmp) return old;
        next = swap;
        break;
      case send_opcode::atomic_fa:
        next = static_cast<T>(old + swap);
        break;
      case send_opcode::atomic_masked_cs:
        if (((old ^ cmp) & cmp_mask) != 0) return old;
        next = static_cast<T>((old & ~swap_mask) | (swap & swap_mask));
        break;
      default:  // atomic_masked_fa
        next = static_cast<T>(masked_add(old, swap, cmp, sizeof(T) * 8));
        break;
    }
    if (dev::arch::compare_swap(p, old, next)) return old;
  }
}

}  // namespace

uint64_t execute_atomic(const parsed_wqe& w, void* target) {
  // Every soft-NIC atomic on a word is one atomic instruction on it (a fetch-and-add, a
  // compare-and-swap, or a compare-and-swap loop for the masked ones), so they are atomic
  // with respect to each other (and to CPU atomics on the same word).
  if (w.atomic_size == 8) {
    auto* word = static_cast<uint64_t*>(target);
    if (w.opcode == static_cast<uint8_t>(prm::send_opcode::atomic_fa)) return fetch_add_word(word, w.swap_add);
    if (w.opcode == static_cast<uint8_t>(prm::send_opcode::atomic_cs)) {
      return compare_swap_word(word, w.compare, w.swap_add);
    }
    return rmw(word, w);
  }
  return rmw(static_cast<uint32_t*>(target), w);
}

}  // namespace gdaki::soft
