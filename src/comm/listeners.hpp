// internal: listening sockets made by make_unique_id, kept in this process until rank 0's
// TCP bootstrap takes them over (so the port in an id is bound from the moment the id exists).
#pragma once

#include <cstdint>
#include <string>

namespace gdaki::comm::detail {

// Binds and listens on host:port (0 = any free port); returns the port. Throws gdaki::error.
uint16_t listen_and_keep(const std::string& host, uint16_t port);
// The kept listener for port, or -1; the caller owns it from now on.
int take_listener(uint16_t port);
// A fresh listener on host:port. Throws gdaki::error naming the address and errno.
int listen_on(const std::string& host, uint16_t port, uint16_t* bound);

}  // namespace gdaki::comm::detail
