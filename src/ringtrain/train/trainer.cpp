#include "ringtrain/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>
#include <ostream>
#include <sstream>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/data/distributed_sampler.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/checkpoint_dir.h"
#include "ringtrain/train/metrics.h"
#include "ringtrain/train/optimizer_shards.h"
#include "ringtrain/train/overlap_trial.h"
#include "ringtrain/train/progress.h"
#include "ringtrain/train/pipeline_trace.h"
#include "ringtrain/train/pp_checkpoint.h"
#include "ringtrain/train/tp_checkpoint.h"

namespace ringtrain::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0, double e = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d, e);
  return buf;
}
// Fault injection for the kill-and-resume tests: RINGTRAIN_FAULT_KILL="RANK:STEP" makes that rank
// SIGKILL itself right after that step of a run that did not resume (so a restarted job runs through).
// RINGTRAIN_FAULT_HANG="RANK:STEP" makes that rank stop for good after that step (a hung peer: the others
// must end the job through the watchdog, naming it).
struct FaultInjection {
  int rank = -1;
  int64_t step = -1;
  int hang_rank = -1;
  int64_t hang_step = -1;
};
FaultInjection fault_injection_from_env() {
  FaultInjection f;
  if (const char* v = std::getenv("RINGTRAIN_FAULT_HANG")) {
    long long rank = -1, step = -1;
    check(std::sscanf(v, "%lld:%lld", &rank, &step) == 2 && rank >= 0 && step >= 1,
          std::string("RINGTRAIN_FAULT_HANG must be RANK:STEP, got '") + v + "'");
    f.hang_rank = int(rank);
    f.hang_step = step;
  }
  if (const char* v = std::getenv("RINGTRAIN_FAULT_KILL")) {
    long long rank = -1, step = -1;
    check(std::sscanf(v, "%lld:%lld", &rank, &step) == 2 && rank >= 0 && step >= 1,
          std::string("RINGTRAIN_FAULT_KILL must be RANK:STEP, got '") + v + "'");
    f.rank = int(rank);
    f.step = step;
  }
  return f;
}
}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, std::size_t n) {
  if (config.optimizer == "adam") {
    optim::AdamOptions o;
    o.lr = float(config.lr);
    o.weight_decay = float(config.weight_decay);
    return std::make_unique<optim::Adam>(n, o);
  }
  if (config.optimizer == "sgd") {
    optim::SgdOptions o;
    o.lr = float(config.lr);
    o.momentum = float(config.momentum);
    o.weight_decay = float(config.weight_decay);
    return std::make_unique<optim::Sgd>(n, o);
  }
  throw Error("optimizer '" + config.optimizer + "' is not one of adam, sgd");
}

static optim::LrSchedule lr_schedule_of(const TrainConfig& config) {
  optim::LrSchedule s;
  s.kind = config.lr_schedule;
  s.base_lr = config.lr;
  s.epochs = config.epochs;
  s.decay_epochs = config.lr_decay_epochs;
  s.min_factor = config.lr_min_factor;
  return s;
}

void check_recipe(const TrainConfig& config) {
  auto text = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  check(config.ema == 0.0 || (config.ema > 0.0 && config.ema < 1.0), "--ema must be 0 (off) or in (0, 1), got " + text(config.ema));
  check(config.label_smoothing >= 0.0 && config.label_smoothing < 1.0,
        "--label-smoothing must be in [0, 1), got " + text(config.label_smoothing));
  optim::check_schedule(lr_schedule_of(config));
}

void check_micro_batches(const TrainConfig& config) {
  check(config.micro_batches >= 1, "--micro-batches must be at least 1, got " + std::to_string(config.micro_batches));
  check(config.batch_size % config.micro_batches == 0,
        "--micro-batches " + std::to_string(config.micro_batches) + " does not divide --batch-size " +
            std::to_string(config.batch_size) + " (every micro-batch holds the same number of samples)");
}

Trainer::Trainer(const TrainConfig& config, nn::Model& model, const ops::KernelTable& kernels,
                 dist::Communicator& comm, std::ostream& log)
    : config_(config), model_(model), kernels_(kernels), comm_(comm), log_(log) {
  check(config.batch_size > 0, "--batch-size must be positive, got " + std::to_string(config.batch_size));
  check(config.epochs > 0, "--epochs must be positive, got " + std::to_string(config.epochs));
  check(config.lr > 0, "--lr must be positive");
  check(!config.shard_optimizer || config.grad_comm == "fp32",
        "--shard-optimizer needs --grad-comm fp32 (the 16-bit ring has no reduce-scatter), got --grad-comm " +
            config.grad_comm);
  if (comm_.size() > 1) {
    // Every rank starts from rank 0's weights, whatever initialised them.
    nn::ParameterSet& p = model_.params();
    comm_.broadcast(p.params(), p.size() * sizeof(float), 0);
    // And its buffers (batch norm's running statistics; each rank then keeps its own, as PyTorch's
    // BatchNorm2d does under DistributedDataParallel without SyncBatchNorm).
    if (p.buffer_floats()) comm_.broadcast(p.buffers(), p.buffer_floats() * sizeof(float), 0);
    if (p.counter_count()) comm_.broadcast(p.counters(), p.counter_count() * sizeof(int64_t), 0);
    const dist::GradComm wire = dist::parse_grad_comm(config.grad_comm);
    if (wire != dist::GradComm::Fp32) grad_comm_ = std::make_unique<dist::HalfGradCommunicator>(comm_, wire);
    dist::GradReducerOptions reducer_options = config.reducer;
    reducer_options.shard = config.shard_optimizer;
    reducer_options.overlap = parse_overlap(config.overlap) != OverlapPolicy::Off;
    reducer_ = std::make_unique<dist::GradReducer>(p, grad_comm_ ? static_cast<dist::Communicator&>(*grad_comm_) : comm_,
                                                   reducer_options);
  }
  // Under --shard-optimizer the state covers this rank's slices only (one span, the whole buffer, otherwise).
  const std::vector<optim::Span> spans = reducer_ ? reducer_->shard_spans() : std::vector<optim::Span>{{0, model.params().size()}};
  std::size_t state_floats = 0;
  for (const optim::Span& s : spans) state_floats += s.count;
  optimizer_ = make_optimizer(config, state_floats);
  optimizer_->set_spans(spans);
  if (auto* adam = dynamic_cast<optim::Adam*>(optimizer_.get())) adam->use_kernels(kernels);
  // The recipe (docs/RECIPE.md): the average starts at the (broadcast or --init-from) weights; a resumed
  // run replaces it with the checkpoint's "optim.ema" tensors.
  check_recipe(config);
  parse_overlap(config.overlap);  // a one-line error now rather than at the first step
  if (config.ema > 0.0) optimizer_->enable_ema(float(config.ema), model_.params().params());
  schedule_ = lr_schedule_of(config);
  check(config.precision == "fp32" || config.precision == "bf16" || config.precision == "fp16",
        "--precision must be fp32, bf16 or fp16, got '" + config.precision + "'");
  if (config.precision == "fp16") scaler_ = std::make_unique<optim::LossScaler>();
  check_micro_batches(config);
  model_.reserve(config.batch_size / config.micro_batches);  // activations for one micro-batch at a time
  if (config.micro_batches > 1) grad_sum_ = std::make_unique<GradAccumulator>(model.params(), kernels_);
  dlogits_.resize(std::size_t(config.batch_size) * model.num_classes());
  probs_.resize(std::size_t(config.batch_size) * model.num_classes());
}

std::vector<int64_t> Trainer::epoch_indices(int64_t dataset_size, int epoch, int64_t offset) const {
  // PyTorch's DistributedSampler: one permutation per epoch from seed + epoch, shared by all ranks;
  // this rank takes every W-th position. One rank gets the whole permutation.
  data::DistributedSamplerOptions o;
  o.seed = config_.seed;
  o.drop_last = config_.drop_last;
  o.stream = 0x5eed5eedULL;
  data::DistributedSampler sampler(dataset_size, comm_.size(), comm_.rank(), o);
  sampler.set_epoch(epoch);
  if (offset == 0) return sampler.indices();
  // Resumed mid-epoch (possibly at another world size): the rest of the global order from `offset`,
  // dealt out round-robin; padded from the rest's start so every rank gets the same count (and so runs
  // the same number of steps).
  const std::vector<int64_t> global = sampler.global_indices();
  const int64_t W = comm_.size(), rest = std::max<int64_t>(0, int64_t(global.size()) - offset);
  if (rest == 0) return {};
  const int64_t per_rank = (rest + W - 1) / W;
  std::vector<int64_t> mine;
  for (int64_t i = 0; i < per_rank; ++i) mine.push_back(global[offset + (i * W + comm_.rank()) % rest]);
  return mine;
}

void Trainer::swap_ema() {
  if (!optimizer_->has_ema()) return;
  optimizer_->swap_ema(model_.params().params());
  gather_parameters();
}

void Trainer::gather_parameters() {
  if (sharded()) reducer_->all_gather(model_.params().params());
}

optim::Optimizer* Trainer::optimizer_for_checkpoint(std::unique_ptr<optim::Optimizer>& gathered) {
  if (!sharded()) return optimizer_.get();
  gathered = gather_optimizer_state(*optimizer_, *reducer_, model_.params().size());
  return gathered.get();
}

bool Trainer::tensor_parallel() const { return grid_ && grid_->tp() > 1; }
// Under --tp / --pp the data-parallel rank 0 of every tensor and pipeline group would qualify: only world
// rank 0 logs (every stage knows the loss: the pipeline broadcasts it).
bool Trainer::is_logger() const {
  return comm_.rank() == 0 && (!grid_ || (grid_->tp_rank() == 0 && grid_->pp_rank() == 0));
}

void Trainer::set_process_grid(dist::ProcessGrid* grid, const PipelineEngine::StageFactory& copy_stage) {
  grid_ = grid;
  if (!grid_ || grid_->pp() == 1) return;
  check(config_.micro_batches == 1 || grad_sum_ != nullptr, "pipeline: no gradient accumulator");
  // Under --precision bf16|fp16 activations and their gradients cross in that dtype (half the bytes).
  const PipeWire wire = config_.precision == "bf16"   ? PipeWire::Bf16
                        : config_.precision == "fp16" ? PipeWire::Fp16
                                                      : PipeWire::Fp32;
  pipeline_ = std::make_unique<PipelineEngine>(model_, copy_stage, grid_->pp_comm(), parse_pp_schedule(config_.pp_schedule),
                                               config_.micro_batches, config_.batch_size / config_.micro_batches, wire);
  pipeline_->set_trace_steps(config_.pp_trace_steps);
}

EvalResult Trainer::evaluate_test(const data::Split& test_split) {
  if (pipeline_) return pipeline_->evaluate(kernels_, test_split, comm_);
  return evaluate(model_, kernels_, test_split, comm_);
}

PipelineReport Trainer::pipeline_report() {
  PipelineReport r;
  if (!pipeline_) return r;
  const int P = pipeline_->stages(), s = pipeline_->stage();
  const PipelineStats& st = pipeline_->stats();
  r.schedule = pp_schedule_name(pipeline_->schedule());
  r.stages = P;
  r.micro_batches = config_.micro_batches;
  r.ideal_bubble = ideal_bubble(P, config_.micro_batches);
  r.idle_fraction.assign(std::size_t(P), 0.0);
  r.median_step_idle.assign(std::size_t(P), 0.0);
  r.step_ms.assign(std::size_t(P), 0.0);
  r.in_flight.assign(std::size_t(P), 0);
  r.measured_in_flight.assign(std::size_t(P), 0);
  r.wire = pipe_wire_name(pipeline_->wire());
  r.bytes_per_step.assign(std::size_t(P), 0);
  r.bytes_per_step[std::size_t(s)] = st.calls ? st.bytes_sent / st.calls : 0;
  r.idle_fraction[std::size_t(s)] = st.idle_fraction();
  r.median_step_idle[std::size_t(s)] = st.median_step_idle_fraction();
  r.step_ms[std::size_t(s)] = st.steps ? 1000.0 * st.step_s / double(st.steps) : 0.0;
  r.in_flight[std::size_t(s)] = pipeline_->in_flight();
  r.measured_in_flight[std::size_t(s)] = st.most_in_flight;
  dist::Communicator& pp = grid_->pp_comm();  // every stage contributes its own entries
  pp.allreduce_sum(r.idle_fraction.data(), r.idle_fraction.size());
  pp.allreduce_sum(r.median_step_idle.data(), r.median_step_idle.size());
  pp.allreduce_sum(r.step_ms.data(), r.step_ms.size());
  pp.allreduce_sum(r.in_flight.data(), r.in_flight.size());
  pp.allreduce_sum(r.measured_in_flight.data(), r.measured_in_flight.size());
  pp.allreduce_sum(r.bytes_per_step.data(), r.bytes_per_step.size());
  if (config_.pp_trace_steps > 0) r.trace = gather_pipe_events(pipeline_->trace(), pp);
  return r;
}

void Trainer::load_state(const std::string& path) {
  // Under --shard-optimizer the whole state is read and this rank keeps its slices.
  std::unique_ptr<optim::Optimizer> whole =
      sharded() ? optimizer_like(*optimizer_, model_.params().size()) : std::unique_ptr<optim::Optimizer>();
  optim::Optimizer& target = whole ? *whole : *optimizer_;
  if (pipeline_parallel()) {  // this stage's tensors (its shards of them under --tp), buffers too
    load_grid_weights(path, model_);
    load_sharded_optimizer_state(path, target, model_);
  } else if (tensor_parallel()) {
    load_sharded_weights(path, model_);
    load_sharded_optimizer_state(path, target, model_);
  } else {
    load_weights(path, model_);
    load_optimizer_state(path, target, model_);
  }
  if (whole) take_optimizer_shard(*whole, *optimizer_);
}

Trainer::Position Trainer::resume_from(const CheckpointDir& dir, int64_t dataset_size) {
  // Rank 0 picks the newest checkpoint that loads completely (skipping damaged ones, saying so); every
  // rank then loads that same file, so all continue from identical weights and optimizer state.
  int64_t chosen_step = -1;
  if (comm_.rank() == 0) {
    const std::string path = dir.latest_valid(
        [&](const std::string& p) {
          auto md = read_checkpoint_metadata(p);
          check(md.count("trainer.step") && md.count("trainer.epoch") && md.count("trainer.epoch_offset"),
                p + ": not a periodic checkpoint (no trainer state)");
          load_state(p);
        },
        [&](const std::string& warning) { log_ << warning << std::endl; });
    if (!path.empty()) chosen_step = std::stoll(read_checkpoint_metadata(path).at("trainer.step"));
  }
  comm_.broadcast(&chosen_step, sizeof chosen_step, 0);
  Position at;
  if (chosen_step < 0) {
    if (is_logger()) log_ << "resume: no valid checkpoint in " << dir.dir() << ", starting from scratch" << std::endl;
    return at;
  }
  const std::string path = dir.path_for(chosen_step);
  if (comm_.rank() != 0) load_state(path);
  auto md = read_checkpoint_metadata(path);
  at.step = std::stoll(md.at("trainer.step"));
  at.epoch = std::stoi(md.at("trainer.epoch"));
  at.offset = std::stoll(md.at("trainer.epoch_offset"));
  if (scaler_ && md.count("trainer.loss_scale"))
    scaler_->set_state(std::stof(md.at("trainer.loss_scale")),
                       md.count("trainer.loss_scale_growth_tracker") ? std::stoi(md.at("trainer.loss_scale_growth_tracker")) : 0);
  check(md.count("trainer.seed") == 0 || std::stoull(md.at("trainer.seed")) == config_.seed,
        path + ": was written with --seed " + md["trainer.seed"] + ", this run has --seed " +
            std::to_string(config_.seed) + " (resume with the same seed)");
  restore_allreduce_model(md, path);
  if (is_logger())
    log_ << "resumed from " << path << ": step " << at.step << ", epoch " << at.epoch + 1 << " at sample "
         << at.offset << " of " << dataset_size << " (written by " << md["trainer.world_size"] << " rank(s))"
         << std::endl;
  return at;
}

void Trainer::restore_allreduce_model(const std::map<std::string, std::string>& md, const std::string& path) {
  // Every rank reads the same file, so every rank ends with the same model.
  const auto it = md.find("trainer.allreduce_calibration");
  if (!allreduce_model_ || !reducer_ || it == md.end()) return;
  const dist::AllreduceCostModel saved =
      dist::AllreduceCostModel::from_json(it->second, path + " (trainer.allreduce_calibration)");
  if (saved.world_size != allreduce_model_->world_size || saved.hosts != allreduce_model_->hosts) {
    if (is_logger())
      log_ << "resume: " << path << " was calibrated on " << saved.world_size << " rank(s) on " << saved.hosts
           << " host(s); keeping this run's all-reduce plan: "
           << dist::plan_text(*allreduce_model_, reducer_->buckets(), config_.reducer.bucket_bytes) << std::endl;
    return;
  }
  *allreduce_model_ = saved;
  if (is_logger())
    log_ << "resume: all-reduce plan from the checkpoint: "
         << dist::plan_text(*allreduce_model_, reducer_->buckets(), config_.reducer.bucket_bytes) << std::endl;
}

void Trainer::save_periodic(const CheckpointDir& dir, const Position& at) {
  // Under --shard-optimizer every rank takes part (the state's slices are gathered over the data-parallel
  // group); under --tp too (the shards are gathered over each tensor group); world rank 0 writes.
  std::unique_ptr<optim::Optimizer> gathered;
  optim::Optimizer* optimizer = optimizer_for_checkpoint(gathered);
  if (comm_.rank() == 0 || tensor_parallel() || pipeline_parallel()) {
    std::map<std::string, std::string> md = config_.checkpoint_metadata;
    md["trainer.step"] = std::to_string(at.step);
    md["trainer.epoch"] = std::to_string(at.epoch);
    md["trainer.epoch_offset"] = std::to_string(at.offset);
    md["trainer.seed"] = std::to_string(config_.seed);
    md["trainer.world_size"] = std::to_string(comm_.size());
    md["trainer.shard_optimizer"] = sharded() ? "1" : "0";  // for the record: the file holds whole tensors either way
    md["trainer.batch_size"] = std::to_string(config_.batch_size);
    md["trainer.lr_schedule"] = config_.lr_schedule;  // for the record; the rate is a function of the position
    md["trainer.ema"] = std::to_string(config_.ema);
    md["trainer.label_smoothing"] = std::to_string(config_.label_smoothing);
    if (scaler_) {  // fp16: torch GradScaler's state, so a resumed run keeps its loss scale
      char scale[32];
      std::snprintf(scale, sizeof scale, "%.9g", double(scaler_->scale()));
      md["trainer.loss_scale"] = scale;
      md["trainer.loss_scale_growth_tracker"] = std::to_string(scaler_->growth_tracker());
    }
    if (allreduce_model_ && reducer_) {
      md["trainer.allreduce_calibration"] = allreduce_model_->to_json();
      md["trainer.allreduce_plan"] = dist::plan_text(*allreduce_model_, reducer_->buckets(), config_.reducer.bucket_bytes);
    }
    if (pipeline_parallel()) {  // every stage's tensors gathered (their shards first under --tp)
      md["trainer.tp"] = std::to_string(grid_->tp());
      md["trainer.pp"] = std::to_string(grid_->pp());
      save_grid_checkpoint(dir.path_for(at.step), model_, optimizer, md, *grid_);
    } else if (tensor_parallel()) {
      md["trainer.tp"] = std::to_string(grid_->tp());
      save_sharded_checkpoint(dir.path_for(at.step), model_, optimizer, md, *grid_);
    } else {
      save_checkpoint(dir.path_for(at.step), model_, optimizer, md);
    }
    if (is_logger()) dir.prune();
  }
  // Nobody runs ahead of a checkpoint being written (a killed rank then never loses one in flight).
  comm_.barrier();
  if (tensor_parallel()) grid_->tp_comm().barrier();
  if (pipeline_parallel()) grid_->pp_comm().barrier();
}

float Trainer::micro_loss(const float* logits, const uint8_t* labels, int n, int N, float loss_scale, float* dlogits) {
  const int K = model_.num_classes();
  const float loss = kernels_.softmax_xent_forward(probs_.data(), logits, labels, n, K);
  kernels_.softmax_xent_backward(dlogits, probs_.data(), labels, n, K, loss_scale / float(N));
  if (config_.label_smoothing > 0.0) {
    // Targets (1 - eps) onehot + eps/K: the gradient (p - target) s = (p - onehot) s + eps s (onehot - 1/K).
    // The reported loss stays the cross-entropy against the true labels.
    const float es = float(config_.label_smoothing) * loss_scale / float(N), uniform = es / float(K);
    for (int i = 0; i < n; ++i) {
      float* d = dlogits + std::size_t(i) * K;
      for (int k = 0; k < K; ++k) d[k] -= uniform;
      d[labels[i]] += es;
    }
  }
  return loss;
}

float Trainer::step(const data::Batch& batch, int64_t step_index) {
  const int N = batch.N;
  const std::size_t input = std::size_t(shape_numel(model_.input_shape()));
  // fp16: the loss is scaled (the gradient of the logits carries the factor) so small gradients survive.
  const float loss_scale = scaler_ ? scaler_->scale() : 1.0f;
  // --micro-batches M: the micro-batches one after another (train/grad_accumulator.h). Each one's logit
  // gradients are scaled by 1/N, the whole batch's, so the gradients summed over them are the batch mean's.
  const int M = std::max(1, std::min(config_.micro_batches, N));
  double loss_sum = 0.0;
  float loss = 0.0f;
  // The step's parts, timed at their boundaries (a clock read each: nothing next to a pass).
  auto mark = Clock::now();
  auto lap = [&mark](double& part) {
    const auto now = Clock::now();
    part += std::chrono::duration<double>(now - mark).count();
    mark = now;
  };
  if (pipeline_) {  // the same passes, stage by stage in the schedule's order (train/pipeline_engine.h)
    loss = pipeline_->train_step(kernels_, batch, config_.seed, step_index, grad_sum_.get(),
                                 reducer_ ? reducer_->hook() : nn::Model::GradReadyHook(),
                                 [&](const float* logits, const uint8_t* labels, int n, float* dlogits) {
                                   return micro_loss(logits, labels, n, N, loss_scale, dlogits);
                                 });
    if (reducer_) reducer_->wait();
    lap(parts_.backward);  // the whole schedule: forward, loss and backward interleaved
  }
  for (int m = 0; m < (pipeline_ ? 0 : M); ++m) {
    const MicroBatchRange mb = micro_batch(N, M, m);
    const int n0 = mb.begin, n = mb.size();
    const float* x = batch.x + std::size_t(n0) * input;
    const uint8_t* labels = batch.labels + n0;
    // Dropout masks are a function of (seed, step, sample): the same on a resumed run, at any world size.
    model_.set_step(config_.seed, step_index, batch.indices ? batch.indices + n0 : nullptr);
    const float* logits = model_.forward(kernels_, x, n);
    lap(parts_.forward);
    loss = micro_loss(logits, labels, n, N, loss_scale, dlogits_.data());
    loss_sum += double(loss) * n;
    lap(parts_.loss);
    if (m + 1 < M) {  // an earlier micro-batch: its gradients join the sum, nothing is communicated yet
      model_.backward(kernels_, x, dlogits_.data(), n);
      if (m == 0)
        grad_sum_->start();
      else
        grad_sum_->add();
      lap(parts_.backward);
      continue;
    }
    if (reducer_) {
      // Buckets start their all-reduce as backward fills them; wait() returns the averaged gradients
      // (every rank has the same N, so the average of the ranks' means is the global batch mean). With
      // micro-batches, each layer's gradients get the earlier micro-batches' sum added before the hook
      // reports them, so a bucket is all-reduced once a step, whole, overlapping this last backward.
      model_.backward(kernels_, x, dlogits_.data(), n, M > 1 ? grad_sum_->finishing(reducer_->hook()) : reducer_->hook());
      reducer_->wait();
    } else {
      model_.backward(kernels_, x, dlogits_.data(), n);
      if (M > 1) grad_sum_->finish_all();
    }
    lap(parts_.backward);
  }
  if (M > 1 && !pipeline_) loss = float(loss_sum / double(N));  // the batch mean
  ++step_calls_;
  update_parameters();
  lap(parts_.optimizer);
  return loss;
}

void Trainer::update_parameters() {
  optimizer_->set_thread_pool(model_.thread_pool());  // the model's threads (--threads), as they are now
  if (scaler_) {
    // Fault injection for the skip test (tests/cli/test_mixed_precision.sh): RINGTRAIN_FAULT_INF_GRAD=
    // "RANK:STEP" puts an inf into that rank's gradients at that step of this process.
    static const std::pair<long long, long long> inf_fault = [] {
      long long rank = -1, step = -1;
      if (const char* v = std::getenv("RINGTRAIN_FAULT_INF_GRAD"))
        check(std::sscanf(v, "%lld:%lld", &rank, &step) == 2, std::string("RINGTRAIN_FAULT_INF_GRAD must be RANK:STEP, got '") + v + "'");
      return std::pair{rank, step};
    }();
    if (inf_fault.first == comm_.rank() && inf_fault.second == step_calls_)
      model_.params().grads()[0] = std::numeric_limits<float>::infinity();
    // Unscale + inf/NaN check in one pass; every rank agrees to skip if any rank found one.
    const optim::LossScaleStep st =
        scaler_->step(*optimizer_, model_.params().params(), model_.params().grads(), [this](bool local) {
                        bool any = dist::any_rank(comm_, local);  // under --tp / --pp: and over those groups
                        if (tensor_parallel()) any = dist::any_rank(grid_->tp_comm(), any);
                        return pipeline_parallel() ? dist::any_rank(grid_->pp_comm(), any) : any;
                      });
    if (st.applied) {
      optimizer_->update_ema(model_.params().params());
      gather_parameters();  // a skipped step changed nothing anywhere: nothing to gather
    }
    if (!st.applied && is_logger())
      log_ << "fp16: gradients hold inf/NaN (on some rank) - step skipped on every rank, loss scale "
           << st.scale << " -> " << st.next_scale << std::endl;
    return;
  }
  optimizer_->step(model_.params().params(), model_.params().grads());
  optimizer_->update_ema(model_.params().params());
  gather_parameters();
}

TrainResult Trainer::fit(const data::Split& train_split, const data::Split& test_split) {
  model_.set_training(true);
  const int64_t input = shape_numel(model_.input_shape());
  // (A pipeline stage after the first takes activations, not images: the first stage checks.)
  check((pipeline_ && pipeline_->stage() > 0) || int64_t(train_split.rows) * train_split.cols == input,
        "training images are " + std::to_string(train_split.rows) + "x" + std::to_string(train_split.cols) +
            ", the model expects " + shape_str(model_.input_shape()));
  data::BatchLoader loader(train_split, config_.batch_size, config_.workers, config_.prefetch,
                           {config_.augment_shift, config_.seed});
  TrainResult result;
  double train_seconds = 0.0;
  int64_t samples_seen = 0;

  Progress progress(log_, config_.terminal, config_.log_every, config_.quiet);
  MetricsWriter metrics(is_logger() ? config_.metrics_path : std::string());
  std::unique_ptr<CheckpointDir> checkpoints;
  if (!config_.checkpoint_dir.empty()) checkpoints = std::make_unique<CheckpointDir>(config_.checkpoint_dir, config_.keep_checkpoints);
  Position start;
  if (config_.resume) {
    check(checkpoints != nullptr, "--resume needs --checkpoint-dir");
    start = resume_from(*checkpoints, train_split.count);
    result.steps = start.step;
  }
  const int64_t global_batch = int64_t(config_.batch_size) * comm_.size();
  Position after = start;
  const FaultInjection fault = fault_injection_from_env();
  // The hook names a world rank (under --tp the trainer's communicator is only the data-parallel group).
  OverlapTrial overlap_trial(parse_overlap(config_.overlap));
  int64_t steps_here = 0;  // steps of this process (the trial counts from this run's first)
  const char* world_rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const int fault_rank = world_rank_env ? std::atoi(world_rank_env) : comm_.rank();
  for (int epoch = start.epoch; epoch < config_.epochs; ++epoch) {
    const int64_t offset = epoch == start.epoch ? start.offset : 0;
    loader.start_epoch(epoch_indices(train_split.count, epoch, offset), 0, epoch);
    const int64_t steps_per_epoch = loader.batches_in_epoch();
    const auto epoch_start = Clock::now();
    const double wait_at_start = loader.wait_seconds();
    int64_t epoch_samples = 0;
    double loss_sum = 0.0;
    int64_t loss_count = 0;

    for (int64_t b = 0; b < steps_per_epoch; ++b) {
      const auto fetch_start = Clock::now();
      const data::Batch batch = loader.next();
      parts_.data += seconds_since(fetch_start);
      // The rate at this step's place in training, in epochs: the same for any ranks x batch split.
      const double position = epoch + std::min(1.0, double(offset + b * global_batch) / double(train_split.count));
      optimizer_->set_lr(float(optim::scheduled_lr(schedule_, position)));
      if (reducer_) reducer_->set_overlap(overlap_trial.overlap_at(steps_here));
      const auto step_start = Clock::now();
      float loss = step(batch, result.steps);
      parts_.total += seconds_since(fetch_start);
      ++parts_.steps;
      if (reducer_ && overlap_trial.record(steps_here, seconds_since(step_start), comm_) && is_logger())
        log_ << overlap_trial.summary() << std::endl;
      ++steps_here;
      check(std::isfinite(loss), "training diverged: loss is " + std::to_string(loss) + " at epoch " +
                                     std::to_string(epoch + 1) + " batch " + std::to_string(b + 1));
      ++result.steps;
      result.last_loss = loss;
      loss_sum += loss;
      ++loss_count;
      epoch_samples += batch.N;
      samples_seen += batch.N;
      if (is_logger()) {
        const double elapsed = seconds_since(epoch_start);
        const double rate = elapsed > 0 ? double(epoch_samples) * comm_.size() / elapsed : 0.0;
        progress.step(epoch, b + 1, steps_per_epoch, loss_sum / double(loss_count), rate);
        if (config_.log_every > 0 && (b + 1) % config_.log_every == 0) {
          metrics.write(MetricsRecord()
                            .set("step", double(result.steps))
                            .set("epoch", epoch + 1)
                            .set("batch", double(b + 1))
                            .set("loss", loss_sum / double(loss_count))
                            .set("lr", optimizer_->lr())
                            .set("samples_per_s", rate)
                            .set("data_wait", elapsed > 0 ? (loader.wait_seconds() - wait_at_start) / elapsed : 0.0)
                            .set("grad_wait_ms", reducer_ ? 1000.0 * reducer_->stats().last_wait_s : 0.0)
                            .set("allreduce_s", reducer_ ? reducer_->stats().comm_s : 0.0)
                            .set("loss_scale", scaler_ ? scaler_->scale() : 1.0));
          loss_sum = 0.0;
          loss_count = 0;
        }
      }
      // Where a resumed run would continue after this step: the next epoch once this one is done.
      after = b + 1 == steps_per_epoch ? Position{result.steps, epoch + 1, 0}
                                       : Position{result.steps, epoch, offset + (b + 1) * global_batch};
      if (checkpoints && config_.checkpoint_every > 0 && result.steps % config_.checkpoint_every == 0)
        save_periodic(*checkpoints, after);
      if (fault.rank == fault_rank && fault.step == result.steps && start.step == 0) std::raise(SIGKILL);
      if (fault.hang_rank == fault_rank && fault.hang_step == result.steps)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
      if (config_.max_steps > 0 && result.steps >= config_.max_steps) break;
    }
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    const bool last = epoch + 1 == config_.epochs || (config_.max_steps > 0 && result.steps >= config_.max_steps);
    if (config_.eval_each_epoch || last) {
      swap_ema();  // --ema: evaluate the averaged weights
      result.test = evaluate_test(test_split);
      if (tensor_parallel()) {
        const int64_t differ = dist::replica_mismatches(model_.params(), model_.params().params(), grid_->tp_comm());
        check(differ == 0, "tensor parallelism: " + std::to_string(differ) +
                               " replicated parameter(s) differ across a tensor group (they must stay bit-identical)");
      }
      swap_ema();
      if (is_logger()) {
        progress.epoch_done(format("epoch %.0f done in %.1fs (%.0f samples/s): test loss %.4f, test accuracy %.2f%%",
                                   epoch + 1, epoch_seconds, double(epoch_samples) * comm_.size() / epoch_seconds,
                                   result.test.mean_loss(), 100.0 * result.test.accuracy()));
        metrics.write(MetricsRecord()
                          .set("step", double(result.steps))
                          .set("epoch", epoch + 1)
                          .set("test_loss", result.test.mean_loss())
                          .set("test_accuracy", result.test.accuracy())
                          .set("epoch_seconds", epoch_seconds));
      }
    }
    if (last) {
      if (checkpoints && (config_.checkpoint_every == 0 || result.steps % config_.checkpoint_every != 0))
        save_periodic(*checkpoints, after);
      break;
    }
  }
  // --ema: the model ends holding the weights the final evaluation used, so --save writes those (the
  // optimizer's "ema" buffer then holds them too; the last periodic checkpoint keeps the raw weights).
  if (optimizer_->has_ema()) {
    optimizer_->copy_ema_to(model_.params().params());
    gather_parameters();
  }
  if (reducer_) {
    const dist::GradReducerStats& st = reducer_->stats();
    result.grad_wait_ms_per_step = st.steps ? 1000.0 * st.wait_s / double(st.steps) : 0.0;
    result.allreduce_seconds = st.comm_s;
    result.allreduce_ms_per_step = st.steps ? 1000.0 * st.comm_s / double(st.steps) : 0.0;
    result.gradient_buckets = int(reducer_->buckets().size());
    result.overlap_kept = reducer_->overlap();
    result.param_gather_ms_per_step = st.steps ? 1000.0 * st.gather_s / double(st.steps) : 0.0;
    if (st.steps) {
      result.allreduce_bytes_per_step = double(st.bytes_sent) / double(st.steps);
      result.allreduce_library_sums_per_step = double(st.library_sums) / double(st.steps);
    }
  }
  if (scaler_) {
    result.skipped_steps = scaler_->skipped_steps();
    result.loss_scale = scaler_->scale();
  }
  result.pipeline = pipeline_report();  // collective over the pipeline group
  result.step_parts = parts_;
  result.step_parts.split = !pipeline_parallel();
  result.train_seconds = train_seconds;
  result.data_wait_fraction = train_seconds > 0 ? loader.wait_seconds() / train_seconds : 0.0;
  result.samples_per_second = train_seconds > 0 ? samples_seen * comm_.size() / train_seconds : 0.0;
  return result;
}

}  // namespace ringtrain::train
