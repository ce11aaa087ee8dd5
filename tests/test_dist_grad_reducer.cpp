// GradReducer in one process, against a recording communicator that pretends to be 2 ranks: a
// bucket's all-reduce starts on the communication thread as soon as its last gradient is reported
// (before wait()), buckets go in backward order, --no-overlap reduces only in wait(), on the caller's
// thread; the result is the average.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::dist {
namespace {

struct Calls {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<const float*, std::size_t>> calls;
  std::vector<std::thread::id> threads;
  int duplicates = 0;
};

// Two identical ranks: the sum doubles every value.
class RecordingComm final : public Communicator {
 public:
  explicit RecordingComm(std::shared_ptr<Calls> c) : c_(std::move(c)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void allreduce_sum(float* d, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) d[i] *= 2;
    std::lock_guard<std::mutex> lock(c_->mu);
    c_->calls.emplace_back(d, n);
    c_->threads.push_back(std::this_thread::get_id());
    c_->cv.notify_all();
  }
  void allreduce_sum(double*, std::size_t) override { throw Error("unexpected"); }
  void allreduce_sum(int64_t*, std::size_t) override { throw Error("unexpected"); }
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Communicator> duplicate() override {
    std::lock_guard<std::mutex> lock(c_->mu);
    ++c_->duplicates;
    return std::make_unique<RecordingComm>(c_);
  }

 private:
  std::shared_ptr<Calls> c_;
};

const nn::Layer& layer(const nn::Model& m, const std::string& name) {
  for (const auto& l : m.layers())
    if (l->name() == name) return *l;
  throw Error("no layer " + name);
}

// Waits up to 10 s for `n` calls; returns how many there are.
std::size_t wait_calls(Calls& c, std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  std::unique_lock<std::mutex> lock(c.mu);
  c.cv.wait_for(lock, limit, [&] { return c.calls.size() >= n; });
  return c.calls.size();
}

TEST(GradReducer, LaunchesABucketAsSoonAsItIsReady) {
  auto calls = std::make_shared<Calls>();
  RecordingComm comm(calls);
  auto model = nn::make_lenet5();
  auto& p = model->params();
  for (std::size_t i = 0; i < p.size(); ++i) p.grads()[i] = 3.0f;
  GradReducer reducer(p, comm, {});
  ASSERT_EQ(reducer.buckets().size(), 3u);
  EXPECT_EQ(calls->duplicates, 1);

  reducer.on_grads_ready(layer(*model, "fc3"));
  EXPECT_EQ(wait_calls(*calls, 1, std::chrono::milliseconds(100)), 0u) << "bucket 0 also needs fc2";
  reducer.on_grads_ready(layer(*model, "fc2"));
  ASSERT_EQ(wait_calls(*calls, 1), 1u) << "bucket {fc3, fc2} was not started before wait()";
  EXPECT_NE(calls->threads[0], std::this_thread::get_id()) << "not on the communication thread";
  EXPECT_EQ(calls->calls[0].first, p.grads() + reducer.buckets()[0].offset);
  reducer.on_grads_ready(layer(*model, "fc1"));
  ASSERT_EQ(wait_calls(*calls, 2), 2u);
  EXPECT_EQ(calls->calls[1].first, p.grads() + reducer.buckets()[1].offset);

  reducer.wait();  // conv1/conv2 were never reported: wait() reduces their bucket itself
  ASSERT_EQ(calls->calls.size(), 3u);
  EXPECT_EQ(calls->threads[2], std::this_thread::get_id());
  EXPECT_EQ(calls->calls[2].first, p.grads() + reducer.buckets()[2].offset);
  for (std::size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], 3.0f) << "not averaged at " << i;
  EXPECT_EQ(reducer.stats().steps, 1);

  // The next step starts clean: the same three buckets again.
  reducer.on_grads_ready(layer(*model, "fc3"));
  reducer.on_grads_ready(layer(*model, "fc2"));
  EXPECT_EQ(wait_calls(*calls, 4), 4u);
  reducer.wait();
  EXPECT_EQ(calls->calls.size(), 6u);
}

TEST(GradReducer, NoOverlapReducesOnlyInWait) {
  auto calls = std::make_shared<Calls>();
  RecordingComm comm(calls);
  auto model = nn::make_lenet5();
  GradReducer reducer(model->params(), comm, {.bucket_bytes = 25 << 10, .overlap = false});
  for (const char* name : {"fc3", "fc2", "fc1", "conv2", "conv1"}) reducer.on_grads_ready(layer(*model, name));
  EXPECT_EQ(wait_calls(*calls, 1, std::chrono::milliseconds(100)), 0u);
  reducer.wait();
  ASSERT_EQ(calls->calls.size(), 3u);
  for (auto id : calls->threads) EXPECT_EQ(id, std::this_thread::get_id());
  for (std::size_t b = 0; b < 3; ++b)
    EXPECT_EQ(calls->calls[b].first, model->params().grads() + reducer.buckets()[b].offset);
}

TEST(GradReducer, RealBackwardDrivesTheBuckets) {
  auto calls = std::make_shared<Calls>();
  RecordingComm comm(calls);
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  model->reserve(2);
  auto& p = model->params();
  GradReducer reducer(p, comm, {});
  const auto& k = ops::reference_kernels();
  std::vector<float> x(2 * 28 * 28, 0.5f), dlogits(20, 0.1f);
  model->forward(k, x.data(), 2);
  model->backward(k, x.data(), dlogits.data(), 2, reducer.hook());
  // Backward itself launched the first two buckets; the last one is reduced by wait(), on this thread.
  EXPECT_EQ(wait_calls(*calls, 2), 2u);
  EXPECT_EQ(wait_calls(*calls, 3, std::chrono::milliseconds(100)), 2u);
  reducer.wait();
  ASSERT_EQ(calls->calls.size(), 3u);
  EXPECT_EQ(calls->threads[2], std::this_thread::get_id());
  // The average of 2 equal ranks is this rank's own gradient (x2 then /2 is exact): compare with a twin
  // model's plain backward.
  auto twin = nn::make_lenet5();
  twin->init_parameters(1);
  twin->reserve(2);
  twin->forward(k, x.data(), 2);
  twin->backward(k, x.data(), dlogits.data(), 2);
  EXPECT_EQ(std::memcmp(twin->params().grads(), p.grads(), p.size() * sizeof(float)), 0);
}

TEST(GradReducer, RejectsAViewReportedTwice) {
  auto calls = std::make_shared<Calls>();
  RecordingComm comm(calls);
  auto model = nn::make_lenet5();
  GradReducer reducer(model->params(), comm, {});
  reducer.on_grads_ready(layer(*model, "fc1"));
  EXPECT_THROW(reducer.on_grads_ready(layer(*model, "fc1")), Error);
  reducer.wait();
}

TEST(GradReducer, OneRankIsANoOp) {
  LocalCommunicator comm;
  auto model = nn::make_lenet5();
  auto& p = model->params();
  for (std::size_t i = 0; i < p.size(); ++i) p.grads()[i] = 1.5f;
  GradReducer reducer(p, comm, {});
  reducer.on_grads_ready(layer(*model, "fc3"));
  reducer.wait();
  for (std::size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], 1.5f);
}

}  // namespace
}  // namespace ringtrain::dist
