// Every rank of a group in this process: an all-gather through one shared buffer, guarded
// by a mutex, for tests and single-process users (communicator::create_local).
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "gdaki/comm/bootstrap.hpp"
#include "gdaki/error.hpp"

namespace gdaki::comm {
namespace {

struct local_group {
  std::mutex m;
  std::condition_variable cv;
  int size = 0;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<uint8_t> gather;  // being filled in this round
  std::vector<uint8_t> result;  // the last complete round: stable until every rank has
                                // arrived in the next one, so late readers copy it safely
};

class local_bootstrap final : public bootstrap {
 public:
  local_bootstrap(std::shared_ptr<local_group> g, int r, int timeout_ms) : g_(std::move(g)), rank_(r), timeout_ms_(timeout_ms) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  void allgather(const void* mine, void* all, size_t bytes) override {
    std::unique_lock<std::mutex> lk(g_->m);
    if (g_->arrived == 0) g_->gather.assign(static_cast<size_t>(g_->size) * bytes, 0);
    if (g_->gather.size() != static_cast<size_t>(g_->size) * bytes)
      throw error(status::invalid, "local bootstrap: rank " + std::to_string(rank_) +
                                       " joined an all-gather with a different size than the others");
    std::memcpy(g_->gather.data() + static_cast<size_t>(rank_) * bytes, mine, bytes);
    const uint64_t gen = g_->generation;
    if (++g_->arrived == g_->size) {
      g_->result.swap(g_->gather);
      g_->arrived = 0;
      ++g_->generation;
      g_->cv.notify_all();
    } else if (!g_->cv.wait_for(lk, std::chrono::milliseconds(timeout_ms_), [&] { return g_->generation != gen; })) {
      throw error(status::timeout, "local bootstrap: rank " + std::to_string(rank_) + " waited " +
                                       std::to_string(timeout_ms_) + " ms for " +
                                       std::to_string(g_->size - g_->arrived) + " rank(s) to join an all-gather");
    }
    std::memcpy(all, g_->result.data(), g_->result.size());
  }

 private:
  std::shared_ptr<local_group> g_;
  int rank_;
  int timeout_ms_;
};

}  // namespace

std::vector<std::unique_ptr<bootstrap>> make_local_bootstraps(int size, int timeout_ms) {
  if (size < 1) throw error(status::invalid, "local bootstrap: size " + std::to_string(size) + " is not a group");
  auto g = std::make_shared<local_group>();
  g->size = size;
  std::vector<std::unique_ptr<bootstrap>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<local_bootstrap>(g, r, timeout_ms));
  return out;
}

}  // namespace gdaki::comm
