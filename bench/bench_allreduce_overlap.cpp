// Gradient all-reduce in the training step: LeNet-5 steps (fast kernels, synthetic data, batch B per rank,
// Adam) with the GradReducer overlapping backward vs --no-overlap, ring vs mpi. Reports per step: time,
// the time the step waited for gradients after backward (what overlap shrinks), time inside all-reduce
// calls, and global samples/s. Modes are interleaved in blocks so machine noise hits them alike; figures
// are medians over blocks.
//
//   mpirun -np 2 bench_allreduce_overlap [--batch 64] [--steps 50] [--blocks 5] [--bucket-kb 128]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"

using namespace ringtrain;
using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  dist::MpiSession mpi(&argc, &argv);
  int B = 64, steps = 50, blocks = 5;
  std::size_t bucket_kb = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long v = std::atol(argv[i + 1]);
    if (a == "--batch") B = int(v);
    else if (a == "--steps") steps = int(v);
    else if (a == "--blocks") blocks = int(v);
    else if (a == "--bucket-kb") bucket_kb = std::size_t(v);
    else {
      std::fprintf(stderr, "bench_allreduce_overlap: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  struct Mode {
    dist::AllreduceAlgorithm algo;
    bool overlap;
    std::vector<double> step_ms, wait_ms, comm_ms;
  };
  std::vector<Mode> modes = {{dist::AllreduceAlgorithm::Ring, true, {}, {}, {}},
                             {dist::AllreduceAlgorithm::Ring, false, {}, {}, {}},
                             {dist::AllreduceAlgorithm::Mpi, true, {}, {}, {}},
                             {dist::AllreduceAlgorithm::Mpi, false, {}, {}, {}}};
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  auto model = nn::make_lenet5();
  model->init_parameters(0);
  model->reserve(B);
  auto& p = model->params();
  std::vector<float> x(std::size_t(B) * 784), probs(B * 10), dlogits(B * 10);
  std::vector<uint8_t> y(B);
  int rank = 0, W = 1;
  {
    dist::MpiCommunicator world(MPI_COMM_WORLD, {});
    rank = world.rank();
    W = world.size();
    Rng rng(7 + rank);
    for (auto& v : x) v = rng.uniform();
    for (auto& v : y) v = uint8_t(rng.below(10));
    world.broadcast(p.params(), p.size() * sizeof(float), 0);
  }
  optim::Adam adam(p.size(), {});
  for (int blk = 0; blk < blocks + 1; ++blk) {  // block 0 is warm-up
    for (auto& m : modes) {
      dist::MpiOptions mo;
      mo.algorithm = m.algo;
      dist::MpiCommunicator comm(MPI_COMM_WORLD, mo);
      dist::GradReducer reducer(p, comm, {.bucket_bytes = bucket_kb << 10, .overlap = m.overlap});
      comm.barrier();
      auto t0 = Clock::now();
      for (int s = 0; s < steps; ++s) {
        std::memset(p.grads(), 0, p.size() * sizeof(float));
        const float* logits = model->forward(k, x.data(), B);
        k.softmax_xent_forward(probs.data(), logits, y.data(), B, 10);
        k.softmax_xent_backward(dlogits.data(), probs.data(), y.data(), B, 10, 1.0f / float(B));
        model->backward(k, x.data(), dlogits.data(), B, reducer.hook());
        reducer.wait();
        adam.step(p.params(), p.grads());
      }
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / steps;
      double slowest = 0;
      MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (blk > 0) {
        m.step_ms.push_back(slowest);
        m.wait_ms.push_back(1e3 * reducer.stats().wait_s / steps);
        m.comm_ms.push_back(1e3 * reducer.stats().comm_s / steps);
      }
    }
  }
  if (rank == 0) {
    std::printf("# LeNet-5 step, %d ranks x batch %d, kernels %s, buckets %zu KiB, %d steps x %d blocks (medians)\n", W,
                B, ops::isa_name(k.level), bucket_kb, steps, blocks);
    std::printf("| all-reduce | overlap | step (ms) | wait for gradients (ms/step) | in all-reduce (ms/step) | samples/s |\n");
    std::printf("|---|---|---:|---:|---:|---:|\n");
    for (auto& m : modes) {
      double st = median(m.step_ms);
      std::printf("| %s | %s | %.3f | %.3f | %.3f | %.0f |\n", dist::allreduce_name(m.algo), m.overlap ? "on" : "off", st,
                  median(m.wait_ms), median(m.comm_ms), W * B / (st / 1e3));
    }
  }
  return 0;
}
