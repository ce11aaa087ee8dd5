#include "ringtrain/train/tp_checkpoint.h"

#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain::train {

WholeModelFactory whole_model_factory(const std::string& name) {
  return [name] { return nn::make_model(name); };
}

WholeModelFactory lenet5_factory() { return whole_model_factory("lenet5"); }

namespace {
std::unique_ptr<nn::Model> make_whole_of(const nn::Model& model, const WholeModelFactory& make_whole) {
  return make_whole ? make_whole() : nn::make_model(model.name());
}
}  // namespace

std::unique_ptr<optim::Optimizer> optimizer_like(optim::Optimizer& like, std::size_t n) {
  std::unique_ptr<optim::Optimizer> out;
  if (dynamic_cast<optim::Adam*>(&like)) {
    optim::AdamOptions o;
    o.lr = like.lr();
    out = std::make_unique<optim::Adam>(n, o);
  } else if (dynamic_cast<optim::Sgd*>(&like)) {
    optim::SgdOptions o;
    o.lr = like.lr();
    out = std::make_unique<optim::Sgd>(n, o);
  } else {
    throw Error("tensor-parallel checkpoint: unknown optimizer kind");
  }
  out->set_steps(like.steps());
  if (like.has_ema()) {  // the weight average travels as one more state buffer ("ema")
    std::vector<float> zeros(n, 0.0f);
    out->enable_ema(like.ema_decay(), zeros.data());
  }
  return out;
}

void save_sharded_checkpoint(const std::string& path, const nn::Model& model, optim::Optimizer* optimizer,
                             const std::map<std::string, std::string>& metadata, dist::ProcessGrid& grid,
                             const WholeModelFactory& make_whole) {
  auto whole = make_whole_of(model, make_whole);
  const nn::ParameterSet& p = model.params();
  nn::ParameterSet& w = whole->params();
  dist::gather_shards(p, p.params(), w, w.params(), grid.tp_comm());
  std::unique_ptr<optim::Optimizer> whole_opt;
  if (optimizer) {
    whole_opt = optimizer_like(*optimizer, w.size());
    auto st = optimizer->state(), whole_st = whole_opt->state();
    check(st.size() == whole_st.size(), path + ": optimizer state does not match its whole counterpart");
    for (std::size_t b = 0; b < st.size(); ++b) dist::gather_shards(p, st[b].data, w, whole_st[b].data, grid.tp_comm());
  }
  if (grid.world_rank() == 0) save_checkpoint(path, *whole, whole_opt.get(), metadata);
}

void load_sharded_weights(const std::string& path, nn::Model& model, const WholeModelFactory& make_whole) {
  auto whole = make_whole_of(model, make_whole);
  load_weights(path, *whole);
  dist::split_to_shards(whole->params(), whole->params().params(), model.params(), model.params().params());
}

void load_sharded_optimizer_state(const std::string& path, optim::Optimizer& optimizer, const nn::Model& model,
                                  const WholeModelFactory& make_whole) {
  auto whole = make_whole_of(model, make_whole);
  auto whole_opt = optimizer_like(optimizer, whole->params().size());
  load_optimizer_state(path, *whole_opt, *whole);
  auto st = optimizer.state(), whole_st = whole_opt->state();
  for (std::size_t b = 0; b < st.size(); ++b)
    dist::split_to_shards(whole->params(), whole_st[b].data, model.params(), st[b].data);
  optimizer.set_steps(whole_opt->steps());
}

}  // namespace ringtrain::train
