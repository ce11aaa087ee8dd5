#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include "ringtrain/core/aligned.h"
#include "ringtrain/core/peak.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/ops/kernels.h"
using namespace ringtrain;
static std::unique_ptr<nn::Model> stage(int b, int e) {
  auto w = nn::make_model("vit"); w->init_parameters(0);
  return nn::Model::cut(std::move(*w), b, e);
}
int main(int argc, char** argv) {
  int b = atoi(argv[1]), e = atoi(argv[2]), N = atoi(argv[3]), mode = atoi(argv[4]), iters = atoi(argv[5]);
  const auto& k = ops::kernels_for(ops::default_isa());
  auto m0 = stage(b, e), m1 = stage(b, e);
  m1->share_parameters(*m0); m1->share_value_gradients(*m0);
  for (auto* m : {m0.get(), m1.get()}) { m->set_input_gradient(b > 0); m->reserve(N); m->set_training(true); m->set_step(0,0,nullptr);}
  size_t in = size_t(N) * shape_numel(m0->input_shape());
  size_t out = size_t(N) * shape_numel(m0->value_shape(int(m0->layers().size())));
  Rng rng(1); AlignedBuffer<float> x0(in), x1(in), d(out);
  for (size_t i = 0; i < in; ++i) { x0[i] = rng.uniform(); x1[i] = rng.uniform(); }
  for (size_t i = 0; i < out; ++i) d[i] = rng.uniform(-1.f, 1.f) / N;
  std::vector<double> tf, tb;
  m0->forward(k, x0.data(), N);
  for (int i = 0; i < iters; ++i) {
    nn::Model* f = mode == 0 ? m0.get() : ((i % 2) ? m0.get() : m1.get());
    nn::Model* bb = mode == 0 ? m0.get() : ((i % 2) ? m1.get() : m0.get());
    const float* xf = (mode == 0 || (i % 2)) ? x0.data() : x1.data();
    const float* xb = (mode == 0 || !(i % 2)) ? x0.data() : x1.data();
    double t0 = bench::wall_seconds(); f->forward(k, xf, N); double t1 = bench::wall_seconds();
    bb->backward(k, xb, d.data(), N); double t2 = bench::wall_seconds();
    tf.push_back(t1 - t0); tb.push_back(t2 - t1);
  }
  std::sort(tf.begin(), tf.end()); std::sort(tb.begin(), tb.end());
  printf("mode %d F %.0f B %.0f us (medians)\n", mode, tf[tf.size() / 2] * 1e6, tb[tb.size() / 2] * 1e6);
}
