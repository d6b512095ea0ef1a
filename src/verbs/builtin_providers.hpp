// internal: the list of providers compiled into libgdaki.
#pragma once

#include <vector>

#include "gdaki/verbs/provider.hpp"

namespace gdaki::verbs::detail {
std::vector<const provider_ops*> builtin_providers();
}
