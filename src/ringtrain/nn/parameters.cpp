#include "ringtrain/nn/parameters.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

int ParameterSet::declare(const std::string& name, const Shape& shape, int fan_in) {
  check(params_.size() == 0, "parameter '" + name + "' declared after allocation");
  std::size_t n = std::size_t(shape_numel(shape));
  views_.push_back({name, shape, next_offset_, n, fan_in, ShardInfo{shape, -1, {}, 0}});
  next_offset_ += (n + 15) / 16 * 16;
  return int(views_.size()) - 1;
}

int ParameterSet::declare_shard(const std::string& name, const ShardInfo& shard, int fan_in) {
  int i = declare(name, shard.shard_shape(shard.index), fan_in);
  views_[std::size_t(i)].shard = shard;
  return i;
}

void ParameterSet::allocate() {
  params_.resize(next_offset_);
  grads_.resize(next_offset_);
}

std::size_t ParameterSet::count() const {
  std::size_t n = 0;
  for (const auto& v : views_) n += v.numel;
  return n;
}

const ParamView& ParameterSet::view(const std::string& name) const {
  for (const auto& v : views_)
    if (v.name == name) return v;
  throw Error("no parameter named '" + name + "'");
}

}  // namespace ringtrain::nn
