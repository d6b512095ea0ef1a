// Unique ids: rank 0 makes one (and starts listening, so the id is usable the moment it
// exists), or every rank reads one from torchrun-style variables.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/listeners.hpp"
#include "gdaki/comm/bootstrap.hpp"
#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"

namespace gdaki::comm {
namespace {

void fill_random(void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t got = ::getrandom(b, n, 0);
    if (got <= 0) throw error(status::io_error, "unique id: getrandom failed");
    b += got;
    n -= static_cast<size_t>(got);
  }
}

bool parse_hex(const std::string& text, std::vector<uint8_t>* out) {
  std::string t;
  for (char ch : text)
    if (!std::isspace(static_cast<unsigned char>(ch))) t += ch;
  if (t.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < t.size(); i += 2) {
    const auto nib = [](char ch) -> int {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      return -1;
    };
    const int hi = nib(t[i]), lo = nib(t[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return true;
}

// The id's 32 secret bytes from a secret of 16..64 bytes: the first 32, zero-padded (the
// soft wire takes the same bytes through set_secret, so both layers agree).
void put_secret(unique_id* id, const std::vector<uint8_t>& s) {
  std::memset(id->secret, 0, sizeof(id->secret));
  std::memcpy(id->secret, s.data(), s.size() < sizeof(id->secret) ? s.size() : sizeof(id->secret));
}

}  // namespace

unique_id make_unique_id(const std::string& host, uint16_t port) {
  unique_id id;
  if (host.size() >= sizeof(id.host)) throw error(status::invalid, "unique id: host name '" + host + "' is too long");
  std::memcpy(id.host, host.c_str(), host.size() + 1);
  fill_random(id.secret, sizeof(id.secret));
  fill_random(id.job, sizeof(id.job));
  id.port = detail::listen_and_keep(host, port);
  return id;
}

unique_id unique_id_from_env() {
  unique_id id;
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr == nullptr || *addr == 0) throw error(status::invalid, "communicator from env: MASTER_ADDR is not set");
  if (port == nullptr || *port == 0) throw error(status::invalid, "communicator from env: MASTER_PORT is not set");
  if (std::strlen(addr) >= sizeof(id.host))
    throw error(status::invalid, std::string("communicator from env: MASTER_ADDR '") + addr + "' is too long");
  in_addr probe{};
  if (::inet_pton(AF_INET, addr, &probe) != 1)
    throw error(status::invalid, std::string("communicator from env: MASTER_ADDR '") + addr +
                                     "' is not an IPv4 address");
  char* end = nullptr;
  const unsigned long p = std::strtoul(port, &end, 10);
  if (*end != 0 || p == 0 || p > 65535)
    throw error(status::invalid, std::string("communicator from env: MASTER_PORT '") + port + "' is not a port");
  std::memcpy(id.host, addr, std::strlen(addr) + 1);
  id.port = static_cast<uint16_t>(p);
  // Only a secret every rank was given can authenticate the others: refuse to invent one.
  const char* hex = std::getenv("GDAKI_SOFT_SECRET");
  const char* file = std::getenv("GDAKI_SOFT_SECRET_FILE");
  if ((hex == nullptr || *hex == 0) && (file == nullptr || *file == 0))
    throw error(status::invalid,
                "communicator from env: neither GDAKI_SOFT_SECRET nor GDAKI_SOFT_SECRET_FILE is set; every rank needs "
                "the same job secret (e.g. export GDAKI_SOFT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \\n'))");
  std::vector<uint8_t> s;
  if (!parse_hex(soft::secret_hex(), &s) || s.empty())
    throw error(status::invalid, "communicator from env: the job secret is not usable");
  put_secret(&id, s);
  // The job tag: derived from the secret and the rendezvous point, which every rank shares.
  for (size_t i = 0; i < sizeof(id.job); ++i)
    id.job[i] = static_cast<uint8_t>(id.secret[(i * 7) % sizeof(id.secret)] ^ (id.port >> (8 * (i % 2))) ^ i);
  return id;
}

void rank_from_env(int* rank, int* size) {
  const auto read = [](const char* name, int lo) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == 0) throw error(status::invalid, std::string("communicator from env: ") + name + " is not set");
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end != 0 || x < lo || x > 1 << 20)
      throw error(status::invalid, std::string("communicator from env: ") + name + "='" + v + "' is not a valid number");
    return static_cast<int>(x);
  };
  *rank = read("RANK", 0);
  *size = read("WORLD_SIZE", 1);
  if (*rank >= *size)
    throw error(status::invalid, "communicator from env: RANK " + std::to_string(*rank) + " is not below WORLD_SIZE " +
                                     std::to_string(*size));
}

}  // namespace gdaki::comm
