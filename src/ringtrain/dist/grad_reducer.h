// GradReducer: averages gradients over the data-parallel ranks, overlapped with backward (PyTorch DDP's
// reducer, in small). The gradient buffer is cut into buckets: contiguous slices, whole parameter views,
// built from the end of the buffer because backward fills it from the end (fc3 first, conv1 last), so
// bucket 0 is ready first. Model::backward's hook reports each layer's gradients; when a bucket's last
// view is reported, its all-reduce is handed to a communication thread at once, and backward goes on
// with earlier layers while the bucket is in flight. The last bucket (conv2, conv1: backward ends with it)
// has nothing left to overlap with: wait() reduces it, and anything not reported, on its own thread once
// the communication thread is idle, and leaves the averaged gradients (sum / W) in the buffer.
//
// Threads: the communication thread owns a duplicate of the communicator (Communicator::duplicate), so
// its traffic never mixes with the main thread's; it is the only thread using that duplicate. Every rank
// launches buckets in the same order (backward runs the same layers everywhere), which collectives need.
// With overlap off (--no-overlap) the hook does nothing and wait() reduces every bucket itself, after
// backward, with the same buckets and the same order, so both modes give the same bits.
//
// wait() measures how long the step stood still waiting for gradients after backward (the figure that
// overlap exists to shrink); stats() accumulates it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/ring_allreduce.h"
#include "ringtrain/nn/model.h"

namespace ringtrain::dist {

struct GradReducerOptions {
  // A bucket is closed once it holds at least this many bytes. 25 KiB cuts LeNet-5's 61,706 gradients
  // into 3 buckets: {fc3, fc2} (43 KiB), {fc1} (188 KiB), {conv2, conv1} (10 KiB).
  std::size_t bucket_bytes = std::size_t(25) << 10;
  bool overlap = true;
  // How the communication thread waits while backward runs (ring_allreduce.h): it shares its rank's core
  // with backward. Once wait() sleeps it waits adaptively (spin 50 us, then yield), as the main thread's
  // own reductions do.
  PollMode poll = PollMode::Yield;
};

struct Bucket {
  std::size_t offset = 0;  // floats into the gradient buffer
  std::size_t count = 0;   // floats, including views' alignment padding (zeros, harmless to sum)
  int first_view = 0, last_view = 0;  // views [first_view, last_view] in state_dict order
};

struct GradReducerStats {
  int64_t steps = 0;
  double wait_s = 0;       // total time wait() blocked (after backward, before the optimizer)
  double last_wait_s = 0;
  double comm_s = 0;       // total time spent inside all-reduce calls (either thread)
};

// Cuts views (state_dict order, offsets into one buffer) into buckets from the end. Exposed for tests.
std::vector<Bucket> make_buckets(const nn::ParameterSet& params, std::size_t bucket_bytes);

class GradReducer {
 public:
  // params: the model's parameter set (its grads() buffer is reduced in place). comm: the data-parallel
  // group; duplicated here (collective: every rank constructs its GradReducer together).
  GradReducer(nn::ParameterSet& params, Communicator& comm, const GradReducerOptions& opt = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Pass to Model::backward: model.backward(k, x, dlogits, N, reducer.hook()).
  nn::Model::GradReadyHook hook() {
    return [this](const nn::Layer& layer) { on_grads_ready(layer); };
  }
  void on_grads_ready(const nn::Layer& layer);
  // Blocks until every bucket is reduced and averaged; returns the seconds it waited. Ends the step.
  double wait();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const GradReducerStats& stats() const { return stats_; }
  int world_size() const { return world_; }
  bool overlap() const { return opt_.overlap; }

 private:
  void launch(int bucket);  // queue for the communication thread (caller holds no lock)
  void reduce(int bucket);  // all-reduce + average, on whichever thread runs it
  void reduce_here(bool only_unlaunched);  // on the calling thread, in bucket order
  void comm_loop();

  nn::ParameterSet& params_;
  GradReducerOptions opt_;
  int world_ = 1;
  std::unique_ptr<Communicator> comm_;  // the duplicate, used by one thread at a time
  std::vector<Bucket> buckets_;
  std::vector<int> view_bucket_;        // view index -> bucket
  std::vector<int> pending_;            // per bucket: views not yet reported this step
  std::vector<char> view_ready_, launched_;

  std::atomic<bool> main_waiting_{false};  // wait() is blocked: the comm thread may spin instead of yield
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::vector<int> queue_;
  std::size_t queue_head_ = 0;
  int done_ = 0;
  bool stop_ = false;
  bool busy_ = false;             // the communication thread is inside a bucket
  bool main_takes_over_ = false;  // wait() runs the rest: the communication thread takes no more
  std::exception_ptr error_;
  double comm_s_thread_ = 0;  // guarded by mu_
  std::thread thread_;
  GradReducerStats stats_;
};

}  // namespace ringtrain::dist
