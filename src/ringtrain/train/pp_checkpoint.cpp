#include "ringtrain/train/pp_checkpoint.h"

#include <cstring>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/tp_checkpoint.h"

namespace ringtrain::train {

namespace {
// owner[i]: the pipeline rank whose stage holds whole view i (every rank learns it in one all-reduce).
template <typename Views, typename Has>
std::vector<int64_t> owners(const Views& whole_views, const Has& has, dist::Communicator& pp) {
  std::vector<int64_t> owner(whole_views.size(), 0);
  for (std::size_t i = 0; i < whole_views.size(); ++i)
    if (has(whole_views[i].name)) owner[i] = pp.rank() + 1;
  pp.allreduce_sum(owner.data(), owner.size());
  for (std::size_t i = 0; i < owner.size(); ++i) {
    check(owner[i] >= 1 && owner[i] <= pp.size(),
          "pipeline checkpoint: '" + whole_views[i].name + "' is held by no stage, or by more than one");
    --owner[i];
  }
  return owner;
}

bool has_param(const nn::ParameterSet& p, const std::string& name) {
  for (const auto& v : p.views())
    if (v.name == name) return true;
  return false;
}

// Each whole parameter view of buf from the stage that holds it to every stage.
void spread_params(const nn::ParameterSet& whole, float* buf, const std::vector<int64_t>& owner, dist::Communicator& pp) {
  for (std::size_t i = 0; i < whole.views().size(); ++i) {
    const nn::ParamView& v = whole.views()[i];
    pp.broadcast(buf + v.offset, v.numel * sizeof(float), int(owner[i]));
  }
}
}  // namespace

std::unique_ptr<nn::Model> gather_whole_model(const nn::Model& model, optim::Optimizer* optimizer,
                                              std::unique_ptr<optim::Optimizer>& whole_optimizer,
                                              dist::ProcessGrid& grid) {
  auto whole = nn::make_model(model.name());
  const nn::ParameterSet& p = model.params();
  nn::ParameterSet& w = whole->params();
  dist::Communicator& pp = grid.pp_comm();
  // This stage's tensors, whole (their shards gathered over the tensor group), then everyone's.
  dist::gather_shards(p, p.params(), w, w.params(), grid.tp_comm());
  const std::vector<int64_t> owner = owners(w.views(), [&](const std::string& n) { return has_param(p, n); }, pp);
  spread_params(w, w.params(), owner, pp);
  // Batch-norm buffers (never sharded).
  std::vector<int64_t> buffer_owner(w.buffer_views().size(), 0);
  for (std::size_t i = 0; i < w.buffer_views().size(); ++i) {
    const nn::BufferView& bw = w.buffer_views()[i];
    for (std::size_t j = 0; j < p.buffer_views().size(); ++j) {
      const nn::BufferView& bv = p.buffer_views()[j];
      if (bv.name != bw.name) continue;
      if (bw.int64)
        std::memcpy(w.counters() + bw.offset, p.counters() + bv.offset, bw.numel * sizeof(int64_t));
      else
        std::memcpy(w.buffers() + bw.offset, p.buffers() + bv.offset, bw.numel * sizeof(float));
      buffer_owner[i] = pp.rank() + 1;
    }
  }
  pp.allreduce_sum(buffer_owner.data(), buffer_owner.size());
  for (std::size_t i = 0; i < w.buffer_views().size(); ++i) {
    const nn::BufferView& bw = w.buffer_views()[i];
    check(buffer_owner[i] >= 1, "pipeline checkpoint: buffer '" + bw.name + "' is held by no stage");
    const int root = int(buffer_owner[i]) - 1;
    if (bw.int64)
      pp.broadcast(w.counters() + bw.offset, bw.numel * sizeof(int64_t), root);
    else
      pp.broadcast(w.buffers() + bw.offset, bw.numel * sizeof(float), root);
  }
  if (optimizer) {
    whole_optimizer = optimizer_like(*optimizer, w.size());
    auto st = optimizer->state(), whole_st = whole_optimizer->state();
    check(st.size() == whole_st.size(), "pipeline checkpoint: optimizer state does not match its whole counterpart");
    for (std::size_t b = 0; b < st.size(); ++b) {
      dist::gather_shards(p, st[b].data, w, whole_st[b].data, grid.tp_comm());
      spread_params(w, whole_st[b].data, owner, pp);
    }
  }
  return whole;
}

void save_grid_checkpoint(const std::string& path, const nn::Model& model, optim::Optimizer* optimizer,
                          const std::map<std::string, std::string>& metadata, dist::ProcessGrid& grid) {
  std::unique_ptr<optim::Optimizer> whole_optimizer;
  auto whole = gather_whole_model(model, optimizer, whole_optimizer, grid);
  if (grid.world_rank() == 0) save_checkpoint(path, *whole, whole_optimizer.get(), metadata);
}

void load_grid_weights(const std::string& path, nn::Model& model) {
  auto whole = nn::make_model(model.name());
  load_weights(path, *whole);  // strict; the model untouched if it throws
  nn::ParameterSet& p = model.params();
  const nn::ParameterSet& w = whole->params();
  dist::split_to_shards(w, w.params(), p, p.params());
  for (std::size_t j = 0; j < p.buffer_views().size(); ++j) {
    const nn::BufferView& bv = p.buffer_views()[j];
    bool found = false;
    for (const nn::BufferView& bw : w.buffer_views()) {
      if (bw.name != bv.name) continue;
      found = true;
      if (bv.int64)
        std::memcpy(p.counters() + bv.offset, w.counters() + bw.offset, bv.numel * sizeof(int64_t));
      else
        std::memcpy(p.buffers() + bv.offset, w.buffers() + bw.offset, bv.numel * sizeof(float));
    }
    check(found, path + ": the whole model has no buffer '" + bv.name + "'");
  }
}

}  // namespace ringtrain::train
