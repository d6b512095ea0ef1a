// The shared-memory wire's mapped path: alloc_shared() blocks, their registry, and the
// revocation table (shm_map.hpp).
#include "shm_map.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/mr.hpp"
#include "wire_auth.hpp"

namespace gdaki::soft {

namespace {

struct shared_block {
  size_t length;     // whole pages
  size_t requested;  // what the caller asked for: bytes past it are nobody's
  int fd;
};

// A registration's own memfd (shm_map.hpp, adopt_registration): the owner's pages of
// [addr, addr + span) are this file's while the registration lives.
struct registration_memfd {
  uint64_t block;  // the alloc_shared() block it lies in
  uint64_t addr;   // its first byte (a page boundary)
  size_t span;     // the file's size: the registration's pages
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
// By rkey; guarded by blocks_mu() like the blocks they lie in.
std::map<uint32_t, registration_memfd>& registrations() {
  static std::map<uint32_t, registration_memfd> r;
  return r;
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// A memfd we hand to peers must keep its size: a peer that could shrink it would make our
// own accesses to the lost pages fault (SIGBUS), i.e. crash us. Sealed after it is sized.
bool seal_size(int fd) { return ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0; }

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Writes [from, from + n) of our memory into fd at file offset off (the kernel copies).
bool write_all_at(int fd, uint64_t from, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::pwrite(fd, reinterpret_cast<const void*>(from + done), n - done, static_cast<off_t>(off + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

// Maps fd's [off, off + n) over our range [addr, addr + n), replacing what was there.
bool map_over(uint64_t addr, size_t n, int fd, uint64_t off) {
  return ::mmap(reinterpret_cast<void*>(addr), n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                static_cast<off_t>(off)) != MAP_FAILED;
}

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
  blocks()[reinterpret_cast<uint64_t>(p)] = {len, bytes, fd};
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
    // Registrations still alive inside it (freed before dereg_mr): their files go with the
    // block; the munmap below takes their ranges too.
    for (auto r = registrations().begin(); r != registrations().end();) {
      if (r->second.block != reinterpret_cast<uint64_t>(p)) {
        ++r;
        continue;
      }
      ::close(r->second.fd);
      r = registrations().erase(r);
    }
  }
  // Peers that mapped it keep their pages until they unmap; our range is gone now.
  ::munmap(p, b.length);
  ::close(b.fd);
}

namespace shm {

void adopt_registration(uint32_t rkey, uint64_t addr, uint64_t length, uint32_t access) {
  if ((access & (verbs::access::remote_read | verbs::access::remote_write)) == 0 || length == 0) return;
  const size_t pg = page_size();
  std::lock_guard lk(blocks_mu());
  auto it = blocks().upper_bound(addr);
  if (it == blocks().begin()) return;
  --it;
  const uint64_t base = it->first;
  const shared_block& b = it->second;
  if (addr - base >= b.length || length > b.length - (addr - base)) return;  // not inside one block
  // Whole pages only: a page shared with bytes outside the registration would hand the
  // peer those bytes too. The block's last page is fine: past `requested` is padding.
  const uint64_t end = addr + length;
  if (addr % pg != 0 || (end % pg != 0 && end < base + b.requested)) return;
  const size_t span = (length + pg - 1) / pg * pg;
  for (const auto& [k, r] : registrations()) {
    if (r.block == base && r.addr < addr + span && addr < r.addr + r.span) return;  // pages already another's file
  }
  const int fd = ::memfd_create("gdaki-soft-shared-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return;
  // Copy, then swap the pages under the owner (the block keeps its copy until the swap
  // has worked, so a failure loses nothing).
  if (::ftruncate(fd, static_cast<off_t>(span)) != 0 || !write_all_at(fd, addr, span, 0) || !map_over(addr, span, fd, 0)) {
    const bool restored = map_over(addr, span, b.fd, addr - base);  // MAP_FIXED may have unmapped on failure
    ::close(fd);
    if (!restored) {
      wire::auth::report("soft NIC: registering " + std::to_string(length) + " bytes at " + hex(addr) +
                         ": could not map the block back after a failed swap (" + std::strerror(errno) + ")");
    }
    return;
  }
  // After the owner's own writable mapping exists: F_SEAL_FUTURE_WRITE refuses every
  // writable mapping made later (a peer's, through any descriptor) and write(2).
  const bool read_only = (access & verbs::access::remote_write) == 0;
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | (read_only ? F_SEAL_FUTURE_WRITE : 0) | F_SEAL_SEAL);
  // The block's pages of the range are nobody's now: give the memory back.
  (void)::fallocate(b.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(addr - base),
                    static_cast<off_t>(span));
  registrations()[rkey] = {base, addr, span, fd};
}

void release_registration(uint32_t rkey) {
  std::lock_guard lk(blocks_mu());
  auto r = registrations().find(rkey);
  if (r == registrations().end()) return;
  const registration_memfd reg = r->second;
  registrations().erase(r);
  auto b = blocks().find(reg.block);
  if (b != blocks().end()) {
    // Back into the block, then the block's pages over the range: from here on the
    // registration's file is only the peers' (if they kept it), never ours.
    const uint64_t off = reg.addr - reg.block;
    if (!write_all_at(b->second.fd, reg.addr, reg.span, off) || !map_over(reg.addr, reg.span, b->second.fd, off)) {
      // The owner keeps the registration's file (its data is intact), not revoked.
      wire::auth::report("soft NIC: deregistering rkey " + hex(rkey) +
                         ": could not move its pages back into the block (" + std::strerror(errno) +
                         "); peers that mapped it keep access");
    }
  }
  ::close(reg.fd);
}

bool registration_file(uint32_t rkey, bool writable, int* fd, uint64_t* file_off) {
  std::lock_guard lk(blocks_mu());
  auto r = registrations().find(rkey);
  if (r == registrations().end()) return false;
  if (writable) {
    *fd = ::dup(r->second.fd);
  } else {
    // A new open file description, read-only (a read-only registration's file is also
    // sealed against writable mappings, so reopening it read-write gains nothing).
    *fd = ::open(("/proc/self/fd/" + std::to_string(r->second.fd)).c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (*fd < 0) return false;
  *file_off = 0;
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

bool grant(uint32_t rkey, uint32_t* epoch) {
  revocation_slot* s = table_slots_ptr();
  const uint32_t slot = slot_of(rkey);
  if (s == nullptr || (rkey >> 8) < 2 || slot >= table_slots) return false;
  s[slot].key.store(rkey, std::memory_order_seq_cst);
  *epoch = s[slot].epoch.load(std::memory_order_seq_cst);
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
  // Every mapping made under this grant is now stale for good, even once a later
  // registration of the slot gets the same rkey and a grant of its own.
  s[slot].epoch.fetch_add(1, std::memory_order_seq_cst);
  // A peer that incremented users before our store may still be copying: wait for it. A
  // peer that dies mid-copy leaves its count behind; after wait_ms we go on (its process
  // is gone, or stopped for longer than any wire timeout).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (uint32_t spins = 0; s[slot].users.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (std::chrono::steady_clock::now() > until) {
      // Said, because a live peer never holds a count this long (a copy, or a lease its
      // engine gives back within a millisecond: mapped_pin.hpp): a deregistration that
      // waited this out is a peer gone, or a bug (tests/tool/rendezvous.sh looks for it).
      static std::atomic<uint64_t> said{0};
      const uint64_t n = said.fetch_add(1, std::memory_order_relaxed) + 1;
      if (n <= 20 || n % 1000 == 0) {
        std::fprintf(stderr,
                     "gdaki soft wire: taking back the grant of rkey 0x%x waited %u ms for a peer that still holds "
                     "it in use (a peer process that died?); going on\n",
                     key, wait_ms);
      }
      break;
    }
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
