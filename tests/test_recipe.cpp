// The training recipe (docs/RECIPE.md): learning-rate schedules as pure functions of the training position,
// the exponential moving average of the weights (formula, warm-up, checkpoint round trip, what the trainer
// evaluates and leaves in the model) and label smoothing (the trainer's update equals the gradient of the
// smoothed cross-entropy, computed independently here in double precision) and the loader's row-wise
// random shift (equal to the per-pixel definition); the optimizers on several threads (the same bits).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/data/loader.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/optim/schedule.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/evaluate.h"
#include "ringtrain/train/trainer.h"

using namespace ringtrain;

namespace {

std::string temp_path(const std::string& name) {
  static std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("ringtrain_recipe_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  static const struct Cleanup {
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup;
  return dir + "/" + name;
}

// n random 28x28 images; the label is a function of the image so there is something to learn.
data::Split random_split(int n, uint64_t seed) {
  data::Split s;
  s.count = n;
  s.rows = s.cols = 28;
  std::vector<uint8_t> px(std::size_t(n) * 784);
  Rng rng(seed);
  s.labels.resize(std::size_t(n));
  for (int i = 0; i < n; ++i) {
    const int label = int(rng.below(10));
    s.labels[std::size_t(i)] = uint8_t(label);
    for (int k = 0; k < 784; ++k) px[std::size_t(i) * 784 + k] = uint8_t(rng.below(60));
    for (int c = 4; c < 24; ++c) px[std::size_t(i) * 784 + (2 * label + 4) * 28 + c] = 255;
  }
  s.images = data::ByteArray(std::move(px));
  return s;
}

}  // namespace

TEST(Schedule, ConstantIsTheBaseRateEverywhere) {
  optim::LrSchedule s;
  s.base_lr = 1e-3;
  for (double p : {0.0, 3.7, 9.99}) EXPECT_EQ(optim::scheduled_lr(s, p), 1e-3);
}

TEST(Schedule, LinearCosineAndStepDecayOnlyInsideTheirWindow) {
  optim::LrSchedule s;
  s.base_lr = 1e-3;
  s.epochs = 10;
  s.decay_epochs = 4;  // window [6, 10)
  s.min_factor = 0.1;
  s.kind = "linear";
  EXPECT_EQ(optim::scheduled_lr(s, 0.0), 1e-3);
  EXPECT_EQ(optim::scheduled_lr(s, 5.999), 1e-3);
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 6.0), 1e-3);
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 8.0), 1e-3 * (1.0 - 0.9 * 0.5));
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 10.0), 1e-4);
  s.kind = "cosine";
  EXPECT_EQ(optim::scheduled_lr(s, 5.0), 1e-3);
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 8.0), 1e-3 * (0.1 + 0.9 * 0.5));
  EXPECT_NEAR(optim::scheduled_lr(s, 10.0), 1e-4, 1e-12);
  s.kind = "step";
  EXPECT_EQ(optim::scheduled_lr(s, 5.99), 1e-3);
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 6.0), 1e-4);
  // decay_epochs 0: the whole run; the rate never rises.
  s.kind = "linear";
  s.decay_epochs = 0;
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 0.0), 1e-3);
  EXPECT_DOUBLE_EQ(optim::scheduled_lr(s, 5.0), 1e-3 * (1.0 - 0.9 * 0.5));
  double last = 1.0;
  for (double p = 0; p < 10; p += 0.25) {
    const double lr = optim::scheduled_lr(s, p);
    EXPECT_LE(lr, last);
    last = lr;
  }
}

TEST(Schedule, BadSettingsAreOneLineErrors) {
  optim::LrSchedule s;
  s.kind = "exponential";
  EXPECT_THROW(optim::check_schedule(s), Error);
  s.kind = "linear";
  s.min_factor = 1.5;
  EXPECT_THROW(optim::check_schedule(s), Error);
  s.min_factor = 0.0;
  s.decay_epochs = -1;
  EXPECT_THROW(optim::check_schedule(s), Error);
  s.decay_epochs = 3;
  EXPECT_NO_THROW(optim::check_schedule(s));
}

TEST(Ema, FollowsTheFormulaWithWarmUpAndIsAStateBuffer) {
  const std::size_t n = 37;
  optim::Sgd sgd(n, {});
  std::vector<float> p(n), g(n, 0.0f), e(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = float(i) * 0.25f - 3.0f;
  EXPECT_FALSE(sgd.has_ema());
  EXPECT_EQ(sgd.state().size(), 1u);
  sgd.enable_ema(0.99f, p.data());
  ASSERT_TRUE(sgd.has_ema());
  auto st = sgd.state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st.back().name, "ema");
  EXPECT_EQ(0, std::memcmp(sgd.ema(), p.data(), n * sizeof(float)));
  e = p;
  Rng rng(5);
  for (int t = 1; t <= 300; ++t) {
    for (auto& x : g) x = rng.uniform(-1.0f, 1.0f);
    sgd.step(p.data(), g.data());
    sgd.update_ema(p.data());
    const float d = float(std::min(0.99, (1.0 + t) / (10.0 + t)));
    for (std::size_t i = 0; i < n; ++i) e[i] += (1.0f - d) * (p[i] - e[i]);
    ASSERT_EQ(0, std::memcmp(sgd.ema(), e.data(), n * sizeof(float))) << "step " << t;
  }
  EXPECT_THROW(sgd.enable_ema(1.0f, p.data()), Error);
}

// Optimizer::set_thread_pool: Adam, SGD and the EMA split over 1-4 threads give the one-thread bits, over
// several spans of odd lengths (as --shard-optimizer leaves them) and through the vectorised Adam kernel.
TEST(OptimizerThreads, SameBitsOnAnyNumberOfThreads) {
  const std::size_t n = 1003;
  const std::vector<optim::Span> spans{{0, 5}, {5, 17}, {40, 600}, {700, 303}};  // 925 of the 1003 floats
  std::size_t state = 0;
  for (const optim::Span& s : spans) state += s.count;
  auto run = [&](bool adam, int threads) {
    std::unique_ptr<optim::Optimizer> opt;
    if (adam) {
      auto a = std::make_unique<optim::Adam>(state, optim::AdamOptions{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f});
      a->use_kernels(ops::kernels_for(ops::default_isa()));
      opt = std::move(a);
    } else {
      opt = std::make_unique<optim::Sgd>(state, optim::SgdOptions{1e-2f, 0.9f, 1e-4f, true});
    }
    opt->set_spans(spans);
    std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
    opt->set_thread_pool(pool.get());
    std::vector<float> p(n), g(n);
    Rng rng(9);
    for (auto& x : p) x = rng.uniform(-1.0f, 1.0f);
    opt->enable_ema(0.9f, p.data());
    for (int step = 0; step < 5; ++step) {
      for (auto& x : g) x = rng.uniform(-1.0f, 1.0f);
      opt->step(p.data(), g.data());
      opt->update_ema(p.data());
    }
    std::vector<float> out = p;
    for (const optim::StateBuffer& b : opt->state()) out.insert(out.end(), b.data, b.data + b.size);
    return out;
  };
  for (bool adam : {true, false}) {
    const std::vector<float> one = run(adam, 1);
    for (int T : {2, 3, 4}) {
      const std::vector<float> many = run(adam, T);
      ASSERT_EQ(one.size(), many.size());
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float))) << (adam ? "adam" : "sgd") << " T=" << T;
    }
  }
}

TEST(Ema, RoundTripsThroughACheckpointAndKindsDoNotMix) {
  auto model = nn::make_lenet5();
  model->init_parameters(3);
  nn::ParameterSet& p = model->params();
  optim::Adam adam(p.size(), {});
  adam.enable_ema(0.99f, p.params());
  Rng rng(1);
  for (int s = 0; s < 4; ++s) {
    for (const auto& v : p.views())
      for (std::size_t i = 0; i < v.numel; ++i) p.grads()[v.offset + i] = rng.uniform(-1e-2f, 1e-2f);
    adam.step(p.params(), p.grads());
    adam.update_ema(p.params());
  }
  const std::string path = temp_path("ema.safetensors");
  train::save_checkpoint(path, *model, &adam);
  optim::Adam restored(p.size(), {});
  std::vector<float> zeros(p.size(), 0.0f);
  restored.enable_ema(0.99f, zeros.data());
  train::load_optimizer_state(path, restored, *model);
  EXPECT_EQ(restored.steps(), 4);
  for (const auto& v : p.views())  // the alignment padding between views is not part of a checkpoint
    EXPECT_EQ(0, std::memcmp(restored.ema() + v.offset, adam.ema() + v.offset, v.numel * sizeof(float))) << v.name;
  optim::Adam plain(p.size(), {});
  try {
    train::load_optimizer_state(path, plain, *model);
    ADD_FAILURE() << "a checkpoint with an average loaded into an optimizer without one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ema"), std::string::npos) << e.what();
  }
}

TEST(Ema, TrainerEvaluatesTheAverageAndLeavesItInTheModel) {
  const data::Split train_split = random_split(96, 7), test_split = random_split(40, 8);
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  dist::LocalCommunicator comm;
  auto run = [&](double ema, std::vector<float>* ema_buffer) {
    auto model = nn::make_lenet5();
    model->init_parameters(4);
    train::TrainConfig c;
    c.epochs = 2;
    c.batch_size = 16;
    c.log_every = 0;
    c.quiet = true;
    c.ema = ema;
    std::ostringstream log;
    train::Trainer t(c, *model, k, comm, log);
    train::TrainResult r = t.fit(train_split, test_split);
    if (ema_buffer) ema_buffer->assign(t.optimizer().ema(), t.optimizer().ema() + model->params().size());
    const train::EvalResult again = train::evaluate(*model, k, test_split, comm);
    EXPECT_EQ(again.correct, r.test.correct) << "the model does not hold the weights evaluated last";
    EXPECT_EQ(again.loss_sum, r.test.loss_sum);
    return std::vector<float>(model->params().params(), model->params().params() + model->params().size());
  };
  std::vector<float> buffer;
  const std::vector<float> averaged = run(0.9, &buffer), raw = run(0.0, nullptr);
  EXPECT_EQ(0, std::memcmp(averaged.data(), buffer.data(), averaged.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(averaged.data(), raw.data(), averaged.size() * sizeof(float)))
      << "the averaged weights equal the raw ones";
  EXPECT_EQ(run(0.9, nullptr), averaged) << "not deterministic";
}

// One SGD step (lr 1, no momentum) over one batch of the whole split: the update must be the gradient of
// the mean smoothed cross-entropy, sum_k -[(1 - eps) onehot_k + eps / 10] log softmax_k, whose gradient
// with respect to the logits is softmax - target, here computed in double and backpropagated by the model.
TEST(LabelSmoothing, TheUpdateIsTheGradientOfTheSmoothedLoss) {
  const int N = 24;
  const data::Split split = random_split(N, 11);
  const ops::KernelTable& k = ops::kernels_for(ops::IsaLevel::Ref);
  dist::LocalCommunicator comm;
  for (double eps : {0.0, 0.2}) {
    auto model = nn::make_lenet5();
    model->init_parameters(9);
    const std::vector<float> before(model->params().params(), model->params().params() + model->params().size());
    train::TrainConfig c;
    c.epochs = 1;
    c.batch_size = N;
    c.optimizer = "sgd";
    c.momentum = 0.0;
    c.lr = 1.0;
    c.log_every = 0;
    c.quiet = true;
    c.workers = 0;
    c.label_smoothing = eps;
    std::ostringstream log;
    train::Trainer t(c, *model, k, comm, log);
    t.fit(split, split);

    auto ref = nn::make_lenet5();
    ref->init_parameters(9);
    ref->reserve(N);
    std::vector<float> x(std::size_t(N) * 784);
    data::normalize_pixels(x.data(), split.image(0), int64_t(N) * 784);
    const float* logits = ref->forward(k, x.data(), N);
    std::vector<float> dlogits(std::size_t(N) * 10);
    for (int n = 0; n < N; ++n) {
      double m = -1e300, z = 0;
      for (int j = 0; j < 10; ++j) m = std::max(m, double(logits[n * 10 + j]));
      for (int j = 0; j < 10; ++j) z += std::exp(double(logits[n * 10 + j]) - m);
      for (int j = 0; j < 10; ++j) {
        const double prob = std::exp(double(logits[n * 10 + j]) - m) / z;
        const double target = (j == split.labels[std::size_t(n)] ? 1.0 - eps : 0.0) + eps / 10.0;
        dlogits[std::size_t(n) * 10 + j] = float((prob - target) / N);
      }
    }
    ref->backward(k, x.data(), dlogits.data(), N);
    const float* g = ref->params().grads();
    const float* after = model->params().params();
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < before.size(); ++i) {
      worst = std::max(worst, std::abs(double(before[i]) - double(after[i]) - double(g[i])));
      scale = std::max(scale, std::abs(double(g[i])));
    }
    EXPECT_LT(worst, 1e-5 * scale) << "eps " << eps;
  }
}

// The loader's row-wise shift equals the per-pixel definition out[y][x] = in[y - dy][x - dx] (0 outside),
// with (dy, dx) drawn from (seed, epoch, sample index), on a non-square image with shifts up to 3 px.
TEST(Shift, RowWiseCopyEqualsThePerPixelDefinition) {
  data::Split s;
  s.count = 40;
  s.rows = 7;
  s.cols = 9;
  std::vector<uint8_t> px(std::size_t(40) * 63);
  Rng fill(3);
  for (auto& p : px) p = uint8_t(fill.below(256));
  s.images = data::ByteArray(std::move(px));
  s.labels.assign(40, 0);
  const int max_shift = 3;
  const uint64_t seed = 17;
  for (int64_t epoch : {0, 5}) {
    data::BatchLoader loader(s, 6, 1, 2, data::Augment{max_shift, seed});
    std::vector<int64_t> order(40);
    for (int i = 0; i < 40; ++i) order[std::size_t(i)] = (i * 7) % 40;
    loader.start_epoch(order, 0, epoch);
    int seen = 0;
    for (data::Batch b = loader.next(); b.N; b = loader.next())
      for (int n = 0; n < b.N; ++n, ++seen) {
        const int64_t index = b.indices[n];
        Rng rng(mix64(seed ^ mix64(uint64_t(epoch) * 0x100000000ULL + uint64_t(index))));
        const int dy = int(rng.below(7)) - max_shift, dx = int(rng.below(7)) - max_shift;
        const uint8_t* in = s.image(index);
        for (int y = 0; y < 7; ++y)
          for (int x = 0; x < 9; ++x) {
            const int sy = y - dy, sx = x - dx;
            const float want = (sy >= 0 && sy < 7 && sx >= 0 && sx < 9) ? float(in[sy * 9 + sx]) * data::kPixelScale : 0.0f;
            ASSERT_EQ(b.x[n * 63 + y * 9 + x], want) << "sample " << index << " shift " << dy << "," << dx << " at " << y << "," << x;
          }
      }
    EXPECT_EQ(seen, 40);
  }
}
