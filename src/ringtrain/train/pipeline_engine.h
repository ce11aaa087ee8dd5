// PipelineEngine: one pipeline stage's side of a training step (--pp P): the step's micro-batches run
// forward and backward in the schedule's order (train/pipeline_schedule.h); activations go to the next
// stage and their gradients come back by non-blocking point-to-point messages on the pipeline group
// (Communicator::start_send / start_recv, fp32: the receiving stage computes on exactly the bits the
// one-process run has there). The first stage reads the batch, the last computes the loss; every stage
// sums its parameters' gradients over the micro-batches in micro-batch order, the last micro-batch's
// backward reporting each layer to the data-parallel GradReducer (as the one-process --micro-batches run
// does: the same bits).
//
// A model keeps the activations of one forward (nn::Model), while the schedules hold several micro-batches
// between their forward and backward (at most K: P - stage under 1F1B, M under GPipe). So the stage runs
// K copies of its model, built by the caller's factory and sharing the first one's parameters, gradients
// and batch-norm statistics (Model::share_parameters): micro-batch m runs forward and backward on copy
// m mod K, whose activations stay put in between - no forward runs twice. The running statistics move at
// each forward, in micro-batch order, as in the one-process run. Stages after the first also keep each
// micro-batch's received input (the stash) until its backward.
//
// The bubble: the time a stage waits for messages (receives, and sends still in flight when their buffer
// is needed) over the time of the step's schedule, from the second step of the process on (the first pays
// for first-touch allocations).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/loader.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/train/evaluate.h"
#include "ringtrain/train/grad_accumulator.h"
#include "ringtrain/train/pipeline_schedule.h"

namespace ringtrain::train {

// What activations and their gradients travel as: fp32, or under --precision bf16|fp16 the compute dtype
// (half the bytes; the receiver widens them to fp32 again, so the stages compute on rounded boundary values
// where one process keeps fp32: close to, not bit-identical with, the one-process run).
enum class PipeWire { Fp32, Bf16, Fp16 };
const char* pipe_wire_name(PipeWire w);

struct PipelineStats {
  int64_t steps = 0;        // steps timed (all but the process's first)
  double step_s = 0.0;      // time in the schedule's passes and messages
  double idle_s = 0.0;      // of which waiting for messages
  int most_in_flight = 0;   // measured: micro-batches between forward and backward at once
  int64_t bytes_sent = 0;   // training messages' bytes this stage sent (all steps)
  int64_t calls = 0;        // training steps run (all)
  // Each timed step's idle fraction in 0.1% bins: on a shared machine one step the scheduler took the core
  // from (tens of ms) moves the mean by points; the median step shows what the schedule itself leaves idle.
  std::vector<int64_t> idle_permille = std::vector<int64_t>(1001, 0);
  double idle_fraction() const { return step_s > 0 ? idle_s / step_s : 0.0; }
  void add_step(double step_seconds, double idle_seconds);
  double median_step_idle_fraction() const;  // 0 before any timed step
};

// One entry of a stage's trace (--pp-trace): a stretch of a micro-batch's forward or backward pass between
// waits (a pass that waits for its input and, later, for a send buffer is three entries: compute, wait,
// compute), or a wait for a message; times in seconds on the steady clock (CLOCK_MONOTONIC: one timeline
// for all processes of a host).
struct PipeEvent {
  enum Kind { Forward = 0, Backward = 1, Wait = 2 };
  int kind = Forward;
  int stage = 0;
  int micro = -1;      // the micro-batch of a pass, or of the pass a wait happens in (-1: after the passes)
  int in_pass = -1;    // a wait's pass: Forward or Backward (-1: after the passes)
  int64_t step = 0;    // the training step (the engine's call count)
  double begin = 0.0, end = 0.0;
};

class PipelineEngine {
 public:
  // Builds another copy of this rank's stage model (the same layers; its parameters are replaced by the
  // first copy's).
  using StageFactory = std::function<std::unique_ptr<nn::Model>()>;
  // stage: this rank's stage model (nn/pipeline_stages.h); copy_stage: called in_flight() - 1 times;
  // pp: the pipeline group (rank = stage). micro_batches and micro_batch: the step's M and samples per
  // micro-batch (the batch is M x that).
  PipelineEngine(nn::Model& stage, const StageFactory& copy_stage, dist::Communicator& pp, PipeSchedule schedule,
                 int micro_batches, int micro_batch, PipeWire wire = PipeWire::Fp32);
  PipeWire wire() const { return wire_; }

  int stage() const { return s_; }
  int stages() const { return P_; }
  bool last() const { return s_ + 1 == P_; }
  PipeSchedule schedule() const { return schedule_; }
  // The micro-batches this stage's schedule holds at most (<= P - stage for 1F1B, M for GPipe).
  int in_flight() const { return K_; }
  // Bytes of the stash and the message buffers.
  std::size_t buffer_bytes() const;
  // Bytes of the activations and activation gradients of every copy of the stage model.
  std::size_t activation_bytes() const;

  // The last stage's loss of one micro-batch: writes dlogits [n, K] and returns the mean loss.
  using LossFn = std::function<float(const float* logits, const uint8_t* labels, int n, float* dlogits)>;
  // One step's passes over `batch` (M = min(micro_batches, N) micro-batches, cut as micro_batch()).
  // Gradients: with M > 1 summed in `sum`'s order, the last micro-batch's backward reports each layer to
  // `hook` (the GradReducer's; may be empty). Returns the batch's mean loss on every stage (broadcast from
  // the last over the pipeline group).
  float train_step(const ops::KernelTable& k, const data::Batch& batch, uint64_t seed, int64_t step,
                   GradAccumulator* sum, const nn::Model::GradReadyHook& hook, const LossFn& loss);
  // evaluate() through the stages: the data-parallel group's shards, batches passed stage to stage, the
  // counts on the last stage, then on every rank (broadcast over the pipeline group, summed over dp).
  EvalResult evaluate(const ops::KernelTable& k, const data::Split& split, dist::Communicator& dp);

  const PipelineStats& stats() const { return stats_; }
  // Keep the passes and waits of the last `steps` training steps (0: none, the default).
  void set_trace_steps(int steps) { trace_steps_ = steps; }
  // The kept events, oldest step first.
  std::vector<PipeEvent> trace() const;

 private:
  struct Slot {  // one micro-batch in flight
    AlignedBuffer<float> in, out, dout, din;  // stash (s > 0), activation out, its gradient in, input gradient out
    std::vector<uint16_t> in16, out16, dout16, din16;  // the same on a 16-bit wire
    dist::Communicator::Request recv_in = -1, send_out = -1, recv_dout = -1, send_din = -1;
  };
  // input: the wait for the pass's input (activations, or their gradient), before any computing (the trace
  // starts the pass after it).
  void wait(dist::Communicator::Request& r, bool input = false);
  void poke();  // tests the sends in flight (MPI progresses messages only inside its calls)
  // Starts sending n floats of src (through buf16 on a 16-bit wire); the buffer must stay until it is gone.
  dist::Communicator::Request send(const float* src, float* buf, std::vector<uint16_t>& buf16, std::size_t n, int peer,
                                   int tag, const char* what);
  // Starts receiving n floats into dst (into buf16 on a 16-bit wire: widen() it once complete).
  dist::Communicator::Request recv(float* dst, std::vector<uint16_t>& buf16, std::size_t n, int peer, int tag,
                                   const char* what);
  void widen(float* dst, const std::vector<uint16_t>& buf16, std::size_t n) const;
  void post_receives(int M, int n);
  void forward(const ops::KernelTable& k, const data::Batch& batch, int m, int M, uint64_t seed, int64_t step,
               const LossFn& loss, double& loss_sum);
  void backward(const ops::KernelTable& k, const data::Batch& batch, int m, int M, uint64_t seed, int64_t step,
                GradAccumulator* sum, const nn::Model::GradReadyHook& hook);
  const float* input_of(const data::Batch& batch, int m, int M);

  nn::Model& model_;                               // the first copy: parameters, evaluation
  std::vector<std::unique_ptr<nn::Model>> copies_;  // the other K - 1
  std::vector<nn::Model*> models_;                  // models_[m % K]: micro-batch m's copy
  dist::Communicator& pp_;
  PipeSchedule schedule_;
  PipeWire wire_;
  int P_, s_, M_, K_, micro_;
  std::size_t in_numel_, out_numel_, input_pixels_;
  std::vector<Slot> slots_;
  AlignedBuffer<float> dlogits_;     // last stage: the step's dlogits, micro-batch m at its samples
  int next_recv_ = 0, backwards_done_ = 0, held_ = 0;
  double idle_ = 0.0;
  int64_t calls_ = 0;
  PipelineStats stats_;
  int trace_steps_ = 0;
  int tracing_micro_ = -1, tracing_pass_ = -1;  // the pass running now (for its waits)
  double segment_begin_ = 0.0;                   // where the pass's current stretch of computing began
  std::vector<std::vector<PipeEvent>> trace_;  // the last trace_steps_ steps' events
  void record(int kind, int micro, int in_pass, double begin, double end);
};

}  // namespace ringtrain::train
