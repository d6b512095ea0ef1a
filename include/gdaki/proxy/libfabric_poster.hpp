// A proxy poster over libfabric RMA and atomics, so the proxy backend runs on every fabric
// libfabric drives (tcp with rxm, shm, verbs, EFA, ...). libfabric is loaded at run time
// (dlopen of libfabric.so.1): the gdaki library has no link-time dependency on it, and
// open() says clearly when it is missing. Host-only; one poster is used by one thread at
// a time. Design notes (memory-registration modes, put_signal ordering): docs/proxy.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gdaki/proxy/poster.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

struct libfabric_options {
  std::string provider = "tcp;ofi_rxm";  // libfabric provider name (fi_info -p spelling)
  std::string node;                      // local address to bind ("127.0.0.1"); empty: default
  uint32_t max_outstanding = 256;        // operations in flight (staging slots)
};

// What a peer needs to reach one registered region: exchanged out of band.
struct region_export {
  uint64_t base;    // virtual address of the region in its owner's address space
  uint64_t length;  // bytes
  uint64_t key;     // the fabric's remote key
};

class libfabric_poster final : public poster {
 public:
  // Loads libfabric and opens provider `options.provider` with an RDM endpoint that can do
  // RMA and atomics. Returns ok (*out set), not_supported (libfabric absent or no such
  // provider here; *why says which) or io_error (*why has libfabric's message).
  static status open(const libfabric_options& options, std::unique_ptr<libfabric_poster>* out, std::string* why);

  ~libfabric_poster() override;
  libfabric_poster(const libfabric_poster&) = delete;
  libfabric_poster& operator=(const libfabric_poster&) = delete;

  // Registers [addr, addr+len) for local use and remote access. *handle is the value for
  // descriptors' local_key; export_region gives what the peer needs. Returns ok,
  // invalid or io_error.
  status register_memory(void* addr, size_t len, uint32_t* handle);
  status export_region(uint32_t handle, region_export* out) const;

  // This endpoint's fabric address (opaque bytes for the peer's add_peer).
  std::vector<uint8_t> address() const;

  // Inserts a peer's address; *peer is the value for descriptors' peer. Returns ok,
  // invalid or io_error.
  status add_peer(const std::vector<uint8_t>& address, uint16_t* peer);

  // Makes a peer's exported region usable: *key is the value for descriptors'
  // remote_key / signal_key. Returns ok or invalid (unknown peer).
  status add_remote_region(uint16_t peer, const region_export& region, uint32_t* key);

  status post(const descriptor& d, uint64_t cookie) override;
  size_t poll(completion* out, size_t max) override;
  const char* name() const override;

  // The provider libfabric chose ("tcp;ofi_rxm", "shm") and the MR mode bits it asked for.
  const std::string& provider() const;
  uint64_t mr_mode() const;

  struct impl;

 private:
  explicit libfabric_poster(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace gdaki::proxy
