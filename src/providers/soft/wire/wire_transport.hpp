// internal: the soft wire's transport (rxe's "net" role): moves the bytes of frames
// through a socket, buffered on receive and gathered on send, with descriptors attached
// where a grant needs them. It knows nothing of what a frame means (wire_frame.hpp decides
// that) nor of who sends it (wire_connection.cpp, wire_requester.cpp, wire_responder.cpp).
// Every request and response goes through these, so their bodies live in this header and
// each is `static`: a call the compiler does not inline stays a direct call inside the
// translation unit (no PLT), and the compiler weighs inlining them as it did when they
// were file-local in one wire.cpp (no `inline`, which would change that). Each role file
// uses only some of them, hence [[maybe_unused]].
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gdaki::soft::wire {

[[maybe_unused]] static uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Waits until fd is readable (or writable); false on timeout or error.
[[maybe_unused]] static bool wait_fd(int fd, short events, uint64_t deadline_ms) {
  for (;;) {
    const uint64_t now = now_ms();
    if (now >= deadline_ms) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(deadline_ms - now));
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (r < 0 && errno != EINTR) return false;
  }
}

// Steps an iovec array past `done` bytes that were sent or received.
[[maybe_unused]] static void advance_iov(iovec** iov, int* n, size_t done) {
  while (*n > 0 && done >= (*iov)->iov_len) {
    done -= (*iov)->iov_len;
    ++*iov;
    --*n;
  }
  if (*n > 0) {
    (*iov)->iov_base = static_cast<uint8_t*>((*iov)->iov_base) + done;
    (*iov)->iov_len -= done;
  }
}

// Reads exactly the bytes iov[0..n) describe (the array is consumed). False on EOF, error
// or deadline.
[[maybe_unused]] static bool readv_full(int fd, iovec* iov, int n, uint64_t deadline_ms) {
  while (n > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --n;
      continue;
    }
    const ssize_t r = ::readv(fd, iov, n > IOV_MAX ? IOV_MAX : n);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!wait_fd(fd, POLLIN, deadline_ms)) return false;
      continue;
    }
    advance_iov(&iov, &n, static_cast<size_t>(r));
  }
  return true;
}

[[maybe_unused]] static bool writev_full(int fd, iovec* iov, int n, uint64_t deadline_ms) {
  while (n > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --n;
      continue;
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n > IOV_MAX ? IOV_MAX : n);
    const ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!wait_fd(fd, POLLOUT, deadline_ms)) return false;
      continue;
    }
    advance_iov(&iov, &n, static_cast<size_t>(r));
  }
  return true;
}

[[maybe_unused]] static bool read_full(int fd, void* p, size_t len, uint64_t deadline_ms) {
  iovec v{p, len};
  return readv_full(fd, &v, 1, deadline_ms);
}

// Bytes read from a socket ahead of need: one recv brings several small frames (a
// pipelined peer sends them back to back), so each costs no syscall of its own. Payload
// beyond what is buffered is read straight into its destination.
struct rx_buffer {
  // Small: what a recv brings beyond the frame's head is copied once more (a payload
  // prefix), so the buffer only needs to hold a burst of small frames.
  static constexpr size_t cap = 4096;
  uint8_t b[cap];
  size_t head = 0, tail = 0;
  size_t size() const { return tail - head; }
};

// Reads what the socket has now, without waiting. 1: got bytes, 0: none yet, -1: EOF or
// error.
[[maybe_unused]] static int rx_fill(int fd, rx_buffer& rb) {
  if (rb.head == rb.tail) {
    rb.head = rb.tail = 0;
  } else if (rb.head != 0) {
    std::memmove(rb.b, rb.b + rb.head, rb.size());
    rb.tail -= rb.head;
    rb.head = 0;
  }
  if (rb.tail == rx_buffer::cap) return 1;
  const ssize_t r = ::recv(fd, rb.b + rb.tail, rx_buffer::cap - rb.tail, MSG_DONTWAIT);
  if (r > 0) {
    rb.tail += static_cast<size_t>(r);
    return 1;
  }
  if (r == 0) return -1;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

// Reads exactly the bytes iov[0..n) describe (the array is consumed): buffered bytes
// first, then small remainders through the buffer and large ones straight from the
// socket. False on EOF, error or deadline.
[[maybe_unused]] static bool rx_readv(int fd, rx_buffer& rb, iovec* iov, int n, uint64_t deadline_ms) {
  for (;;) {
    while (n > 0 && rb.size() != 0) {
      const size_t k = iov->iov_len < rb.size() ? iov->iov_len : rb.size();
      std::memcpy(iov->iov_base, rb.b + rb.head, k);
      rb.head += k;
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + k;
      iov->iov_len -= k;
      if (iov->iov_len == 0) {
        ++iov;
        --n;
      }
    }
    while (n > 0 && iov->iov_len == 0) {
      ++iov;
      --n;
    }
    if (n == 0) return true;
    size_t left = 0;
    for (int i = 0; i < n; ++i) left += iov[i].iov_len;
    if (left >= 4096) return readv_full(fd, iov, n, deadline_ms);
    const int f = rx_fill(fd, rb);
    if (f < 0) return false;
    if (f == 0 && !wait_fd(fd, POLLIN, deadline_ms)) return false;
  }
}

[[maybe_unused]] static bool rx_read(int fd, rx_buffer& rb, void* p, size_t len, uint64_t deadline_ms) {
  iovec v{p, len};
  return rx_readv(fd, rb, &v, 1, deadline_ms);
}

// Reads and drops `len` bytes (the payload of a request that was refused).
[[maybe_unused]] static bool drain(int fd, rx_buffer& rb, uint64_t len, uint64_t deadline_ms) {
  uint8_t scratch[16384];
  while (len != 0) {
    const size_t n = len < sizeof(scratch) ? static_cast<size_t>(len) : sizeof(scratch);
    if (!rx_read(fd, rb, scratch, n, deadline_ms)) return false;
    len -= n;
  }
  return true;
}

// Frames a side owes its peer, sent together: the server's replies once it has read every
// frame that came, the requester's requests once the executor ends an issue batch (one
// syscall and one wake-up of the peer for a burst of pipelined frames, not one each).
// Large frames (READ data, big WRITE payloads) go at once, behind whatever is queued.
struct tx_queue {
  std::vector<uint8_t> bytes;
  static constexpr size_t flush_at = 65536;
  static constexpr size_t copy_max = 256;  // frames up to this size are copied and queued
};

[[maybe_unused]] static bool flush_queued(int fd, tx_queue& q, uint64_t deadline_ms) {
  if (q.bytes.empty()) return true;
  iovec v{q.bytes.data(), q.bytes.size()};
  const bool ok = writev_full(fd, &v, 1, deadline_ms);
  q.bytes.clear();
  return ok;
}

// Queues the frame in v (n pieces) if it is small, else sends what is queued and then it.
[[maybe_unused]] static bool send_queued(int fd, tx_queue& q, const iovec* v, int n, uint64_t deadline_ms) {
  size_t total = 0;
  for (int i = 0; i < n; ++i) total += v[i].iov_len;
  if (total <= tx_queue::copy_max) {
    for (int i = 0; i < n; ++i) {
      const auto* p = static_cast<const uint8_t*>(v[i].iov_base);
      q.bytes.insert(q.bytes.end(), p, p + v[i].iov_len);
    }
    return q.bytes.size() < tx_queue::flush_at || flush_queued(fd, q, deadline_ms);
  }
  constexpr int one_call = 8;  // pieces sent in one writev with the queue in front
  if (n >= one_call) {
    std::vector<iovec> rest(v, v + n);
    return flush_queued(fd, q, deadline_ms) && writev_full(fd, rest.data(), n, deadline_ms);
  }
  iovec all[one_call];
  int k = 0;
  if (!q.bytes.empty()) all[k++] = {q.bytes.data(), q.bytes.size()};
  for (int i = 0; i < n; ++i) all[k++] = v[i];
  const bool ok = writev_full(fd, all, k, deadline_ms);
  q.bytes.clear();
  return ok;
}

// Sends the bytes of v with `nfds` descriptors attached to the first one (SCM_RIGHTS).
[[maybe_unused]] static bool send_with_fds(int fd, iovec* v, int n, const int* fds, int nfds, uint64_t deadline_ms) {
  alignas(cmsghdr) char ctl[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = v;
  m.msg_iovlen = static_cast<size_t>(n);
  m.msg_control = ctl;
  m.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds, static_cast<size_t>(nfds) * sizeof(int));
  for (;;) {
    const ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (r >= 0) {
      // The descriptors went with the first byte; the rest (rarely any) goes plainly.
      advance_iov(&v, &n, static_cast<size_t>(r));
      return n == 0 || writev_full(fd, v, n, deadline_ms);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (!wait_fd(fd, POLLOUT, deadline_ms)) return false;
  }
}

// Reads exactly len bytes with recvmsg, keeping up to max_fds descriptors that came with
// them (the rest, and any that came with a short read, are closed). Returns how many.
[[maybe_unused]] static int recv_with_fds(int fd, void* p, size_t len, int* fds, int max_fds, uint64_t deadline_ms) {
  int got = 0;
  auto* at = static_cast<uint8_t*>(p);
  while (len != 0) {
    alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
    iovec v{at, len};
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    const ssize_t r = ::recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLIN, deadline_ms)) continue;
      break;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int d = -1;
        std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (got < max_fds) {
          fds[got++] = d;
        } else {
          ::close(d);
        }
      }
    }
    at += r;
    len -= static_cast<size_t>(r);
  }
  if (len != 0) {
    for (int i = 0; i < got; ++i) ::close(fds[i]);
    return -1;
  }
  return got;
}

[[maybe_unused]] static void tune(int fd, bool tcp) {
  const int one = 1;
  if (tcp) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace gdaki::soft::wire
