// A stand-in for libgdrapi.so.2 with the GDRCopy entry points and no driver behind them:
// gdr_open() fails the way GDRCopy does when the gdrdrv kernel module is not loaded.
#include <cstddef>
#include <cstdint>

extern "C" {
struct gdr;
struct gdr_mh_s {
  unsigned long h;
};

gdr* gdr_open() { return nullptr; }
int gdr_close(gdr*) { return 0; }
int gdr_pin_buffer(gdr*, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_s*) { return 19; }  // ENODEV
int gdr_unpin_buffer(gdr*, gdr_mh_s) { return 19; }
int gdr_map(gdr*, gdr_mh_s, void**, size_t) { return 19; }
int gdr_unmap(gdr*, gdr_mh_s, void*, size_t) { return 19; }
// gdr_runtime_get_version is left out on purpose: the loader must treat it as optional.
}
