// Pipeline parallelism's multi-rank pieces (issue 15), under mpirun with 1-4 ranks: point-to-point
// messages (in order per tag, on their own communicator), a point-to-point wait past the timeout reported
// by the watchdog naming the peer and the group, the 3-D grid's layout (Megatron's order), and the
// PipelineEngine with one stage a rank (P = W) against one process running the same micro-batches: every
// stage's parameter gradients, batch-norm statistics and the loss bit for bit, for lenet5 and vit (GPipe
// and 1F1B, M = 1, 3 and 4: M not a multiple of P) and resnet18 (1F1B: the stage copies holding micro-batches
// move the batch-norm statistics in micro-batch order).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/pipeline_stages.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/train/grad_accumulator.h"
#include "ringtrain/train/pipeline_balance.h"
#include "ringtrain/train/pipeline_engine.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

MpiOptions test_options() {
  MpiOptions o;
  o.timeout_s = 120;
  return o;
}

TEST(PointToPoint, MessagesArriveInOrderAroundARing) {
  const int W = world_size(), r = world_rank();
  if (W == 1) GTEST_SKIP() << "needs a peer";
  MpiCommunicator comm(MPI_COMM_WORLD, test_options());
  const int next = (r + 1) % W, prev = (r + W - 1) % W;
  std::vector<std::vector<float>> out(3), in(3);
  std::vector<Communicator::Request> reqs;
  for (int i = 0; i < 3; ++i) {
    in[std::size_t(i)].assign(std::size_t(100 * (i + 1)), -1.0f);
    reqs.push_back(comm.start_recv(in[std::size_t(i)].data(), in[std::size_t(i)].size() * sizeof(float), prev, 7, "recv test"));
  }
  // A collective in between never takes a point-to-point message (its own communicator).
  int64_t one = 1;
  comm.allreduce_sum(&one, 1);
  EXPECT_EQ(one, W);
  for (int i = 0; i < 3; ++i) {
    out[std::size_t(i)].resize(std::size_t(100 * (i + 1)));
    for (std::size_t j = 0; j < out[std::size_t(i)].size(); ++j) out[std::size_t(i)][j] = float(r * 1000 + i * 100) + float(j);
    reqs.push_back(comm.start_send(out[std::size_t(i)].data(), out[std::size_t(i)].size() * sizeof(float), next, 7, "send test"));
  }
  while (!comm.test_p2p(reqs[0])) {
  }
  for (std::size_t i = 1; i < reqs.size(); ++i) comm.wait_p2p(reqs[i]);
  for (int i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < in[std::size_t(i)].size(); ++j)
      ASSERT_EQ(in[std::size_t(i)][j], float(prev * 1000 + i * 100) + float(j)) << "message " << i;
  EXPECT_THROW(comm.start_send(out[0].data(), 4, r, 7, "to myself"), Error);
  EXPECT_THROW(comm.wait_p2p(12345), Error);
}

TEST(PointToPoint, AWaitPastTheTimeoutNamesThePeerAndTheGroup) {
  const int W = world_size(), r = world_rank();
  if (W == 1) GTEST_SKIP() << "needs a peer";
  auto message = std::make_shared<std::string>();
  auto mu = std::make_shared<std::mutex>();
  MpiOptions o;
  o.timeout_s = 0.2;
  o.group = "pipeline";
  o.on_timeout = [message, mu](const std::string& m) {
    std::lock_guard<std::mutex> lock(*mu);
    *message = m;
  };
  MpiCommunicator comm(MPI_COMM_WORLD, o);
  float buf[4] = {1, 2, 3, 4};
  if (r == 0) {
    auto req = comm.start_recv(buf, sizeof buf, 1, 3, "recv activation gradients");
    comm.wait_p2p(req);  // rank 1 sends only after the timeout has passed
  } else if (r == 1) {
    usleep(800 * 1000);
    auto req = comm.start_send(buf, sizeof buf, 0, 3, "send activation gradients");
    comm.wait_p2p(req);
  }
  comm.barrier();
  if (r == 0) {
    std::lock_guard<std::mutex> lock(*mu);
    EXPECT_NE(message->find("rank 0 of " + std::to_string(W) + " in the pipeline group (world rank 0): point-to-point "
                            "recv activation gradients(16 bytes) with rank 1 (world rank 1) did not finish within 0.2 s"),
              std::string::npos)
        << *message;
  }
}

TEST(ProcessGrid3D, TensorFastestThenDataThenPipeline) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  for (int pp : {1, 2, 4}) {
    if (W % pp) continue;
    ProcessGrid g(world, 1, test_options(), pp);
    EXPECT_EQ(g.pp(), pp);
    EXPECT_EQ(g.dp(), W / pp);
    EXPECT_EQ(g.pp_rank(), r / (W / pp));
    EXPECT_EQ(g.dp_rank(), r % (W / pp));
    EXPECT_EQ(g.world_rank_at(g.dp_rank(), g.pp_rank(), 0), r);
    EXPECT_EQ(g.pp_comm().rank(), g.pp_rank());
    EXPECT_EQ(g.pp_comm().size(), pp);
    EXPECT_EQ(g.dp_comm().size(), W / pp);
  }
  if (W == 4) {  // dp 1 x pp 2 x tp 2: ranks 0,1 stage 0; 2,3 stage 1
    ProcessGrid g(world, 2, test_options(), 2);
    EXPECT_EQ(g.tp_rank(), r % 2);
    EXPECT_EQ(g.pp_rank(), r / 2);
    EXPECT_EQ(g.dp(), 1);
  }
  EXPECT_THROW(check_grid(4, 2, 3), Error);
  EXPECT_THROW(check_grid(4, 1, 0), Error);
}

// --pp-balance time: stage s's row is the average of the times its own ranks measured (each rank the grid
// puts on stage s, the pipeline coordinate slowest), the same on every rank; a stage on slower ranks gets
// fewer nodes of the cut.
TEST(PipelineBalance, EachStageIsPricedByItsOwnRanks) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  auto lenet = nn::make_model("lenet5");  // every node boundary is a chain point
  const std::size_t L = lenet->layers().size();
  for (int P : {1, 2, 3, 4}) {
    if (W % P) continue;
    ProcessGrid g(world, 1, test_options(), P);
    // Rank r measures every node at (r + 1) ms: a later rank is a slower core.
    const std::vector<std::vector<double>> rows = train::stage_times(std::vector<double>(L, 1e-3 * (r + 1)), P, world);
    ASSERT_EQ(rows.size(), std::size_t(P));
    const int per = W / P;
    for (int s = 0; s < P; ++s) {
      double want = 0;  // the mean of (w + 1) ms over the ranks w of stage s
      for (int w = s * per; w < (s + 1) * per; ++w) want += 1e-3 * (w + 1);
      want /= per;
      ASSERT_EQ(rows[std::size_t(s)].size(), L);
      for (double t : rows[std::size_t(s)]) EXPECT_NEAR(t, want, 1e-15) << "P " << P << " stage " << s;
    }
    EXPECT_EQ(g.pp_rank(), r / per) << "the rows follow the grid's stage of each rank";
    if (P == 2) {  // stage 1's ranks are slower: stage 0 takes more than half the nodes
      const nn::StageCut cut = nn::balanced_cut(*lenet, rows);
      EXPECT_GT(cut.begin(1), int(L) / 2);
    }
  }
  EXPECT_THROW(train::stage_times(std::vector<double>(L, 1.0), W + 1, world), Error);
}

// One process's reference (Trainer::step's order) against the pipeline with one stage a rank.
void expect_pipeline_matches(const std::string& name, train::PipeSchedule sched, int M, int N) {
  const int W = world_size();
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  ProcessGrid grid(world, 1, test_options(), W);
  const auto& k = ops::kernels_for(ops::default_isa());
  const std::size_t in = 784;
  std::vector<float> x(std::size_t(N) * in);
  std::vector<uint8_t> labels(static_cast<std::size_t>(N));
  Rng rng(11);
  for (float& v : x) v = rng.uniform(0.0f, 1.0f);
  for (uint8_t& l : labels) l = uint8_t(rng.next_u64() % 10);
  const int K = 10;
  std::vector<float> probs(std::size_t(N) * K), dl(std::size_t(N) * K);

  auto ref = nn::make_model(name);
  ref->init_parameters(5);
  ref->reserve(N / M);
  train::GradAccumulator acc(ref->params(), k);
  double loss_sum = 0;
  for (int m = 0; m < M; ++m) {
    const train::MicroBatchRange mb = train::micro_batch(N, M, m);
    const int n = mb.size();
    const float* xm = x.data() + std::size_t(mb.begin) * in;
    ref->set_step(0, 0, nullptr);
    const float* logits = ref->forward(k, xm, n);
    loss_sum += double(k.softmax_xent_forward(probs.data(), logits, labels.data() + mb.begin, n, K)) * n;
    k.softmax_xent_backward(dl.data(), probs.data(), labels.data() + mb.begin, n, K, 1.0f / float(N));
    ref->backward(k, xm, dl.data(), n);
    if (m + 1 < M) {
      if (m == 0) acc.start();
      else acc.add();
    } else if (M > 1) {
      acc.finish_all();
    }
  }
  const float want_loss = float(loss_sum / double(N));

  auto whole = nn::make_model(name);
  whole->init_parameters(5);
  auto probe = nn::make_model(name);
  const nn::StageCut cut = nn::balanced_cut(*probe, W);
  auto stage = nn::take_stage(std::move(whole), cut, grid.pp_rank());
  std::unique_ptr<train::GradAccumulator> sum;
  if (M > 1) sum = std::make_unique<train::GradAccumulator>(stage->params(), k);
  train::PipelineEngine engine(*stage, [&] { return nn::take_stage(nn::make_model(name), cut, grid.pp_rank()); },
                               grid.pp_comm(), sched, M, N / M);
  data::Batch batch;
  batch.x = x.data();
  batch.labels = labels.data();
  batch.N = N;
  std::vector<float> probs2(std::size_t(N) * K);
  const float loss = engine.train_step(k, batch, 0, 0, sum.get(), {},
                                       [&](const float* logits, const uint8_t* lab, int n, float* dlogits) {
                                         const float l = k.softmax_xent_forward(probs2.data(), logits, lab, n, K);
                                         k.softmax_xent_backward(dlogits, probs2.data(), lab, n, K, 1.0f / float(N));
                                         return l;
                                       });
  EXPECT_EQ(loss, want_loss) << name;
  const nn::ParameterSet& p = stage->params();
  for (const auto& v : p.views()) {
    const auto& w = ref->params().view(v.name);
    EXPECT_EQ(std::memcmp(p.grads() + v.offset, ref->params().grads() + w.offset, v.numel * sizeof(float)), 0)
        << name << " " << train::pp_schedule_name(sched) << " M=" << M << ": gradient of " << v.name;
  }
  for (const auto& b : p.buffer_views())
    for (const auto& wb : ref->params().buffer_views())
      if (wb.name == b.name && !b.int64)
        EXPECT_EQ(std::memcmp(p.buffers() + b.offset, ref->params().buffers() + wb.offset, b.numel * sizeof(float)), 0)
            << name << ": " << b.name;
  EXPECT_LE(engine.stats().most_in_flight, engine.in_flight());
  if (sched == train::PipeSchedule::OneFOneB) EXPECT_LE(engine.in_flight(), W - grid.pp_rank());
}

TEST(PipelineEngine, LeNet5MatchesOneProcessBitForBit) {
  for (auto sched : {train::PipeSchedule::GPipe, train::PipeSchedule::OneFOneB})
    for (int M : {1, 3, 4}) expect_pipeline_matches("lenet5", sched, M, 24);
}

TEST(PipelineEngine, ViTMatchesOneProcessBitForBit) {
  for (auto sched : {train::PipeSchedule::GPipe, train::PipeSchedule::OneFOneB})
    for (int M : {3, 4}) expect_pipeline_matches("vit", sched, M, 12);
}

TEST(PipelineEngine, ResNet18BatchNormStatisticsSeeEachMicroBatchOnce) {
  expect_pipeline_matches("resnet18", train::PipeSchedule::OneFOneB, 2, 4);
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
