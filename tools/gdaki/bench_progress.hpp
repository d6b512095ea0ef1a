// The progress line of `gdaki bench`: silent for the first few seconds (short runs stay
// clean), then one line on stderr per second saying which test and size is running, so a
// long run is visibly alive. Rewritten in place on a terminal, one line each otherwise.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace gdaki::tool::bench {

class progress {
 public:
  // mode: -1 auto (after quiet_s seconds), 0 never, 1 from the start.
  progress(int mode, uint64_t total_steps, double quiet_s = 3.0);
  ~progress();  // clears the line
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  // What runs now (e.g. "write_bw 64K"); step_done() after each size.
  void set(const std::string& what);
  void step_done();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::string what_;
  uint64_t done_ = 0, total_ = 0;
  bool stop_ = false, printed_ = false, tty_ = false;
  double quiet_s_;
  std::thread ticker_;
};

}  // namespace gdaki::tool::bench
