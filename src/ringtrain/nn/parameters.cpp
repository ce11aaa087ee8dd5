#include "ringtrain/nn/parameters.h"

#include <algorithm>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

int ParameterSet::declare(const std::string& name, const Shape& shape, int fan_in, Init init) {
  check(params_.size() == 0, "parameter '" + name + "' declared after allocation");
  std::size_t n = std::size_t(shape_numel(shape));
  views_.push_back({name, shape, next_offset_, n, fan_in, ShardInfo{shape, -1, {}, 0}, init});
  next_offset_ += (n + 15) / 16 * 16;
  return int(views_.size()) - 1;
}

int ParameterSet::declare_shard(const std::string& name, const ShardInfo& shard, int fan_in, Init init) {
  int i = declare(name, shard.shard_shape(shard.index), fan_in, init);
  views_[std::size_t(i)].shard = shard;
  return i;
}

int ParameterSet::declare_buffer(const std::string& name, const Shape& shape, double initial) {
  check(params_.size() == 0, "buffer '" + name + "' declared after allocation");
  const std::size_t n = std::size_t(shape_numel(shape));
  buffer_views_.push_back({name, shape, next_buffer_, n, false, initial});
  next_buffer_ += (n + 15) / 16 * 16;
  return int(buffer_views_.size()) - 1;
}

int ParameterSet::declare_counter(const std::string& name) {
  check(params_.size() == 0, "buffer '" + name + "' declared after allocation");
  buffer_views_.push_back({name, Shape{}, next_counter_, 1, true, 0.0});
  next_counter_ += 1;
  return int(buffer_views_.size()) - 1;
}

void ParameterSet::allocate() {
  params_.resize(next_offset_);
  grads_.resize(next_offset_);
  buffers_.resize(next_buffer_);
  counters_.assign(next_counter_, 0);
  reset_buffers();
}

void ParameterSet::reset_buffers() {
  for (const BufferView& b : buffer_views_) {
    if (b.int64)
      counters_[b.offset] = int64_t(b.initial);
    else
      std::fill(buffers_.data() + b.offset, buffers_.data() + b.offset + b.numel, float(b.initial));
  }
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
