// The shared-memory wire's mapped path: alloc_shared() blocks, their registry, and the
// revocation table (shm_map.hpp).
#include "shm_map.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"

namespace gdaki::soft {

namespace {

struct shared_block {
  size_t length;
  int fd;
};

std::mutex& blocks_mu() {
  static std::mutex m;
  return m;
}
std::map<uint64_t, shared_block>& blocks() {
  static std::map<uint64_t, shared_block> b;
  return b;
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// A memfd we hand to peers must keep its size: a peer that could shrink it would make our
// own accesses to the lost pages fault (SIGBUS), i.e. crash us. Sealed after it is sized.
bool seal_size(int fd) { return ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0; }

}  // namespace

void* alloc_shared(size_t bytes) {
  if (bytes == 0) throw error(status::invalid, "alloc_shared: 0 bytes");
  const size_t len = (bytes + page_size() - 1) / page_size() * page_size();
  const int fd = ::memfd_create("gdaki-soft-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw error(status::io_error, std::string("alloc_shared: memfd_create: ") + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(len)) != 0 || !seal_size(fd)) {
    const int e = errno;
    ::close(fd);
    throw error(status::no_memory, "alloc_shared: " + std::to_string(bytes) + " bytes: " + std::strerror(e));
  }
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    throw error(status::no_memory, "alloc_shared: mmap of " + std::to_string(bytes) + " bytes: " + std::strerror(e));
  }
  std::lock_guard lk(blocks_mu());
  blocks()[reinterpret_cast<uint64_t>(p)] = {len, fd};
  return p;
}

void free_shared(void* p) {
  if (p == nullptr) return;
  shared_block b{};
  {
    std::lock_guard lk(blocks_mu());
    auto it = blocks().find(reinterpret_cast<uint64_t>(p));
    if (it == blocks().end()) throw error(status::invalid, "free_shared: not a block from alloc_shared");
    b = it->second;
    blocks().erase(it);
  }
  // Peers that mapped it keep their pages until they unmap; our range is gone now.
  ::munmap(p, b.length);
  ::close(b.fd);
}

namespace shm {

bool find_shared(uint64_t addr, uint64_t length, bool writable, int* fd, uint64_t* file_off) {
  std::lock_guard lk(blocks_mu());
  auto it = blocks().upper_bound(addr);
  if (it == blocks().begin()) return false;
  --it;
  const uint64_t base = it->first;
  const uint64_t len = it->second.length;
  if (addr - base >= len || length > len - (addr - base)) return false;
  if (writable) {
    *fd = ::dup(it->second.fd);
  } else {
    // A new open file description, read-only: mmap(PROT_WRITE, MAP_SHARED) of it fails.
    *fd = ::open(("/proc/self/fd/" + std::to_string(it->second.fd)).c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (*fd < 0) return false;
  *file_off = addr - base;
  return true;
}

namespace {

struct table_state {
  std::mutex mu;
  int fd = -1;
  revocation_slot* slots = nullptr;  // null until a peer first asks for a grant
};
table_state& table() {
  static table_state t;
  return t;
}

revocation_slot* table_slots_ptr() {
  table_state& t = table();
  std::lock_guard lk(t.mu);
  if (t.slots != nullptr) return t.slots;
  const size_t bytes = size_t{table_slots} * sizeof(revocation_slot);  // sparse: pages appear on use
  const int fd = ::memfd_create("gdaki-soft-revocation", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return nullptr;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || !seal_size(fd)) {
    ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  t.fd = fd;
  t.slots = static_cast<revocation_slot*>(p);  // zero-filled: no grants
  return t.slots;
}

uint32_t slot_of(uint32_t key) { return (key >> 8) - 2; }

}  // namespace

int table_fd() {
  if (table_slots_ptr() == nullptr) return -1;
  std::lock_guard lk(table().mu);
  return ::dup(table().fd);
}

bool grant(uint32_t rkey) {
  revocation_slot* s = table_slots_ptr();
  const uint32_t slot = slot_of(rkey);
  if (s == nullptr || (rkey >> 8) < 2 || slot >= table_slots) return false;
  s[slot].key.store(rkey, std::memory_order_seq_cst);
  return true;
}

void revoke(uint32_t key, uint32_t wait_ms) {
  revocation_slot* s;
  {
    std::lock_guard lk(table().mu);
    s = table().slots;
  }
  const uint32_t slot = slot_of(key);
  if (s == nullptr || (key >> 8) < 2 || slot >= table_slots) return;
  uint32_t granted = key;  // grants name the rkey
  if (!s[slot].key.compare_exchange_strong(granted, 0, std::memory_order_seq_cst)) return;  // none for it
  // A peer that incremented users before our store may still be copying: wait for it. A
  // peer that dies mid-copy leaves its count behind; after wait_ms we go on (its process
  // is gone, or stopped for longer than any wire timeout).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (uint32_t spins = 0; s[slot].users.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (std::chrono::steady_clock::now() > until) break;
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

mapping::~mapping() {
  if (map_addr != nullptr) ::munmap(map_addr, map_len);
}

void* map_file(int fd, uint64_t file_off, uint64_t len, bool writable, void** map_addr, size_t* map_len) {
  const uint64_t start = file_off / page_size() * page_size();
  const size_t span = static_cast<size_t>(file_off - start + len);
  void* p = ::mmap(nullptr, span, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) return nullptr;
  *map_addr = p;
  *map_len = span;
  return static_cast<uint8_t*>(p) + (file_off - start);
}

}  // namespace shm
}  // namespace gdaki::soft
