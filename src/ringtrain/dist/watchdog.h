// Watchdog: turns a hung collective into a clear, job-wide failure. Every collective arms it for the
// duration of the call (Guard); a thread of its own checks the armed calls and, when one has run longer
// than the timeout, reports "rank R of W: <operation> did not finish within T s" and runs the timeout
// action (by default: print to stderr and MPI_Abort, which takes every rank of the job down).
// A timeout <= 0 disables it. Only time inside collectives counts: slow compute is never a hang.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ringtrain::dist {

class Watchdog {
 public:
  // Receives the complete one-line message; the default prints it and calls MPI_Abort.
  using TimeoutAction = std::function<void(const std::string& message)>;
  static void abort_job(const std::string& message);

  Watchdog(double timeout_s, int rank, int world_size, TimeoutAction action = abort_job);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Disarms on destruction.
  class Guard {
   public:
    Guard(Watchdog* w, uint64_t slot) : w_(w), id_(slot) {}
    Guard(Guard&& o) noexcept : w_(o.w_), id_(o.id_) { o.w_ = nullptr; }
    Guard(const Guard&) = delete;
    ~Guard() { if (w_) w_->disarm(id_); }
   private:
    Watchdog* w_;
    uint64_t id_;
  };
  // operation, dtype, algo: static strings ("allreduce_sum", "float", "ring"), count: elements. Arming
  // allocates nothing (a fixed table of slots: one per thread in a collective, kSlots at most; beyond that
  // a collective goes unwatched); the message is only formatted on timeout.
  Guard arm(const char* operation, const char* dtype = "", std::size_t count = 0, const char* algo = "");

  double timeout_s() const { return timeout_s_; }
  bool fired() const;

 private:
  struct Armed {
    const char* operation;
    const char* dtype;
    std::size_t count;
    const char* algo;
    std::chrono::steady_clock::time_point start;
  };
  static constexpr int kSlots = 16;
  void disarm(uint64_t slot);
  void run();

  double timeout_s_;
  int rank_, world_size_;
  TimeoutAction action_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Armed slots_[kSlots] = {};
  bool used_[kSlots] = {};
  bool stop_ = false, fired_ = false;
  std::thread thread_;
};

}  // namespace ringtrain::dist
