// Watchdog: turns a hung collective into a clear, job-wide failure. Every collective arms it for the
// duration of the call (Guard); a thread of its own checks the armed calls and, when one has run longer
// than the timeout, reports "rank R of W: <operation> did not finish within T s" and runs the timeout
// action (by default: print to stderr and MPI_Abort, which takes every rank of the job down).
// A timeout <= 0 disables it. Only time inside collectives counts: slow compute is never a hang.
// Point-to-point waits (pipeline stages) are watched the same way (arm_p2p), their message naming the peer;
// a watchdog of a sub-group (the process grid's tensor, data-parallel and pipeline groups) says which group
// and which world rank it is (set_group). While one runs, SIGTERM (mpirun's way of stopping the other ranks
// when one dies) makes each watchdog print what its rank was waiting in, naming the peers, before the
// process exits with 128 + 15: the job's output then says which operation the death interrupted.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  // A point-to-point wait on `peer` (a rank of this watchdog's group; peer_world: its world rank).
  Guard arm_p2p(const char* operation, std::size_t bytes, int peer, int peer_world);
  // Names the group in every message: "rank 1 of 2 in the pipeline group (world rank 3)", and a
  // collective's message the group's other world ranks (peers_world), the suspects. Before use.
  void set_group(const std::string& group, int world_rank, const std::vector<int>& peers_world = {});

  double timeout_s() const { return timeout_s_; }
  bool fired() const;

 private:
  struct Armed {
    const char* operation;
    const char* dtype;
    std::size_t count;
    const char* algo;
    std::chrono::steady_clock::time_point start;
    int peer = -1, peer_world = -1;  // point-to-point: the other side
  };
  static constexpr int kSlots = 16;
  Guard claim(const Armed& a);  // a free slot for a, or an unwatched guard when all are taken
  // "collective allreduce_sum(float x 17408, rd)", "point-to-point recv ...(N bytes) with rank 1 (world rank 3)"
  std::string describe(const Armed& a) const;
  // SIGTERM while a watchdog runs: recorded, answered by run() (what was waited in, then exit 128 + 15).
  static void install_terminate_handler();
  static void remove_terminate_handler();
  void disarm(uint64_t slot);
  void run();

  double timeout_s_;
  int rank_, world_size_;
  std::string group_;  // " in the pipeline group (world rank 3)"; empty for the world
  std::string peers_;  // " (world rank(s) 2, 3)": the group's other ranks; empty for the world
  TimeoutAction action_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Armed slots_[kSlots] = {};
  bool used_[kSlots] = {};
  bool stop_ = false, fired_ = false;
  std::thread thread_;
};

}  // namespace ringtrain::dist
