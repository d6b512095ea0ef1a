// internal: the soft NIC's progress engine. Per open device, engine_threads threads poll
// the doorbell records of their QPs (QP i belongs to thread i % engine_threads), execute
// new WQEs in order with a per-pass budget per QP (round-robin fairness), and back off
// when idle: spin (pause) for spin_us, then sched_yield for yield_us, then sleep with
// doubling timeouts up to max_sleep_us (or, while every QP of the device is rung only
// through the host hook, up to hooked_sleep_us: nothing can ring it unseen, so polling
// would only burn a core's time). A thread whose QPs only wait for responses on the
// wire sleeps in poll() on those sockets (and its wake-up eventfd) instead: it neither
// spins against the peer for the CPU nor sleeps past a response. A host thread that rings a doorbell calls
// on_doorbell(): it executes the QP's new WQEs itself (inline_exec) under the QP's
// try-lock, and wakes the engine when work is left (or inline execution is off). (The
// hook first tries short_doorbell(), executor.hpp: the mapped short path alone.)
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gdaki/providers/soft.hpp"

namespace gdaki::soft {

struct soft_qp;

class engine {
 public:
  explicit engine(const config& cfg);
  ~engine();  // stops and joins the threads
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  void add(const std::shared_ptr<soft_qp>& qp);
  void remove(const soft_qp* qp);
  // Wakes sleeping engine threads (cheap when none sleeps).
  void wake();
  // The host doorbell hook's body.
  void on_doorbell(soft_qp& qp);
  // The host poll hook's body: a CPU thread found the QP's send CQ empty.
  void on_poll(soft_qp& qp);
  // A QP of this device was handed out without the host hook (a GPU initiator, the CPU
  // doorbell service, mlx5dv_init_obj): its doorbells can move without a wake(), so from
  // now on idle threads poll at least every max_sleep_us. Wakes the sleepers.
  void note_hookless_ringer();

 private:
  void run(uint32_t index);
  // One pass over this thread's QPs. Returns whether any work was done; lowers *deadline
  // to the earliest retry time of a stalled QP.
  bool pass(uint32_t index, std::vector<std::shared_ptr<soft_qp>>& mine, uint64_t* deadline, std::vector<int>* wire_fds);
  // Sleeps until a socket in fds is readable, wake() is called, or wait_us pass.
  void wait_wire(const std::vector<int>& fds, uint32_t wait_us);

  config cfg_;
  std::mutex list_mu_;
  std::vector<std::shared_ptr<soft_qp>> list_;
  std::atomic<uint64_t> list_version_{0};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::atomic<uint64_t> wake_seq_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint32_t> wire_waiters_{0};  // threads in wait_wire
  int wake_fd_ = -1;                       // eventfd: wakes wait_wire
  std::atomic<bool> stop_{false};
  std::atomic<bool> hookless_ringers_{false};  // note_hookless_ringer(); never cleared
  std::vector<std::thread> threads_;
};

// The hooks stored in exported qp_handles (ctx = the soft_qp).
void host_doorbell_hook(void* ctx);
void host_poll_hook(void* ctx);

}  // namespace gdaki::soft
