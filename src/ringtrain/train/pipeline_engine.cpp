#include "ringtrain/train/pipeline_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/core/half.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double seconds_of(Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
// One tag a direction: messages between two ranks with one tag arrive in order, and both sides run the
// micro-batches in order (forwards 0..M-1 on both, backwards 0..M-1 on both), so no number is needed.
constexpr int kTagActivations = 0, kTagGradients = 1, kTagEval = 2;
}  // namespace

void PipelineStats::add_step(double step_seconds, double idle_seconds) {
  ++steps;
  step_s += step_seconds;
  idle_s += idle_seconds;
  const double f = step_seconds > 0 ? idle_seconds / step_seconds : 0.0;
  ++idle_permille[std::size_t(std::clamp(std::lround(1000.0 * f), 0L, 1000L))];
}

double PipelineStats::median_step_idle_fraction() const {
  int64_t seen = 0;  // the lower median: the first bin holding the (steps + 1) / 2-th step
  for (std::size_t b = 0; b < idle_permille.size(); ++b)
    if ((seen += idle_permille[b]) >= (steps + 1) / 2 && steps > 0) return double(b) / 1000.0;
  return 0.0;
}

const char* pipe_wire_name(PipeWire w) { return w == PipeWire::Fp32 ? "fp32" : w == PipeWire::Bf16 ? "bf16" : "fp16"; }

PipelineEngine::PipelineEngine(nn::Model& stage, const StageFactory& copy_stage, dist::Communicator& pp,
                               PipeSchedule schedule, int micro_batches, int micro_batch, PipeWire wire)
    : model_(stage), pp_(pp), schedule_(schedule), wire_(wire), P_(pp.size()), s_(pp.rank()), M_(micro_batches),
      micro_(micro_batch) {
  check(M_ >= 1 && micro_ >= 1, "pipeline: needs at least one micro-batch of at least one sample");
  K_ = max_in_flight(stage_actions(schedule_, P_, s_, M_));
  in_numel_ = std::size_t(shape_numel(model_.input_shape()));
  input_pixels_ = in_numel_;
  out_numel_ = std::size_t(shape_numel(model_.value_shape(int(model_.layers().size()))));
  models_.push_back(&model_);
  for (int c = 1; c < K_; ++c) {
    check(bool(copy_stage), "pipeline: a schedule holding several micro-batches needs copies of the stage model");
    copies_.push_back(copy_stage());
    copies_.back()->share_parameters(model_);
    copies_.back()->share_value_gradients(model_);  // one backward at a time: one set of value gradients
    copies_.back()->set_threads(model_.threads());
    models_.push_back(copies_.back().get());
  }
  for (nn::Model* m : models_) {
    // A stage after the first sends back the gradient of its input.
    m->set_input_gradient(s_ > 0);
    m->reserve(micro_);
  }
  slots_.resize(std::size_t(K_));
  const std::size_t in = std::size_t(micro_) * in_numel_, out = std::size_t(micro_) * out_numel_;
  const bool half = wire_ != PipeWire::Fp32;
  for (Slot& sl : slots_) {
    if (s_ > 0) {
      sl.in.resize(in);
      if (half) {
        sl.in16.resize(in);
        sl.din16.resize(in);
      } else {
        sl.din.resize(in);
      }
    }
    if (!last()) {
      sl.dout.resize(out);
      if (half) {
        sl.out16.resize(out);
        sl.dout16.resize(out);
      } else {
        sl.out.resize(out);
      }
    }
  }
  if (last()) dlogits_.resize(std::size_t(micro_) * M_ * out_numel_);
}

std::size_t PipelineEngine::buffer_bytes() const {
  std::size_t n = dlogits_.size(), n16 = 0;
  for (const Slot& sl : slots_) {
    n += sl.in.size() + sl.out.size() + sl.dout.size() + sl.din.size();
    n16 += sl.in16.size() + sl.out16.size() + sl.dout16.size() + sl.din16.size();
  }
  return n * sizeof(float) + n16 * sizeof(uint16_t);
}

std::size_t PipelineEngine::activation_bytes() const {
  std::size_t floats = 0;
  for (const nn::Model* m : models_) floats += m->activation_floats();
  return floats * sizeof(float);
}

dist::Communicator::Request PipelineEngine::send(const float* src, float* buf, std::vector<uint16_t>& buf16,
                                                 std::size_t n, int peer, int tag, const char* what) {
  if (wire_ == PipeWire::Fp32) {
    std::memcpy(buf, src, n * sizeof(float));
    stats_.bytes_sent += int64_t(n * sizeof(float));
    return pp_.start_send(buf, n * sizeof(float), peer, tag, what);
  }
  if (wire_ == PipeWire::Bf16)
    float_to_bf16(buf16.data(), src, n);
  else
    float_to_fp16(buf16.data(), src, n);
  stats_.bytes_sent += int64_t(n * sizeof(uint16_t));
  return pp_.start_send(buf16.data(), n * sizeof(uint16_t), peer, tag, what);
}

dist::Communicator::Request PipelineEngine::recv(float* dst, std::vector<uint16_t>& buf16, std::size_t n, int peer,
                                                 int tag, const char* what) {
  if (wire_ == PipeWire::Fp32) return pp_.start_recv(dst, n * sizeof(float), peer, tag, what);
  return pp_.start_recv(buf16.data(), n * sizeof(uint16_t), peer, tag, what);
}

void PipelineEngine::widen(float* dst, const std::vector<uint16_t>& buf16, std::size_t n) const {
  if (wire_ == PipeWire::Bf16)
    bf16_to_float(dst, buf16.data(), n);
  else if (wire_ == PipeWire::Fp16)
    fp16_to_float(dst, buf16.data(), n);
}

void PipelineEngine::wait(dist::Communicator::Request& r, bool input) {
  if (r < 0) return;
  const auto t0 = Clock::now();
  {
    // Spin briefly, then yield the core: a stage waiting out the bubble should not starve its neighbour
    // on a shared or oversubscribed machine.
    dist::ScopedPollMode mode(dist::PollMode::Adaptive);
    pp_.wait_p2p(r);
  }
  idle_ += seconds_since(t0);
  r = -1;
  if (trace_steps_ > 0) {  // the pass's stretch before the wait, the wait; the next stretch starts now
    if (tracing_pass_ >= 0 && !input) record(tracing_pass_, tracing_micro_, -1, segment_begin_, seconds_of(t0));
    segment_begin_ = seconds_of(Clock::now());
    record(PipeEvent::Wait, tracing_micro_, tracing_pass_, seconds_of(t0), segment_begin_);
  }
}

void PipelineEngine::record(int kind, int micro, int in_pass, double begin, double end) {
  if (kind != PipeEvent::Wait && end <= begin) return;
  trace_.back().push_back(PipeEvent{kind, s_, micro, in_pass, calls_, begin, end});
}

std::vector<PipeEvent> PipelineEngine::trace() const {
  std::vector<PipeEvent> all;
  for (const auto& step : trace_) all.insert(all.end(), step.begin(), step.end());
  return all;
}

void PipelineEngine::poke() {
  // MPI moves a message only inside MPI calls: a large one (past the eager limit: a rendezvous) waits for
  // both sides' next calls, so the passes test the messages in flight between layers (a few microseconds),
  // freeing those that are done. Measured on vit --pp 2: without it a micro-batch's activations reached the
  // next stage a whole forward late.
  for (Slot& sl : slots_)
    for (dist::Communicator::Request* r : {&sl.send_out, &sl.send_din, &sl.recv_in, &sl.recv_dout})
      if (*r >= 0 && pp_.test_p2p(*r)) *r = -1;
}

void PipelineEngine::post_receives(int M, int N) {
  if (s_ == 0) return;
  // An activation's stash is free once the micro-batch K earlier has run its backward.
  while (next_recv_ < M && next_recv_ - backwards_done_ < K_) {
    const MicroBatchRange mb = micro_batch(N, M, next_recv_);
    Slot& sl = slots_[std::size_t(next_recv_ % K_)];
    sl.recv_in = recv(sl.in.data(), sl.in16, std::size_t(mb.size()) * in_numel_, s_ - 1, kTagActivations,
                      "recv activations");
    ++next_recv_;
  }
}

const float* PipelineEngine::input_of(const data::Batch& batch, int m, int M) {
  if (s_ > 0) return slots_[std::size_t(m % K_)].in.data();
  return batch.x + std::size_t(micro_batch(batch.N, M, m).begin) * input_pixels_;
}

void PipelineEngine::forward(const ops::KernelTable& k, const data::Batch& batch, int m, int M, uint64_t seed,
                             int64_t step, const LossFn& loss, double& loss_sum) {
  const MicroBatchRange mb = micro_batch(batch.N, M, m);
  const int n = mb.size();
  Slot& sl = slots_[std::size_t(m % K_)];
  if (s_ > 0) {
    // (The schedule holds at most K micro-batches, so this one's receive was posted after the backward that
    // freed its stash.)
    if (m >= next_recv_) throw Error("pipeline: micro-batch " + std::to_string(m) + "'s activations were never received");
    wait(sl.recv_in, true);
    widen(sl.in.data(), sl.in16, std::size_t(n) * in_numel_);
  }
  nn::Model& model = *models_[std::size_t(m % K_)];
  model.set_step(seed, step, batch.indices ? batch.indices + mb.begin : nullptr);
  const float* out = model.forward(k, input_of(batch, m, M), n, [this] { poke(); });
  stats_.most_in_flight = std::max(stats_.most_in_flight, ++held_);
  if (last()) {
    const float mean = loss(out, batch.labels + mb.begin, n, dlogits_.data() + std::size_t(mb.begin) * out_numel_);
    loss_sum += double(mean) * n;
    return;
  }
  wait(sl.send_out);  // the buffer's previous message (micro-batch m - K) must be gone
  const std::size_t floats = std::size_t(n) * out_numel_;
  sl.send_out = send(out, sl.out.data(), sl.out16, floats, s_ + 1, kTagActivations, "send activations");
  sl.recv_dout = recv(sl.dout.data(), sl.dout16, floats, s_ + 1, kTagGradients, "recv activation gradients");
}

void PipelineEngine::backward(const ops::KernelTable& k, const data::Batch& batch, int m, int M, uint64_t seed,
                              int64_t step, GradAccumulator* sum, const nn::Model::GradReadyHook& hook) {
  const MicroBatchRange mb = micro_batch(batch.N, M, m);
  const int n = mb.size();
  Slot& sl = slots_[std::size_t(m % K_)];
  const float* in = input_of(batch, m, M);
  const float* dout;
  if (last()) {
    dout = dlogits_.data() + std::size_t(mb.begin) * out_numel_;
  } else {
    wait(sl.recv_dout, true);
    widen(sl.dout.data(), sl.dout16, std::size_t(n) * out_numel_);
    dout = sl.dout.data();
  }
  // The copy still holds this micro-batch's activations: K - 1 others at most ran forward since.
  nn::Model& model = *models_[std::size_t(m % K_)];
  model.set_step(seed, step, batch.indices ? batch.indices + mb.begin : nullptr);
  // The one-process --micro-batches order (Trainer::step): g_last + (((g_0 + g_1) + g_2) ...).
  const auto poking = [this](const nn::Model::GradReadyHook& next) -> nn::Model::GradReadyHook {
    return [this, next](const nn::Layer& layer) {
      poke();
      if (next) next(layer);
    };
  };
  if (m + 1 < M)
    model.backward(k, in, dout, n, poking({}));
  else if (M > 1)
    model.backward(k, in, dout, n, poking(sum->finishing(hook)));
  else
    model.backward(k, in, dout, n, poking(hook));
  --held_;
  ++backwards_done_;
  if (s_ > 0) {  // the stage before waits for this: it leaves before the gradient sum below
    wait(sl.send_din);
    sl.send_din = send(model.input_grad(), sl.din.data(), sl.din16, std::size_t(n) * in_numel_, s_ - 1, kTagGradients,
                       "send activation gradients");
  }
  if (m + 1 < M) {
    if (m == 0)
      sum->start();
    else
      sum->add();
  }
}

float PipelineEngine::train_step(const ops::KernelTable& k, const data::Batch& batch, uint64_t seed, int64_t step,
                                 GradAccumulator* sum, const nn::Model::GradReadyHook& hook, const LossFn& loss) {
  const int N = batch.N;
  const int M = std::max(1, std::min(M_, N));
  check(M == 1 || sum != nullptr, "pipeline: micro-batches need a gradient accumulator");
  check((N + M - 1) / M <= micro_, "pipeline: a micro-batch of " + std::to_string((N + M - 1) / M) +
                                       " samples is more than the " + std::to_string(micro_) + " reserved");
  ++calls_;
  stats_.calls = calls_;
  const auto t0 = Clock::now();
  idle_ = 0.0;
  next_recv_ = backwards_done_ = held_ = 0;
  double loss_sum = 0.0;
  post_receives(M, N);
  if (trace_steps_ > 0) {  // a new step's list; the oldest goes
    if (int(trace_.size()) == trace_steps_) trace_.erase(trace_.begin());
    trace_.emplace_back();
  }
  for (const PipeAction& a : stage_actions(schedule_, P_, s_, M)) {
    poke();
    segment_begin_ = seconds_of(Clock::now());
    tracing_micro_ = a.micro;
    tracing_pass_ = a.forward ? PipeEvent::Forward : PipeEvent::Backward;
    if (a.forward) {
      forward(k, batch, a.micro, M, seed, step, loss, loss_sum);
    } else {
      backward(k, batch, a.micro, M, seed, step, sum, hook);
      post_receives(M, N);
    }
    if (trace_steps_ > 0)
      record(tracing_pass_, a.micro, -1, segment_begin_, seconds_of(Clock::now()));
  }
  tracing_micro_ = tracing_pass_ = -1;
  for (Slot& sl : slots_) {  // the step's last messages leave before their buffers can be reused
    wait(sl.send_out);
    wait(sl.send_din);
  }
  if (calls_ > 1) stats_.add_step(seconds_since(t0), idle_);
  // Every stage reports the loss (logging, the divergence check): the last stage's, the batch mean.
  pp_.broadcast(&loss_sum, sizeof loss_sum, P_ - 1);
  return float(loss_sum / double(N));
}

EvalResult PipelineEngine::evaluate(const ops::KernelTable& k, const data::Split& split, dist::Communicator& dp) {
  const EvalShard shard = eval_shard(split.count, dp.rank(), dp.size());
  // Every stage runs the same batches: the smallest of the stages' default batch sizes.
  std::vector<int64_t> sizes(std::size_t(P_), 0);
  sizes[std::size_t(s_)] = default_eval_batch(model_);
  pp_.allreduce_sum(sizes.data(), sizes.size());
  const int B = int(*std::min_element(sizes.begin(), sizes.end()));
  int64_t classes = last() ? model_.num_classes() : 0;
  pp_.broadcast(&classes, sizeof classes, P_ - 1);
  model_.reserve(B);
  const int64_t pixels = int64_t(split.rows) * split.cols;
  AlignedBuffer<float> x(std::size_t(B) * std::max<std::size_t>(in_numel_, std::size_t(pixels)));
  EvalResult r = empty_result(int(classes));
  struct ModeGuard {
    nn::Model& m;
    bool was;
    ~ModeGuard() { m.set_training(was); }
  } guard{model_, model_.training()};
  model_.set_training(false);
  dist::ScopedPollMode mode(dist::PollMode::Adaptive);
  for (int64_t start = shard.begin; start < shard.end; start += B) {
    const int N = int(std::min<int64_t>(B, shard.end - start));
    if (s_ == 0) {
      data::normalize_pixels(x.data(), split.image(start), N * pixels);
    } else {
      auto req = pp_.start_recv(x.data(), std::size_t(N) * in_numel_ * sizeof(float), s_ - 1, kTagEval,
                                "recv activations (evaluation)");
      pp_.wait_p2p(req);
    }
    const float* out = model_.forward(k, x.data(), N);
    if (last()) {
      count_logits(r, out, split, start, N, false);
    } else {
      auto req = pp_.start_send(out, std::size_t(N) * out_numel_ * sizeof(float), s_ + 1, kTagEval,
                                "send activations (evaluation)");
      pp_.wait_p2p(req);  // before the next forward overwrites the model's output
    }
  }
  // The last stage's counts to the whole pipeline group, then summed over the data-parallel shards.
  std::vector<int64_t> counts(2 + r.confusion.size());
  counts[0] = r.samples;
  counts[1] = r.correct;
  std::copy(r.confusion.begin(), r.confusion.end(), counts.begin() + 2);
  pp_.broadcast(counts.data(), counts.size() * sizeof(int64_t), P_ - 1);
  pp_.broadcast(&r.loss_sum, sizeof r.loss_sum, P_ - 1);
  r.samples = counts[0];
  r.correct = counts[1];
  std::copy(counts.begin() + 2, counts.end(), r.confusion.begin());
  sum_counts(r, dp);
  return r;
}

}  // namespace ringtrain::train
