#include "ringtrain/train/pipeline_balance.h"

#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/node_timing.h"

namespace ringtrain::train {

MeasuredCut measured_cut(const std::string& model_name, const ops::KernelTable& k, int micro_batch, int P,
                         dist::Communicator& world) {
  auto model = nn::make_model(model_name);
  model->init_parameters(0);  // realistic values (zeros could take other paths through ReLU and pooling)
  MeasuredCut m;
  m.seconds = nn::time_nodes(*model, k, micro_batch, 5);
  world.allreduce_sum(m.seconds.data(), m.seconds.size());
  for (double& t : m.seconds) t /= world.size();
  // One rank decides and tells the others (a sum's last bits may differ between ranks; a cut must not).
  world.broadcast(m.seconds.data(), m.seconds.size() * sizeof(double), 0);
  m.cut = nn::balanced_cut(*model, m.seconds, P);
  return m;
}

}  // namespace ringtrain::train
