// Two "hosts" on one machine for the wire tier: two network namespaces joined by a veth
// pair, created by the test with iproute2 and removed afterwards. Creating them needs
// root (CAP_NET_ADMIN + CAP_SYS_ADMIN); without that the caller SKIPs with the reason.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace netns {

// Runs a shell command; returns true on exit status 0, else false with its output in *out.
inline bool run(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    *out = "popen failed";
    return false;
  }
  char buf[512];
  std::string text;
  while (std::fgets(buf, sizeof(buf), p) != nullptr) text += buf;
  const int rc = ::pclose(p);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  *out = text;
  return rc == 0;
}

// Moves the calling thread (and the threads it starts afterwards) into namespace `name`.
inline bool enter(const std::string& name) {
  const int fd = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

// Enters a namespace for a scope, then returns to the one the thread was in.
class scoped_enter {
 public:
  explicit scoped_enter(const std::string& name) : home_(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) {
    ok_ = home_ >= 0 && enter(name);
  }
  scoped_enter(const scoped_enter&) = delete;
  scoped_enter& operator=(const scoped_enter&) = delete;
  ~scoped_enter() {
    if (home_ < 0) return;
    (void)::setns(home_, CLONE_NEWNET);
    ::close(home_);
  }
  bool ok() const { return ok_; }

 private:
  int home_;
  bool ok_ = false;
};

// ns1 (ip1) <-- veth --> ns2 (ip2), a /30 of 10.213.0.0/16 picked from the pid so that
// concurrent test processes do not collide.
struct veth_pair {
  std::string ns1, ns2, ip1, ip2;
  std::string if1, if2;  // the veth ends: if1 in ns1, if2 in ns2
  bool created = false;

  bool create(std::string* why) {
    if (::geteuid() != 0) {
      *why = "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces";
      return false;
    }
    const unsigned pid = static_cast<unsigned>(::getpid());
    const std::string tag = std::to_string(pid);
    ns1 = "gdaki-h1-" + tag;
    ns2 = "gdaki-h2-" + tag;
    const std::string v1 = "gdk" + tag + "a", v2 = "gdk" + tag + "b";
    if1 = v1;
    if2 = v2;
    const std::string net = "10.213." + std::to_string(pid % 256) + ".";
    const unsigned base = ((pid / 256) % 64) * 4;
    ip1 = net + std::to_string(base + 1);
    ip2 = net + std::to_string(base + 2);
    std::string out;
    if (!run("ip netns add " + ns1, &out)) {
      *why = "`ip netns add` failed (" + out + "): no privilege for namespaces here, or iproute2 missing";
      return false;
    }
    created = true;
    const char* steps[] = {"ip netns add NS2",
                           "ip link add V1 netns NS1 type veth peer name V2 netns NS2",
                           "ip -n NS1 addr add IP1/30 dev V1",
                           "ip -n NS2 addr add IP2/30 dev V2",
                           "ip -n NS1 link set lo up",
                           "ip -n NS2 link set lo up",
                           "ip -n NS1 link set V1 up",
                           "ip -n NS2 link set V2 up"};
    for (const char* step : steps) {
      std::string cmd = step;
      for (auto [from, to] : {std::pair<std::string, std::string>{"NS1", ns1}, {"NS2", ns2}, {"V1", v1}, {"V2", v2},
                              {"IP1", ip1}, {"IP2", ip2}}) {
        for (size_t at = cmd.find(from); at != std::string::npos; at = cmd.find(from, at + to.size())) {
          cmd.replace(at, from.size(), to);
        }
      }
      if (!run(cmd, &out)) {
        *why = "`" + cmd + "` failed: " + out;
        return false;
      }
    }
    // The carrier of a veth end comes up asynchronously once both ends are up.
    for (int i = 0; i < 40; ++i) {
      if (run("ip -n " + ns1 + " link show " + v1, &out) && out.find("LOWER_UP") != std::string::npos) return true;
      ::usleep(50000);
    }
    *why = "the veth link between the namespaces did not come up: " + out;
    return false;
  }

  ~veth_pair() {
    if (!created) return;
    std::string out;
    (void)run("ip netns del " + ns1, &out);  // deleting a namespace deletes its veth end
    (void)run("ip netns del " + ns2, &out);
  }
};

}  // namespace netns
