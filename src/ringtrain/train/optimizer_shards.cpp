#include "ringtrain/train/optimizer_shards.h"

#include <algorithm>

#include "ringtrain/core/error.h"
#include "ringtrain/train/tp_checkpoint.h"

namespace ringtrain::train {

namespace {
// Calls f(packed state of the shard, whole state) for each state buffer, checked to correspond.
template <typename F>
void for_each_buffer(optim::Optimizer& whole, optim::Optimizer& shard, F&& f) {
  auto w = whole.state(), s = shard.state();
  check(w.size() == s.size(), "optimizer sharding: the whole and the sharded optimizer keep different state");
  for (std::size_t b = 0; b < w.size(); ++b) {
    check(w[b].name == s[b].name, "optimizer sharding: state '" + w[b].name + "' vs '" + s[b].name + "'");
    f(s[b].data, w[b].data);
  }
}
}  // namespace

std::unique_ptr<optim::Optimizer> gather_optimizer_state(optim::Optimizer& shard, dist::GradReducer& reducer,
                                                         std::size_t n) {
  std::unique_ptr<optim::Optimizer> whole = optimizer_like(shard, n);
  const std::vector<optim::Span>& spans = shard.spans();
  for_each_buffer(*whole, shard, [&](const float* packed, float* full) {
    std::size_t at = 0;
    for (const optim::Span& s : spans) {
      std::copy(packed + at, packed + at + s.count, full + s.offset);
      at += s.count;
    }
    reducer.all_gather(full);
  });
  return whole;
}

void take_optimizer_shard(optim::Optimizer& whole, optim::Optimizer& shard) {
  const std::vector<optim::Span>& spans = shard.spans();
  for_each_buffer(whole, shard, [&](float* packed, const float* full) {
    std::size_t at = 0;
    for (const optim::Span& s : spans) {
      std::copy(full + s.offset, full + s.offset + s.count, packed + at);
      at += s.count;
    }
  });
  shard.set_steps(whole.steps());
}

}  // namespace ringtrain::train
