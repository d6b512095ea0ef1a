// Direct verbs for the soft device (placeholder until mlx5dv is implemented).
#include <cerrno>
#include <cstdint>

#include "real_verbs.hpp"
#include "soft_verbs.hpp"
