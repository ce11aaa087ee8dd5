// GradReducer: averages gradients over the data-parallel ranks, overlapped with backward (PyTorch DDP's
// reducer, in small). The gradient buffer is cut into buckets: contiguous slices, whole parameter views,
// built from the end of the buffer because backward fills it from the end (fc3 first, conv1 last), so
// bucket 0 is ready first. Model::backward's hook runs after every layer; when a bucket's last view is
// reported, the bucket joins a queue, and the hook moves the all-reduce in flight on (non-blocking ring:
// Communicator::start_allreduce_sum / test_allreduce) and starts the next queued bucket when it is done.
// So backward itself drives the communication between its layers, on its own core: by default no extra
// thread, which on a rank with one core could only run when backward stops (measured: a spinning
// communication thread made the wait longer, not shorter). While this rank computes its earlier layers,
// its peers' messages arrive and are picked up at the next layer boundary; what is not complete when
// backward ends (the last bucket at least, conv2 and conv1, whose gradients come last) is finished by
// wait(). Over a slow network that is too seldom: between two boundaries a rank moves no more than its
// sockets' buffers hold, and every ring step waits for both ranks to reach one. progress_interval > 0
// adds a progress thread that sleeps that long between moves (a few microseconds of the core each
// time), so a bucket's messages keep flowing while a long layer computes (--comm-progress thread).
//
// Every rank starts the buckets in the same order (backward runs the same layers everywhere), which the
// collectives need. With overlap off (--no-overlap) the hook does nothing and wait() reduces every
// bucket after backward, in bucket order; each bucket's sum is the same ring either way, so both modes
// give the same bits.
//
// wait() measures how long the step stood still waiting for gradients after backward (the figure that
// overlap exists to shrink); stats() accumulates it.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/ring_allreduce.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::dist {

struct GradReducerOptions {
  // A bucket is closed once it holds at least this many bytes. 128 KiB cuts LeNet-5's 61,706 gradients
  // into 2 buckets: {fc3, fc2, fc1} (236 KiB, ready as soon as backward leaves the linear layers) and
  // {conv2, conv1} (10 KiB, ready when backward ends). Smaller buckets queue behind each other (one
  // all-reduce in flight at a time) and each costs a ring's latency; measured in docs/BENCHMARKS.md.
  std::size_t bucket_bytes = std::size_t(128) << 10;
  bool overlap = true;
  // Optimizer-state sharding (--shard-optimizer, ZeRO stage 1): a bucket is only reduce-scattered (the
  // ring's first half), so each rank ends the step with the averaged gradients of its slice of every
  // bucket (shard_spans()), updates just those parameters, and all_gather() then copies every rank's
  // slice of the updated parameters to all (the ring's second half). The slice's sum is the same ring
  // fold as the whole all-reduce's, so the parameters end bit-identical to an unsharded ring run.
  bool shard = false;
  // > 0: a progress thread moves the buckets in flight on every progress_interval_s while backward
  // computes (see above); 0: only the layer boundaries do. Same bits either way.
  double progress_interval_s = 0;
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
  double comm_s = 0;       // total time spent in all-reduce calls (the hook's tests and wait())
  double gather_s = 0;     // shard mode: total time in all_gather() (the updated parameters)
  // What the buckets' sums (and shard mode's all-gathers) sent from this rank since the warm-up: the
  // bytes our all-reduces posted, and the sums left to MPI_Allreduce, whose bytes are not known.
  std::uint64_t bytes_sent = 0;
  std::int64_t library_sums = 0;
};

// Cuts views (state_dict order, offsets into one buffer) into buckets from the end. Exposed for tests.
std::vector<Bucket> make_buckets(const nn::ParameterSet& params, std::size_t bucket_bytes);

class GradReducer {
 public:
  // params: the model's parameter set (its grads() buffer is reduced in place). comm: the data-parallel
  // group; duplicated here (collective: every rank constructs its GradReducer together), and warmed up
  // with one all-reduce the size of the largest bucket, so the first step does not pay for connection
  // set-up and scratch allocation.
  GradReducer(nn::ParameterSet& params, Communicator& comm, const GradReducerOptions& opt = {});
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;
  ~GradReducer();

  // Pass to Model::backward: model.backward(k, x, dlogits, N, reducer.hook()).
  nn::Model::GradReadyHook hook() {
    return [this](const nn::Layer& layer) { on_grads_ready(layer); };
  }
  // After a layer's backward: marks its gradients ready (none for a layer without parameters), queues
  // completed buckets, and moves the communication on.
  void on_grads_ready(const nn::Layer& layer);
  // Blocks until every bucket is reduced and averaged; returns the seconds it waited. Ends the step.
  double wait();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const GradReducerStats& stats() const { return stats_; }
  // Shard mode: this rank's slice of every bucket, in bucket order (what its optimizer updates); the
  // slices of all ranks tile the buffer. Without sharding: the whole buffer.
  std::vector<optim::Span> shard_spans() const;
  bool sharded() const { return opt_.shard && world_ > 1; }
  // Shard mode: every rank's slices of buf (a buffer laid out as the parameters: the parameters
  // themselves, or an optimizer state buffer spread out to full size) copied to every rank, bucket by
  // bucket. Collective; blocking. Counted in stats().gather_s.
  void all_gather(float* buf);
  int world_size() const { return world_; }
  bool overlap() const { return opt_.overlap; }
  bool progress_thread() const { return progress_.joinable(); }
  // Between steps only (--overlap auto's trial, train/overlap_trial.h): both modes give the same bits.
  void set_overlap(bool on) { opt_.overlap = on; }

 private:
  void begin_step();        // every bucket waiting for its views again, nothing queued or started
  void pump();              // test the bucket in flight; when done, average it and start the next one
  void progress_loop();     // the progress thread: pump() every progress_interval_s while there is work
  void start(int bucket);
  void finish_in_flight();  // wait for the bucket in flight, average it
  void average(int bucket);  // sum / W, once its all-reduce is complete
  void count_traffic();      // stats_.bytes_sent / library_sums from the communicator's counters

  nn::ParameterSet& params_;
  GradReducerOptions opt_;
  int world_ = 1;
  std::unique_ptr<Communicator> comm_;  // the duplicate
  std::vector<Bucket> buckets_;
  std::vector<int> view_bucket_;        // view index -> bucket
  std::vector<int> pending_;            // per bucket: views not yet reported this step
  std::vector<char> view_ready_, started_;
  std::vector<int> ready_;              // buckets in the order they completed this step
  std::size_t next_ready_ = 0;          // ready_[next_ready_] is the next to start
  int in_flight_ = -1;                  // the bucket whose all-reduce is running, or -1
  Communicator::Traffic warmed_up_;     // the duplicate's counters after the warm-up sum
  GradReducerStats stats_;
  // The progress thread (progress_interval_s > 0). mu_ guards everything above that the thread touches
  // (the buckets' state and the communicator, which is one-thread-at-a-time); work_ wakes it when a
  // bucket is queued.
  std::mutex mu_;
  std::condition_variable work_;
  bool stop_ = false;
  std::thread progress_;
};

}  // namespace ringtrain::dist
