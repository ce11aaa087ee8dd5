// `ringtrain train`: trains a model of the zoo (--model) on a dataset and prints the test accuracy.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#include <iostream>
#include <map>
#include <memory>

#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/launcher.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/pipeline_stages.h"
#include "ringtrain/nn/tp_regions.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"
#include "ringtrain/dist/allreduce_calibration.h"
#include "ringtrain/dist/half_allreduce.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/memory_report.h"
#include "ringtrain/train/overlap_trial.h"
#include "ringtrain/train/pipeline_balance.h"
#include "ringtrain/train/pipeline_trace.h"
#include "ringtrain/train/pp_checkpoint.h"
#include "ringtrain/train/tp_checkpoint.h"
#include "ringtrain/train/progress.h"
#include "ringtrain/train/shard_policy.h"
#include "ringtrain/train/trainer.h"

namespace ringtrain::cli {

namespace {

Options train_options() {
  Options o("ringtrain train [options]",
            "Trains a model of the zoo (--model) and prints `test accuracy: NN.NN%` at the end. Datasets: `digits` (10,000 real\n"
            "MNIST digits, made by `ringtrain data prepare`), `fashion` (Debian's Fashion-MNIST) or a directory\n"
            "holding the four standard IDX files. The default recipe (every dataset): Adam, label smoothing 0.2,\n"
            "evaluation and --save on an EMA of the weights (0.99), random 1-pixel shifts, constant lr; plain\n"
            "torch.optim training is --label-smoothing 0 --ema 0 --augment-shift 0 (docs/RECIPE.md).");
  o.add("model", "lenet5", "lenet5 | resnet18 | mobilenet_v2 | vit (torchvision 0.14's, 1-channel stem; docs/MODELS.md)");
  o.add("data", "digits", "dataset: digits | fashion | DIR");
  o.add("epochs", "10", "passes over the training split");
  o.add("batch-size", "64", "samples per step on each rank (global batch = this x ranks)");
  o.add("lr", "0.001", "learning rate");
  o.add("optimizer", "adam", "adam | sgd (momentum)");
  o.add("momentum", "0.9", "SGD momentum");
  o.add("weight-decay", "0", "L2 weight decay (added to the gradient, as torch.optim)");
  o.add("seed", "0", "seed of the initial weights and of the per-epoch shuffle");
  o.add("log-every", "100", "batches between log lines (0: none)");
  o.add("metrics", "", "write JSON-lines metrics (loss, lr, samples/s, data wait, test accuracy) to this file");
  o.add_flag("quiet", "print only the epoch summaries and the final lines");
  o.add("progress", "auto", "auto (a bar on a terminal, log lines otherwise and under mpirun) | bar | lines");
  o.add("max-steps", "0", "stop after this many steps (0: run all epochs)");
  o.add("workers", "auto", "loader threads preparing batches ahead of the step (0: prepare on the step's thread; "
                            "auto: 1, or 0 when this process may run on one core only, e.g. mpirun --bind-to core)");
  o.add("prefetch", "4", "batches the loader prepares ahead");
  o.add("augment-shift", "1", "shift each training sample by a random whole number of pixels up to this, per axis "
                             "(0: off; default recipe, docs/RECIPE.md)");
  o.add("lr-schedule", "constant", "learning rate over training: constant | linear | cosine | step (--lr is the peak; docs/RECIPE.md)");
  o.add("lr-decay-epochs", "0", "the schedule's decay covers the last this many epochs (0: the whole run)");
  o.add("lr-min-factor", "0", "linear/cosine: the rate ends at --lr x this; step: the rate during the decay epochs");
  o.add("ema", "0.99", "evaluate and --save an exponential moving average of the weights with this decay (0: off)");
  o.add("label-smoothing", "0.2", "train against (1 - eps) one-hot + eps / 10 targets (0: plain cross-entropy)");
  o.add("isa", "auto", "kernels: auto | ref | scalar | avx2 | avx512 (also env RINGTRAIN_ISA)");
  o.add("precision", "fp32", "compute: fp32 | bf16 (vdpbf16ps kernels where the CPU has them) | fp16 (storage, "
                             "fp32 math, dynamic loss scaling); master weights and Adam state stay fp32");
  o.add("grad-comm", "fp32", "gradients on the wire in the all-reduce: fp32 | bf16 | fp16 (summed in fp32)");
  o.add("threads", "1", "threads inside each rank, splitting every step's batch (a fixed pool)");
  o.add("nproc", "", "run N ranks on this machine (re-runs this command under mpirun -np N)");
  o.add("allreduce", "auto", "gradient all-reduce: auto (per bucket, the cheapest by a cost model calibrated at "
        "start-up) | ring | hd (halving-doubling) | rd (recursive doubling) | hier (inside each host, then between "
        "hosts) | mpi (the library's MPI_Allreduce)");
  o.add("allreduce-calibration", "", "--allreduce auto: read the calibration from this JSON file; measure and "
        "write it there when the file does not exist");
  o.add("bucket-kb", "128", "gradient bucket size in KiB (all-reduces start as buckets fill during backward)");
  o.add("overlap", "auto", "overlap the gradient all-reduces with backward: auto (time a few steps each way, keep the faster) | on | off");
  o.add_flag("no-overlap", "the same as --overlap off: all-reduce the gradients only after backward");
  o.add("progress-thread-us", "auto", "0: the gradient all-reduces move at backward's layer boundaries; N > 0: a "
        "progress thread also moves them every N microseconds (slow networks, long layers); auto: 500 when the "
        "data-parallel group spans hosts, else 0");
  o.add_flag("shard-optimizer", "ZeRO-1: each rank keeps the optimizer state of 1/W of the parameters (reduce-scatter, "
             "update, all-gather); the default with 2 data-parallel ranks on one host under --allreduce auto");
  o.add_flag("no-shard-optimizer", "keep the whole optimizer state on every rank, also with 2 data-parallel ranks on one host");
  o.add("timeout", "1800", "seconds a collective may take before the whole job is aborted (0: never)");
  o.add("tp", "1", "tensor-parallel ranks: lenet5's fc1/fc2 or vit's encoder (attention by heads, MLP) split over this "
                   "many ranks (must divide the ranks, and for vit its 4 heads; dp = ranks / tp)");
  o.add("micro-batches", "1", "cut each step's per-rank batch into this many micro-batches, gradients accumulated "
                             "(one optimizer step; must divide --batch-size)");
  o.add("pp", "1", "pipeline stages: the model's layers cut into this many contiguous stages, one a rank, "
                   "activations passed between them (--pp x --tp must divide the ranks; dp = ranks / (pp x tp))");
  o.add("pp-split", "", "--pp: the node indices where stages 2..P start, comma-separated, each a chain point "
                        "(empty: balanced by the layers' cost)");
  o.add("pp-balance", "time", "--pp without --pp-split: balance the stages by node times measured at start on the "
                              "ranks that run them (time) or by the layers' cost counts (cost: the same cut every run)");
  o.add("pp-trace", "", "--pp: write the last 4 training steps of every stage of world rank 0's pipeline (passes and "
                        "message waits) to this file as a Chrome trace (chrome://tracing, ui.perfetto.dev)");
  o.add("pp-schedule", "1f1b", "--pp: the micro-batches' order on a stage: 1f1b (at most P in flight) | gpipe "
                               "(all forwards, then all backwards)");
  o.add_flag("drop-last", "drop the samples that do not divide by the number of ranks (else pad, as PyTorch)");
  o.add("save", "", "write the final weights to this safetensors checkpoint");
  o.add("checkpoint-dir", "", "write periodic checkpoints (weights, optimizer and trainer state) here");
  o.add("checkpoint-every", "0", "steps between periodic checkpoints (0: one at the end)");
  o.add("keep-checkpoints", "3", "newest periodic checkpoints kept");
  o.add_flag("resume", "continue from the newest valid checkpoint in --checkpoint-dir (mid-epoch, any world size)");
  o.add("max-restarts", "0", "with --nproc: relaunch the ranks from the newest checkpoint up to this many times");
  o.add("init-from", "", "start from the weights of this checkpoint instead of a fresh initialisation");
  return o;
}

// --shard-optimizer: what each data-parallel rank keeps of the optimizer state (collective; rank 0 prints).
void print_optimizer_shards(optim::Optimizer& optimizer, std::size_t whole_floats, dist::Communicator& dp) {
  std::vector<int64_t> held(std::size_t(dp.size()), 0);
  held[std::size_t(dp.rank())] = int64_t(optimizer.state_floats());
  dp.allreduce_sum(held.data(), held.size());
  if (dp.rank() != 0) return;
  const std::size_t buffers = optimizer.state().size();
  const int64_t most = *std::max_element(held.begin(), held.end());
  std::printf("optimizer state sharded over %d ranks: %zu buffer(s) of", dp.size(), buffers);
  for (int64_t h : held) std::printf(" %lld", (long long)h);
  std::printf(" floats (whole: %zu); the most on one rank %.2f%% of the whole (1/W = %.2f%%), %lld bytes\n",
              whole_floats, 100.0 * double(most) / double(whole_floats), 100.0 / dp.size(),
              (long long)(most * int64_t(buffers) * int64_t(sizeof(float))));
}

// --pp: what each stage holds (collective over the world; world rank 0 prints one line a stage, from the
// ranks of data-parallel group 0 and tensor rank 0).
void print_pipeline_memory(const train::PipelineEngine& engine, const nn::Model& stage, int64_t whole,
                           dist::ProcessGrid& grid, dist::Communicator& world, int optimizer_buffers) {
  const int W = grid.world_size();
  std::vector<int64_t> params(std::size_t(W), 0), in_flight(std::size_t(W), 0), buffers(std::size_t(W), 0),
      acts(std::size_t(W), 0);
  const std::size_t me = std::size_t(grid.world_rank());
  params[me] = int64_t(train::memory_totals(stage.params()).params);
  in_flight[me] = engine.in_flight();
  buffers[me] = int64_t(engine.buffer_bytes());
  acts[me] = int64_t(engine.activation_bytes());
  for (auto* v : {&params, &in_flight, &buffers, &acts}) world.allreduce_sum(v->data(), v->size());
  if (grid.world_rank() != 0) return;
  for (int s = 0; s < grid.pp(); ++s) {
    const std::size_t r = std::size_t(grid.world_rank_at(0, s, 0));
    std::printf("pipeline stage %d (world rank %zu): %lld parameters (%.1f%% of %lld), %lld bytes with gradients and "
                "%d optimizer buffer(s); %lld micro-batch(es) in flight at most (%s), stash and message buffers "
                "%lld bytes, activations of the micro-batches in flight %lld bytes\n",
                s, r, (long long)params[r], whole ? 100.0 * double(params[r]) / double(whole) : 0.0, (long long)whole,
                (long long)(params[r] * (2 + optimizer_buffers) * int64_t(sizeof(float))), optimizer_buffers,
                (long long)in_flight[r],
                engine.schedule() == train::PipeSchedule::GPipe ? "gpipe: M" : "1f1b: <= P - stage",
                (long long)buffers[r], (long long)acts[r]);
  }
}

// Where rank 0's steps spent their wall time, in ms a step (train/trainer.h's StepParts): what a --threads or
// --precision change moves, part by part. "other": the rest of the step (the loop's own bookkeeping).
void print_step_parts(const train::StepParts& p, int64_t threads) {
  if (p.steps == 0) return;
  const double ms = 1000.0 / double(p.steps);
  const double other = p.total - p.data - p.forward - p.loss - p.backward - p.optimizer;
  std::printf("step time %.2f ms (rank 0, mean of %lld steps, %lld thread%s): data %.2f, ", p.total * ms,
              (long long)p.steps, (long long)threads, threads == 1 ? "" : "s", p.data * ms);
  if (p.split)
    std::printf("forward %.2f, loss %.2f, backward %.2f (gradient wait included), ", p.forward * ms, p.loss * ms,
                p.backward * ms);
  else
    std::printf("pipeline schedule %.2f (forward, loss, backward and the stages' messages), ", p.backward * ms);
  std::printf("optimizer %.2f, other %.2f ms\n", p.optimizer * ms, other * ms);
}

// --pp: the measured bubble beside the ideal one, and what each stage held.
void print_bubble(const train::PipelineReport& r) {
  std::printf("pipeline bubble (%s, P=%d, M=%d): idle", r.schedule.c_str(), r.stages, r.micro_batches);
  for (int s = 0; s < r.stages; ++s)
    std::printf("%s stage %d %.1f%% of %.2f ms", s ? "," : "", s, 100.0 * r.idle_fraction[std::size_t(s)],
                r.step_ms[std::size_t(s)]);
  std::printf(" a step (median step:");
  for (int s = 0; s < r.stages; ++s) std::printf("%s %.1f%%", s ? "," : "", 100.0 * r.median_step_idle[std::size_t(s)]);
  std::printf("); ideal (P-1)/(M+P-1) = %.1f%%\n", 100.0 * r.ideal_bubble);
  std::printf("pipeline in flight: micro-batches at most");
  for (int s = 0; s < r.stages; ++s)
    std::printf("%s stage %d %lld (bound %lld)", s ? "," : "", s, (long long)r.measured_in_flight[std::size_t(s)],
                (long long)r.in_flight[std::size_t(s)]);
  std::printf("\n");
  std::printf("pipeline messages (%s): bytes sent a step", r.wire.c_str());
  for (int s = 0; s < r.stages; ++s)
    std::printf("%s stage %d %lld", s ? "," : "", s, (long long)r.bytes_per_step[std::size_t(s)]);
  std::printf("\n");
}

// Runs the job under mpirun; when it fails, runs it again with --resume, up to max_restarts times
// (like torchrun's elastic restarts). The ranks never see --max-restarts.
int supervise_restarts(int nproc, int max_restarts, int argc, char** argv, int first) {
  std::vector<std::string> args;
  bool has_resume = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i >= first && a == "--max-restarts") {
      ++i;
      continue;
    }
    if (i >= first && a.rfind("--max-restarts=", 0) == 0) continue;
    has_resume = has_resume || (i >= first && a == "--resume");
    args.push_back(a);
  }
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> run = args;
    if (attempt > 0 && !has_resume) run.push_back("--resume");
    std::vector<char*> cargv;
    for (auto& a : run) cargv.push_back(a.data());
    const int status = dist::run_plan(dist::mpirun_plan_for_self(nproc, int(cargv.size()), cargv.data(), first));
    if (status == 0) return 0;
    if (attempt == max_restarts) {
      std::fprintf(stderr, "ringtrain: the job failed (exit %d) and all %d restart(s) are used up\n", status, max_restarts);
      return status;
    }
    std::fprintf(stderr, "ringtrain: the job failed (exit %d); restart %d of %d from the newest checkpoint\n", status,
                 attempt + 1, max_restarts);
  }
}

}  // namespace

// " over N hosts" when hier / auto split the data-parallel group into more than one host.
static std::string hosts_note(dist::Communicator& dp_comm) {
  auto* mpi = dynamic_cast<dist::MpiCommunicator*>(&dp_comm);
  return mpi && mpi->hosts() > 1 ? " over " + std::to_string(mpi->hosts()) + " hosts" : std::string();
}

int train_command(int argc, char** argv, int first) {
  Options opt = train_options();
  if (!opt.parse(argc, argv, first)) return 0;
  const int64_t tp = opt.integer("tp", 1, 4096);
  const std::string model_name = opt.str("model");
  nn::make_model(model_name);  // a bad name is refused here, before anything is launched or read
  nn::check_tensor_parallel(model_name, int(tp));  // e.g. vit's 4 heads and --tp 3: refused before any work
  // --pp: the stage cut (balanced, or --pp-split) on the whole model's nodes, refused before any work.
  const int64_t pp = opt.integer("pp", 1, 4096);
  const std::string pp_split = opt.str("pp-split");
  train::parse_pp_schedule(opt.str("pp-schedule"));
  const std::string pp_balance = opt.str("pp-balance");
  check(pp_balance == "time" || pp_balance == "cost", "--pp-balance must be time or cost, got '" + pp_balance + "'");
  check(pp > 1 || (!opt.given("pp-split") && !opt.given("pp-schedule") && !opt.given("pp-balance") && !opt.given("pp-trace")),
        "--pp-split, --pp-balance, --pp-schedule and --pp-trace need --pp 2 or more (a pipeline of one stage has no "
        "cut and no schedule)");
  check(!opt.given("pp-split") || !opt.given("pp-balance"),
        "--pp-balance contradicts --pp-split (the split sets the cut by hand)");
  std::unique_ptr<nn::Model> probe;  // the whole model whose node indices --pp-split names
  nn::StageCut cut;
  if (pp > 1) {
    probe = nn::make_model(model_name);
    cut = nn::stage_cut(*probe, int(pp), pp_split);
  }
  dist::parse_allreduce(opt.str("allreduce"));  // so is a bad --allreduce
  // --nproc N outside mpirun: become `mpirun -np N ringtrain train ...`, or with --max-restarts
  // supervise it, relaunching from the newest checkpoint when a rank dies.
  const int64_t max_restarts = opt.integer("max-restarts", 0, 1000);
  if (opt.given("nproc") && !dist::launched_by_mpi()) {
    const int64_t nproc = opt.integer("nproc", 1, 4096);
    dist::check_grid(int(nproc), int(tp), int(pp));  // before launching anything
    if (max_restarts == 0) dist::exec_under_mpirun(int(nproc), argc, argv, first);
    check(!opt.str("checkpoint-dir").empty(),
          "--max-restarts needs --checkpoint-dir (a restart continues from its newest checkpoint)");
    return supervise_restarts(int(nproc), int(max_restarts), argc, argv, first);
  }
  check(max_restarts == 0, "--max-restarts needs --nproc: ringtrain can only restart ranks it launched itself");

  train::TrainConfig config;
  // Ranges are checked before a value is narrowed to int (--epochs 4294967297 is not 1 epoch).
  config.epochs = int(opt.integer("epochs", 1, 1000000));
  config.batch_size = int(opt.integer("batch-size", 1, 65536));
  config.micro_batches = int(opt.integer("micro-batches", 1, 65536));
  train::check_micro_batches(config);
  config.pp_schedule = opt.str("pp-schedule");
  const std::string pp_trace = opt.str("pp-trace");
  if (!pp_trace.empty()) config.pp_trace_steps = 4;
  config.lr = opt.number("lr");
  config.optimizer = opt.str("optimizer");
  config.momentum = opt.number("momentum");
  config.weight_decay = opt.number("weight-decay");
  config.seed = uint64_t(opt.integer("seed", 0, INT64_MAX));
  config.log_every = int(opt.integer("log-every", 0, INT32_MAX));
  config.max_steps = opt.integer("max-steps", 0, INT64_MAX);
  config.workers = opt.str("workers") == "auto" ? (cores_this_process_may_use() > 1 ? 1 : 0) : int(opt.integer("workers", 0, 64));
  config.metrics_path = opt.str("metrics");
  config.quiet = opt.flag("quiet");
  const std::string progress = opt.str("progress");
  check(progress == "auto" || progress == "bar" || progress == "lines",
        "--progress must be auto, bar or lines, got '" + progress + "'");
  // Open MPI hands its ranks a pseudo-terminal whatever mpirun's own output is, so under mpirun a bar
  // is drawn only when asked for.
  config.terminal = progress == "bar" || (progress == "auto" && train::stdout_is_terminal() && !dist::launched_by_mpi());
  config.prefetch = int(opt.integer("prefetch", 1, 1024));
  config.augment_shift = int(opt.integer("augment-shift", 0, INT32_MAX));  // the loader holds it to the image size
  config.lr_schedule = opt.str("lr-schedule");
  config.lr_decay_epochs = opt.number("lr-decay-epochs");
  config.lr_min_factor = opt.number("lr-min-factor");
  config.ema = opt.number("ema");
  config.label_smoothing = opt.number("label-smoothing");
  // Nonsense options are refused before any work starts.
  check(config.lr > 0, "--lr must be positive, got " + opt.str("lr"));
  check(config.optimizer == "adam" || config.optimizer == "sgd",
        "--optimizer must be adam or sgd, got '" + config.optimizer + "'");
  check(config.momentum >= 0 && config.momentum < 1, "--momentum must be in [0, 1), got " + opt.str("momentum"));
  check(config.weight_decay >= 0, "--weight-decay must be >= 0, got " + opt.str("weight-decay"));
  train::check_recipe(config);
  const ops::IsaLevel isa = opt.str("isa") == "auto" ? ops::default_isa() : ops::parse_isa(opt.str("isa"));
  const ops::Precision precision = ops::parse_precision(opt.str("precision"));
  const ops::KernelTable& kernels = ops::kernels_for(isa, precision);
  config.precision = ops::precision_name(precision);
  config.grad_comm = dist::grad_comm_name(dist::parse_grad_comm(opt.str("grad-comm")));
  const int64_t threads = opt.integer("threads", 1, 256);
  check(tp == 1 || threads == 1, "--threads: the tensor-parallel layers run whole batches; use --threads 1 with --tp " +
                                     opt.str("tp"));
  const int64_t bucket_kb = opt.integer("bucket-kb", 1, 1 << 20);
  config.reducer.bucket_bytes = std::size_t(bucket_kb) << 10;
  config.overlap = opt.str("overlap");
  train::parse_overlap(config.overlap);
  check(!opt.flag("no-overlap") || !opt.given("overlap") || config.overlap == "off",
        "--no-overlap contradicts --overlap " + config.overlap);
  if (opt.flag("no-overlap")) config.overlap = "off";
  const bool progress_auto = opt.str("progress-thread-us") == "auto";
  if (!progress_auto) config.reducer.progress_interval_s = 1e-6 * double(opt.integer("progress-thread-us", 0, 1000000));
  check(!(opt.flag("shard-optimizer") && opt.flag("no-shard-optimizer")),
        "--shard-optimizer contradicts --no-shard-optimizer");
  const train::ShardRequest shard_request = opt.flag("shard-optimizer")      ? train::ShardRequest::On
                                            : opt.flag("no-shard-optimizer") ? train::ShardRequest::Off
                                                                             : train::ShardRequest::Auto;
  check(shard_request != train::ShardRequest::On || config.grad_comm == "fp32",
        "--shard-optimizer needs --grad-comm fp32 (the 16-bit ring has no reduce-scatter), got --grad-comm " +
            config.grad_comm);
  config.drop_last = opt.flag("drop-last");
  config.checkpoint_dir = opt.str("checkpoint-dir");
  config.checkpoint_every = opt.integer("checkpoint-every", 0, INT64_MAX);
  config.keep_checkpoints = int(opt.integer("keep-checkpoints", 1, 1000000));
  config.resume = opt.flag("resume");
  check(!config.resume || !config.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  check(config.checkpoint_every == 0 || !config.checkpoint_dir.empty(), "--checkpoint-every needs --checkpoint-dir");
  dist::MpiOptions mpi_options;
  mpi_options.algorithm = dist::parse_allreduce(opt.str("allreduce"));
  check(opt.str("allreduce-calibration").empty() || mpi_options.algorithm == dist::AllreduceAlgorithm::Auto,
        "--allreduce-calibration needs --allreduce auto, got --allreduce " + opt.str("allreduce"));
  mpi_options.ranks_per_host = dist::ranks_per_host_from_env();
  if (mpi_options.algorithm == dist::AllreduceAlgorithm::Auto)
    mpi_options.cost_model = std::make_shared<dist::AllreduceCostModel>();  // shared by every communicator
  mpi_options.timeout_s = opt.number("timeout");
  check(mpi_options.timeout_s >= 0, "--timeout must be >= 0 seconds, got " + opt.str("timeout"));

  // Under mpirun/srun every rank joins the job; otherwise this process is a world of one.
  std::unique_ptr<dist::MpiSession> session;
  std::unique_ptr<dist::Communicator> world;
  if (dist::launched_by_mpi()) {
    session = std::make_unique<dist::MpiSession>(&argc, &argv);
    // Under --tp / --pp each data-parallel group calibrates --allreduce auto by itself (below), so the
    // groups' models differ; the world's few collectives (memory reports, agreement) must pick the same
    // algorithm on every rank: they get a model of their own that is never calibrated (the ring).
    dist::MpiOptions world_options = mpi_options;
    if ((tp > 1 || pp > 1) && world_options.cost_model) world_options.cost_model = std::make_shared<dist::AllreduceCostModel>();
    world = std::make_unique<dist::MpiCommunicator>(MPI_COMM_WORLD, world_options);
    check(!opt.given("nproc") || opt.integer("nproc") == world->size(),
          "--nproc " + opt.str("nproc") + " does not match the " + std::to_string(world->size()) +
              " ranks mpirun started; drop --nproc under mpirun");
  } else {
    world = std::make_unique<dist::LocalCommunicator>();
  }
  dist::Communicator& comm = *world;
  // --tp: the world as dp x tp (dist/process_grid.h), refused before any work unless tp divides it. The
  // trainer then runs data-parallel over the dp group, the fc layers' all-reduces over the tensor group.
  // --pp too: the world as dp x pp x tp (Megatron's order), each rank one stage of one pipeline.
  dist::check_grid(comm.size(), int(tp), int(pp));
  std::unique_ptr<dist::ProcessGrid> grid;
  if (tp > 1 || pp > 1) grid = std::make_unique<dist::ProcessGrid>(comm, int(tp), mpi_options, int(pp));
  dist::Communicator& dp_comm = grid ? grid->dp_comm() : comm;
  // --progress-thread-us auto: across hosts a bucket's messages take many layers' time, and moving them
  // only at layer boundaries hid 18% of resnet18's all-reduce at 1 Gbit/s, a thread every 500 us 91%
  // (docs/BENCHMARKS.md); on one host the shared-memory all-reduce needs no thread.
  auto* dp_mpi = dynamic_cast<dist::MpiCommunicator*>(&dp_comm);
  const int dp_hosts = dp_mpi ? dp_mpi->hosts() : 1;
  if (progress_auto && dp_hosts > 1) config.reducer.progress_interval_s = 500e-6;
  // Neither --shard-optimizer nor --no-shard-optimizer: sharded where it is known to pay (train/shard_policy.h).
  train::ShardContext shard_context;
  shard_context.dp_ranks = dp_comm.size();
  shard_context.dp_hosts = dp_hosts;
  shard_context.algorithm = mpi_options.algorithm;
  shard_context.calibration_file = !opt.str("allreduce-calibration").empty();
  shard_context.grad_comm = config.grad_comm;
  config.shard_optimizer = train::shard_optimizer(shard_request, shard_context);
  const bool shard_auto = config.shard_optimizer && shard_request == train::ShardRequest::Auto;
  data::Dataset dataset = data::load_dataset(opt.str("data"));
  train::MeasuredCut measured;  // --pp-balance time: the cut from node times measured on the stages' ranks
  if (pp > 1 && pp_split.empty() && pp_balance == "time") {
    measured = train::measured_cut(model_name, kernels, config.batch_size / config.micro_batches,
                                   int(pp), comm);
    cut = measured.cut;
  }
  auto model = tp > 1 ? nn::make_model_tp(model_name, grid->tensor_group()) : nn::make_model(model_name);
  nn::StageCut mine;  // --pp: this rank's stage of the model as built (vit under --tp has more nodes)
  if (pp > 1) {  // this rank keeps its stage's nodes and parameters only
    mine = tp > 1 ? nn::map_cut(*probe, cut, *model) : cut;
    model = nn::take_stage(std::move(model), mine, grid->pp_rank());
  }
  // The pipeline's further copies of the stage, one per micro-batch it holds (train/pipeline_engine.h).
  auto copy_stage = [&]() {
    auto copy = tp > 1 ? nn::make_model_tp(model_name, grid->tensor_group()) : nn::make_model(model_name);
    return nn::take_stage(std::move(copy), mine, grid->pp_rank());
  };
  model->set_threads(int(threads));
  if (grid) {  // every rank cuts its shards (its stage's tensors) from the same whole weights
    if (opt.str("init-from").empty()) {
      auto whole = nn::make_model(model_name);
      whole->init_parameters(config.seed);
      dist::split_to_shards(whole->params(), whole->params().params(), model->params(), model->params().params());
    } else if (pp > 1) {
      train::load_grid_weights(opt.str("init-from"), *model);
    } else {
      train::load_sharded_weights(opt.str("init-from"), *model);
    }
  } else if (opt.str("init-from").empty()) {
    model->init_parameters(config.seed);
  } else {
    train::load_weights(opt.str("init-from"), *model);
  }

  if (comm.rank() == 0)
    std::cout << "ringtrain: " << model_name << " ("
              << (probe ? probe->params().count() : train::memory_totals(model->params()).whole) << " parameters) on " << dataset.name << " ("
              << dataset.train.count << " train / " << dataset.test.count << " test), " << comm.size()
              << " rank(s) x batch " << config.batch_size
              << (grid ? " (dp " + std::to_string(grid->dp()) +
                             (pp > 1 ? " x pp " + std::to_string(grid->pp()) : std::string()) + " x tp " +
                             std::to_string(grid->tp()) + ")"
                       : "")
              << ", " << config.optimizer << " lr " << config.lr
              << ", kernels " << ops::isa_name(kernels.level) << " " << config.precision
              << (precision == ops::Precision::Fp32 ? "" : std::string(" (") + ops::precision_path(isa, precision) + ")")
              << " x " << threads
              << " thread(s)"
              << (dp_comm.size() > 1 ? std::string(", all-reduce ") + opt.str("allreduce") + hosts_note(dp_comm) +
                                        ", overlap " + config.overlap +
                                        (config.reducer.progress_interval_s > 0
                                             ? ", a progress thread every " +
                                                   std::to_string(std::lround(1e6 * config.reducer.progress_interval_s)) +
                                                   " us" + (progress_auto ? " (auto: the group spans hosts)" : "")
                                             : std::string()) +
                                        (config.grad_comm != "fp32" ? ", gradients in " + config.grad_comm : std::string()) +
                                        (config.shard_optimizer ? std::string(", optimizer state sharded") +
                                                                    (shard_auto ? " (auto: 2 data-parallel ranks on one host; "
                                                                                  "--no-shard-optimizer keeps it whole)"
                                                                                : "")
                                                              : std::string())
                                  : std::string())
              << std::endl;

  if (pp > 1 && comm.rank() == 0)
    std::cout << "pipeline: " << config.pp_schedule << ", " << config.micro_batches << " micro-batch(es) of "
              << config.batch_size / config.micro_batches << "; "
              << (measured.seconds.empty() ? nn::describe_cut(*probe, cut) : nn::describe_cut(*probe, cut, measured.seconds))
              << std::endl;
  {  // what each rank holds (rank 0's table; one line a rank when the split is uneven)
    const train::MemoryTotals mine = train::memory_totals(model->params());
    std::vector<int64_t> held(std::size_t(comm.size()), 0);
    held[std::size_t(comm.rank())] = int64_t(mine.params);
    comm.allreduce_sum(held.data(), held.size());
    if (comm.rank() == 0 && !config.quiet) {
      // Adam's two moments (SGD's momentum), plus the weights' average with --ema: all sharded alike.
      const int buffers = (config.optimizer == "adam" ? 2 : 1) + (config.ema > 0.0 ? 1 : 0);
      model->reserve(config.batch_size / config.micro_batches);  // the trainer runs one micro-batch at a time
      std::cout << train::memory_report(model->params(), buffers,
                                        (grid ? "rank 0 (dp 0, " + (pp > 1 ? "stage 0 of " + std::to_string(pp) + ", " : std::string()) +
                                                    "tp 0 of " + std::to_string(grid->tp()) + ")"
                                              : "rank 0") +
                                            (config.shard_optimizer && dp_comm.size() > 1
                                                 ? " before sharding cuts the optimizer state (below)"
                                                 : ""),
                                        model->activation_floats() * sizeof(float));
      if (*std::min_element(held.begin(), held.end()) != *std::max_element(held.begin(), held.end())) {
        std::cout << "  parameters held per rank:";
        for (int64_t h : held) std::cout << " " << h;
        std::cout << std::endl;
      }
    }
  }

  // --allreduce auto: calibrate (or read the calibration) on the data-parallel group itself, before any
  // gradient traffic; one line says what each bucket will run. (16-bit gradients have their own ring;
  // --shard-optimizer's reduce-scatter and all-gather are the ring's phases, so they need no plan.)
  const bool plan_buckets = mpi_options.cost_model && dp_comm.size() > 1 && config.grad_comm == "fp32" && !config.shard_optimizer;
  if (plan_buckets) {
    auto* mpi = dynamic_cast<dist::MpiCommunicator*>(&dp_comm);
    check(mpi != nullptr, "--allreduce auto: the data-parallel group is not an MPI communicator");
    const std::vector<dist::Bucket> buckets = dist::make_buckets(model->params(), config.reducer.bucket_bytes);
    dist::CalibrationOptions timing;
    timing.largest_message_bytes = 0;  // no size timed past the one that covers the largest bucket
    for (const dist::Bucket& b : buckets)
      timing.largest_message_bytes = std::max(timing.largest_message_bytes, b.count * sizeof(float));
    const dist::Calibration cal = dist::load_or_calibrate(*mpi, opt.str("allreduce-calibration"), timing);
    *mpi_options.cost_model = cal.model;
    if (comm.rank() == 0)
      std::cout << "all-reduce auto (" << cal.how << "): " << dist::plan_text(cal.model, buckets, config.reducer.bucket_bytes)
                << std::endl;
  }

  train::Trainer trainer(config, *model, kernels, dp_comm, std::cout);
  if (grid) trainer.set_process_grid(grid.get(), copy_stage);
  if (trainer.pipeline() && !config.quiet) print_pipeline_memory(*trainer.pipeline(), *model, int64_t(probe->params().count()), *grid, comm,
                          config.optimizer == "adam" ? 2 : 1);
  if (trainer.sharded() && !config.quiet) print_optimizer_shards(trainer.optimizer(), model->params().size(), dp_comm);
  if (plan_buckets) trainer.set_allreduce_model(mpi_options.cost_model);
  train::TrainResult result = trainer.fit(dataset.train, dataset.test);

  std::unique_ptr<optim::Optimizer> gathered;  // --shard-optimizer: the whole state, for --save (collective)
  optim::Optimizer* final_optimizer = opt.str("save").empty() ? nullptr : trainer.optimizer_for_checkpoint(gathered);
  if (!opt.str("save").empty() && pp > 1) {  // collective: every stage's tensors (shards) gathered, rank 0 writes
    train::save_grid_checkpoint(opt.str("save"), *model, final_optimizer,
                                {{"dataset", dataset.name}, {"epochs", std::to_string(config.epochs)},
                                 {"seed", opt.str("seed")}, {"tp", opt.str("tp")}, {"pp", opt.str("pp")}},
                                *grid);
    if (comm.rank() == 0) std::cout << "saved " << opt.str("save") << std::endl;
  } else if (!opt.str("save").empty() && grid) {  // collective: shards gathered to whole tensors, rank 0 writes
    train::save_sharded_checkpoint(opt.str("save"), *model, final_optimizer,
                                   {{"dataset", dataset.name}, {"epochs", std::to_string(config.epochs)},
                                    {"seed", opt.str("seed")}, {"tp", opt.str("tp")}},
                                   *grid);
    if (comm.rank() == 0) std::cout << "saved " << opt.str("save") << std::endl;
  } else if (!opt.str("save").empty() && comm.rank() == 0) {
    train::save_checkpoint(opt.str("save"), *model, final_optimizer,
                           {{"dataset", dataset.name}, {"epochs", std::to_string(config.epochs)},
                            {"seed", opt.str("seed")}});
    std::cout << "saved " << opt.str("save") << std::endl;
  }
  if (comm.rank() == 0) {
    std::printf("trained %lld steps in %.1fs (%.0f samples/s, data wait %.2f%% of step time)\n",
                (long long)result.steps, result.train_seconds, result.samples_per_second,
                100.0 * result.data_wait_fraction);
    print_step_parts(result.step_parts, threads);
    if (grid) {  // lenet5: fc2's output forward + fc1's input gradient backward, [B,84] + [B,400] floats a
                 // step; vit: each block's attention and MLP, g forward + f backward, 4 x [B,17,128]
      const auto& st = grid->tensor_group().stats();
      const double per_step = 4.0 * config.batch_size * double(nn::tensor_parallel_floats_per_sample(*model));
      std::printf("tensor-parallel all-reduce: %d bytes a training step per rank (%.0f sent on the ring); "
                  "%.1f MiB in %lld calls over training and evaluation, %.2fs\n",
                  int(per_step), per_step * 2.0 * (grid->tp() - 1) / grid->tp(), 4.0 * double(st.floats) / 1048576.0,
                  (long long)st.calls, st.seconds);
    }
    if (dp_comm.size() > 1) {
      std::string how = result.overlap_kept ? "overlap on" : "overlap off";
      if (result.overlap_kept && config.reducer.progress_interval_s > 0)
        how += ", a progress thread every " + std::to_string(std::lround(1e6 * config.reducer.progress_interval_s)) + " us";
      std::printf("gradient wait %.3f ms/step after backward (%s, %d buckets), %.3f ms/step in all-reduce calls\n",
                  result.grad_wait_ms_per_step, how.c_str(), result.gradient_buckets, result.allreduce_ms_per_step);
    }
    if (trainer.sharded())
      std::printf("parameter all-gather %.3f ms/step after the optimizer (optimizer state sharded)\n", result.param_gather_ms_per_step);
    if (dp_comm.size() > 1) {
      // Rank 0's own count (ranks of halving-doubling's fold, or of hier, send different amounts).
      std::printf("all-reduce bytes per step: %.0f sent by rank 0 (gradients in %s%s)", result.allreduce_bytes_per_step,
                  config.grad_comm.c_str(), trainer.sharded() ? "; reduce-scatter + the parameters' all-gathers, the EMA's for evaluation included" : "");
      if (result.allreduce_library_sums_per_step > 0)
        std::printf(", plus %.1f MPI_Allreduce sum(s) a step whose bytes the library does not tell",
                    result.allreduce_library_sums_per_step);
      std::printf("\n");
    }
    if (pp > 1) print_bubble(result.pipeline);
    if (!pp_trace.empty()) {
      train::write_chrome_trace(pp_trace, result.pipeline.trace);
      std::printf("pipeline trace: %zu passes and waits of the last %d step(s) written to %s\n",
                  result.pipeline.trace.size(), config.pp_trace_steps, pp_trace.c_str());
    }
    if (config.precision == "fp16")
      std::printf("fp16 loss scaling: %lld step(s) skipped, final scale %g\n", (long long)result.skipped_steps,
                  double(result.loss_scale));
    std::printf("test accuracy: %.2f%%\n", 100.0 * result.test.accuracy());
  }
  return 0;
}

}  // namespace ringtrain::cli
