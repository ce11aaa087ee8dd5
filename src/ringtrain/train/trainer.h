// The training loop: per-epoch shuffle, batches normalised to [0,1], forward, softmax cross-entropy,
// backward with gradients averaged over the data-parallel world by a GradReducer (bucketed all-reduces
// started while backward runs), optimizer step on the fp32 master weights, evaluation on the test split after each epoch, a log line every log_every batches.
// Same configuration and seed -> the same weights, bit for bit (with --allreduce auto on 3+ ranks, the same
// calibration too, e.g. one --allreduce-calibration file: the plan fixes the order of the additions).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>

#include "ringtrain/data/dataset.h"
#include "ringtrain/data/loader.h"
#include "ringtrain/dist/allreduce_cost_model.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/half_allreduce.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/loss_scaler.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/optim/schedule.h"
#include "ringtrain/train/evaluate.h"
#include "ringtrain/train/grad_accumulator.h"
#include "ringtrain/train/pipeline_engine.h"

namespace ringtrain::dist {
class ProcessGrid;
}

namespace ringtrain::train {

struct TrainConfig {
  int epochs = 10;
  int batch_size = 64;            // per rank; the global batch is batch_size x world size
  double lr = 1e-3;
  std::string optimizer = "adam"; // adam | sgd
  double momentum = 0.9;          // sgd only
  double weight_decay = 0.0;
  uint64_t seed = 0;              // initial weights and the per-epoch shuffle
  int log_every = 100;            // batches between log lines (0: never)
  int64_t max_steps = 0;          // stop after this many steps in total (0: no limit)
  bool eval_each_epoch = true;
  int workers = 1;                // loader threads preparing batches ahead (0: on the step's thread)
  int prefetch = 4;               // batches prepared ahead
  int augment_shift = 0;          // random shift of training samples, pixels (0: none)
  // The training recipe beyond the optimizer (docs/RECIPE.md). Neutral here (plain torch.optim training);
  // `ringtrain train` sets its own defaults.
  std::string lr_schedule = "constant";  // constant | linear | cosine | step (optim/schedule.h)
  double lr_decay_epochs = 0.0;          // the schedule's decay covers the last this many epochs (0: all)
  double lr_min_factor = 0.0;            // where the decay ends (step: the factor during the decay)
  double ema = 0.0;                      // decay of an average of the weights used for evaluation (0: off)
  double label_smoothing = 0.0;          // targets (1 - eps) one-hot + eps / K (0: plain cross-entropy)
  std::string metrics_path;       // JSON lines, one a log step and one an epoch (rank 0); empty: none
  bool terminal = false;          // draw a progress bar (stdout is a terminal) instead of log lines
  bool quiet = false;             // only the epoch summaries
  bool drop_last = false;         // sampler: drop the tail that does not divide by the world size
  dist::GradReducerOptions reducer;  // gradient buckets and overlap (data-parallel runs)
  std::string checkpoint_dir;     // periodic checkpoints go here (empty: none)
  int64_t checkpoint_every = 0;   // steps between checkpoints (0: only at the end, when a dir is given)
  int keep_checkpoints = 3;       // newest checkpoints kept in the directory
  bool resume = false;            // continue from the newest valid checkpoint in checkpoint_dir
  std::map<std::string, std::string> checkpoint_metadata;  // stored in every checkpoint
  // Mixed precision (docs/MIXED_PRECISION.md). The kernel table passed to the Trainer decides the compute
  // precision (ops::kernels_for(level, precision)); fp16 here turns on dynamic loss scaling.
  std::string precision = "fp32";   // fp32 | bf16 | fp16
  std::string grad_comm = "fp32";   // gradients on the wire: fp32 | bf16 | fp16 (W > 1)
  // --shard-optimizer (ZeRO stage 1): each data-parallel rank keeps and updates the optimizer state of
  // its 1/W slice only (dist::GradReducerOptions::shard); the same bits as the unsharded ring (W > 1).
  bool shard_optimizer = false;
  // --overlap auto|on|off: auto times a few steps each way and keeps the faster (train/overlap_trial.h).
  // Decides the reducer's mode (reducer.overlap is not read).
  std::string overlap = "auto";
  // --micro-batches M: each step's per-rank batch is cut into M micro-batches run forward and backward one
  // after another, their gradients summed (each scaled by 1/batch, so the sum is the batch mean), then one
  // optimizer step. Batch norm sees each micro-batch alone (GPipe). The data-parallel all-reduce runs once,
  // overlapping the last micro-batch's backward. Must divide batch_size.
  int micro_batches = 1;
  // --pp-schedule gpipe|1f1b: the order of the micro-batches' passes on each pipeline stage (--pp > 1;
  // train/pipeline_schedule.h). The messages between stages carry `precision`'s dtype (PipeWire).
  std::string pp_schedule = "1f1b";
  // --pp-trace: each stage keeps its passes and message waits of the last this many steps (0: none), for
  // the report's trace (train/pipeline_trace.h).
  int pp_trace_steps = 0;
};

// --pp: each stage's measured bubble and what it held, gathered over the pipeline group at the end of fit().
struct PipelineReport {
  std::string schedule;
  int stages = 0, micro_batches = 0;
  double ideal_bubble = 0.0;             // (P-1)/(M+P-1)
  std::vector<double> idle_fraction;     // per stage: time waiting for messages / schedule time
  std::vector<double> median_step_idle;  // per stage: the median step's idle fraction
  std::vector<double> step_ms;           // per stage: the schedule's time a step
  std::vector<int64_t> in_flight;        // per stage: micro-batches its schedule holds at most
  std::vector<int64_t> measured_in_flight;
  std::string wire;                      // what the messages carry: fp32, bf16 or fp16 (--precision)
  std::vector<int64_t> bytes_per_step;   // per stage: training message bytes it sends a step
  std::vector<PipeEvent> trace;          // --pp-trace: every stage's kept passes and waits
};

// Where this rank's training steps spent their wall time (seconds summed over the steps of this process):
// the batch from the loader (its wait, or its whole preparation under --workers 0), the forward passes, the
// loss, the backward passes (the wait for the gradients' all-reduce included), the optimizer (loss scaling's
// check, Adam, the EMA, --shard-optimizer's gather). Under --micro-batches each part sums its micro-batches.
// Under --pp the stages' passes interleave with the schedule's messages: only the whole step is kept there.
struct StepParts {
  int64_t steps = 0;
  double total = 0, data = 0, forward = 0, loss = 0, backward = 0, optimizer = 0;
  bool split = true;  // false under --pp (set by fit): forward, loss and backward are not separated
};

struct TrainResult {
  int64_t steps = 0;
  double last_loss = 0.0;
  EvalResult test;
  double train_seconds = 0.0;
  double samples_per_second = 0.0;  // global training samples per second (all ranks)
  double data_wait_fraction = 0.0;  // share of training time the step waited for a batch
  double grad_wait_ms_per_step = 0.0;  // time a step waited for gradients after backward (W > 1)
  double allreduce_seconds = 0.0;      // total time inside gradient all-reduces (W > 1)
  double allreduce_ms_per_step = 0.0;  // the same per step of this process (W > 1)
  int gradient_buckets = 0;            // buckets the gradients were all-reduced in (W > 1)
  double param_gather_ms_per_step = 0.0;  // --shard-optimizer: the updated parameters' all-gather
  bool overlap_kept = true;            // W > 1: the mode the run ended in (--overlap auto's choice)
  // W > 1: bytes this rank's gradient all-reduces (and --shard-optimizer's all-gathers) sent a step,
  // counted as our algorithms post them; sums run by MPI_Allreduce instead are counted, not their bytes.
  double allreduce_bytes_per_step = 0.0;
  double allreduce_library_sums_per_step = 0.0;
  int64_t skipped_steps = 0;           // fp16: steps skipped for inf/NaN gradients
  float loss_scale = 1.0f;             // fp16: the final loss scale
  PipelineReport pipeline;             // --pp > 1
  StepParts step_parts;                // this rank's steps, part by part
};

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, std::size_t n);

// The recipe's settings (--ema, --label-smoothing, the learning-rate schedule) checked, with one-line
// errors naming the option. The Trainer checks them when it is built; the train command calls it before
// any data is read.
void check_recipe(const TrainConfig& config);
// --micro-batches at least 1 and dividing --batch-size, with one-line errors.
void check_micro_batches(const TrainConfig& config);

class Trainer {
 public:
  Trainer(const TrainConfig& config, nn::Model& model, const ops::KernelTable& kernels,
          dist::Communicator& comm, std::ostream& log);

  // Trains on train_split, evaluating on test_split after each epoch; returns the final figures.
  TrainResult fit(const data::Split& train_split, const data::Split& test_split);
  optim::Optimizer& optimizer() { return *optimizer_; }
  // The optimizer a checkpoint writes: this one, or under --shard-optimizer the whole state gathered
  // from every rank's slices into `gathered` (collective over the data-parallel group: every rank calls it).
  optim::Optimizer* optimizer_for_checkpoint(std::unique_ptr<optim::Optimizer>& gathered);
  bool sharded() const { return reducer_ && reducer_->sharded(); }
  // Tensor parallelism (--tp > 1; before fit()): the model's fc layers are split over grid's tensor group
  // and the communicator given to the constructor must be grid's data-parallel group (sampler, gradient
  // average, evaluation all run over it). Checkpoints are then gathered/split (train/tp_checkpoint.h),
  // only world rank 0 logs, fp16 skips are agreed over the whole world, and the replicated parameters are
  // checked bit-identical across the tensor group after each evaluation.
  // Pipeline parallelism (--pp > 1): the model is this rank's stage (nn/pipeline_stages.h) and every step
  // runs through a PipelineEngine on grid's pipeline group; checkpoints gather every stage's tensors.
  // copy_stage (--pp > 1): builds another copy of this rank's stage model (PipelineEngine::StageFactory).
  void set_process_grid(dist::ProcessGrid* grid, const PipelineEngine::StageFactory& copy_stage = {});
  const PipelineEngine* pipeline() const { return pipeline_.get(); }
  // --allreduce auto (before fit()): the model the communicator picks each bucket's algorithm by (shared
  // with it). Every periodic checkpoint records it (trainer.allreduce_calibration) and the plan it gives
  // (trainer.allreduce_plan); a resumed run on the same world takes the checkpoint's model instead of its
  // own fresh calibration, so every bucket keeps its algorithm, hence its order of additions and its bits.
  void set_allreduce_model(std::shared_ptr<dist::AllreduceCostModel> model) { allreduce_model_ = std::move(model); }

 private:
  // One step (the run's step_index-th, counting from 0) on a prepared batch; returns the batch loss.
  float step(const data::Batch& batch, int64_t step_index);
  // The step's update from the gradients: fp16's unscale and inf/NaN check (a skipped step changes nothing),
  // the optimizer, the EMA, --shard-optimizer's gather.
  void update_parameters();
  // This rank's sample indices for an epoch, in the order they are trained on, starting at position
  // `offset` of the epoch's global (all-rank) order: after k steps of W ranks x B samples, offset = k*W*B.
  std::vector<int64_t> epoch_indices(int64_t dataset_size, int epoch, int64_t offset) const;
  // Where a resumed run continues: the step count, the epoch and the global offset inside it.
  struct Position {
    int64_t step = 0;
    int epoch = 0;
    int64_t offset = 0;
  };
  Position resume_from(const class CheckpointDir& dir, int64_t dataset_size);
  void save_periodic(const class CheckpointDir& dir, const Position& at);
  void restore_allreduce_model(const std::map<std::string, std::string>& md, const std::string& path);
  bool is_logger() const;
  // --ema: swaps the weights with their average (twice: back again); evaluation runs on the average.
  void swap_ema();
  // Under --shard-optimizer: every rank's updated slices of the parameters to every rank (after a step,
  // or after the EMA swapped its slices in). Otherwise nothing.
  void gather_parameters();
  bool tensor_parallel() const;
  bool pipeline_parallel() const { return pipeline_ != nullptr; }
  // The mean loss of n samples of a batch of N (its logits), their logit gradients into dlogits (scaled by
  // loss_scale / N, label smoothing applied).
  float micro_loss(const float* logits, const uint8_t* labels, int n, int N, float loss_scale, float* dlogits);
  EvalResult evaluate_test(const data::Split& test_split);
  PipelineReport pipeline_report();
  void load_state(const std::string& path);  // weights + optimizer state, cut into shards under --tp

  TrainConfig config_;
  nn::Model& model_;
  const ops::KernelTable& kernels_;
  dist::Communicator& comm_;
  std::ostream& log_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<dist::HalfGradCommunicator> grad_comm_;  // --grad-comm bf16|fp16 (W > 1)
  std::unique_ptr<dist::GradReducer> reducer_;  // only when the world has more than one rank
  std::unique_ptr<optim::LossScaler> scaler_;   // --precision fp16
  int64_t step_calls_ = 0;                      // steps run by this process (fault injection)
  StepParts parts_;                             // the steps' wall time by part (step() adds to it)
  dist::ProcessGrid* grid_ = nullptr;           // --tp > 1 (set_process_grid)
  std::shared_ptr<dist::AllreduceCostModel> allreduce_model_;  // --allreduce auto (set_allreduce_model)
  AlignedBuffer<float> dlogits_, probs_;
  // --micro-batches > 1: the gradients of a step's earlier micro-batches, summed (train/grad_accumulator.h).
  std::unique_ptr<GradAccumulator> grad_sum_;
  std::unique_ptr<PipelineEngine> pipeline_;  // --pp > 1 (set_process_grid)
  optim::LrSchedule schedule_;
};

}  // namespace ringtrain::train
