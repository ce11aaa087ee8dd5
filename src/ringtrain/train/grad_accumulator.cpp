#include "ringtrain/train/grad_accumulator.h"

#include <algorithm>
#include <cstdint>

namespace ringtrain::train {

GradAccumulator::GradAccumulator(nn::ParameterSet& params, const ops::KernelTable& k) : params_(params), k_(k) {
  sum_.resize(params.size());
  for (std::size_t i = 0; i < params.views().size(); ++i) all_views_.push_back(int(i));
}

void GradAccumulator::start() { apply(all_views_, Op::Start); }
void GradAccumulator::add() { apply(all_views_, Op::Add); }
void GradAccumulator::finish(const std::vector<int>& views) { apply(views, Op::Finish); }
void GradAccumulator::finish_all() { apply(all_views_, Op::Finish); }

nn::Model::GradReadyHook GradAccumulator::finishing(nn::Model::GradReadyHook next) {
  return [this, next = std::move(next)](const nn::Layer& layer) {
    finish(layer.param_indices());
    if (next) next(layer);
  };
}

void GradAccumulator::apply(const std::vector<int>& views, Op op) {
  for (int i : views) {
    const nn::ParamView& v = params_.views()[std::size_t(i)];
    float* g = params_.grads() + v.offset;
    float* s = sum_.data() + v.offset;
    switch (op) {
      case Op::Start:
        std::copy(g, g + v.numel, s);
        break;
      case Op::Add:
        k_.add_forward(s, s, g, int64_t(v.numel));
        break;
      case Op::Finish:
        k_.add_forward(g, g, s, int64_t(v.numel));
        break;
    }
  }
}

MicroBatchRange micro_batch(int N, int M, int m) {
  return {int(int64_t(N) * m / M), int(int64_t(N) * (m + 1) / M)};
}

}  // namespace ringtrain::train
