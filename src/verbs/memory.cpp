// Names of memory kinds, for messages.
#include "gdaki/verbs/memory.hpp"

namespace gdaki::verbs {

const char* to_string(memory_kind k) {
  switch (k) {
    case memory_kind::host: return "host";
    case memory_kind::host_pinned: return "host_pinned";
    case memory_kind::device: return "device";
  }
  return "unknown";
}

}  // namespace gdaki::verbs
