// GradReducer in one process, against a recording communicator that pretends to be 2 ranks: a bucket's
// all-reduce starts inside backward's hook as soon as its last gradient is reported (before wait()),
// later buckets start when the one in flight completes, buckets go in backward order, --no-overlap
// reduces only in wait(); the result is the average.
#include <gtest/gtest.h>

#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::dist {
namespace {

struct Call {
  const float* data;
  std::size_t n;
  bool blocking;
};

// Two identical ranks: the sum doubles every value. A non-blocking sum completes after
// `tests_until_done` calls of test_allreduce() (or at wait_allreduce()).
class RecordingComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void allreduce_sum(float* d, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) d[i] *= 2;
    calls.push_back({d, n, true});
  }
  void allreduce_sum(double*, std::size_t) override { throw Error("unexpected"); }
  void allreduce_sum(int64_t*, std::size_t) override { throw Error("unexpected"); }
  void start_allreduce_sum(float* d, std::size_t n) override {
    if (in_flight) throw Error("a second sum started while one is in flight");
    for (std::size_t i = 0; i < n; ++i) d[i] *= 2;
    calls.push_back({d, n, false});
    in_flight = true;
    tests_left = tests_until_done;
  }
  bool test_allreduce() override {
    ++tests;
    if (in_flight && tests_left > 0 && --tests_left == 0) in_flight = false;
    return !in_flight;
  }
  void wait_allreduce() override { in_flight = false; }
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Communicator> duplicate() override {
    ++duplicates;
    return std::unique_ptr<Communicator>(this_as_duplicate());
  }

  std::vector<Call> calls;
  int duplicates = 0, tests = 0, tests_until_done = 1, tests_left = 0;
  bool in_flight = false;

 private:
  // The reducer owns what duplicate() returns; hand it a proxy that records into this object.
  Communicator* this_as_duplicate();
};

class Proxy final : public Communicator {
 public:
  explicit Proxy(RecordingComm& c) : c_(c) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  void allreduce_sum(float* d, std::size_t n) override { c_.allreduce_sum(d, n); }
  void allreduce_sum(double* d, std::size_t n) override { c_.allreduce_sum(d, n); }
  void allreduce_sum(int64_t* d, std::size_t n) override { c_.allreduce_sum(d, n); }
  void start_allreduce_sum(float* d, std::size_t n) override { c_.start_allreduce_sum(d, n); }
  bool test_allreduce() override { return c_.test_allreduce(); }
  void wait_allreduce() override { c_.wait_allreduce(); }
  void broadcast(void* d, std::size_t b, int r) override { c_.broadcast(d, b, r); }
  void barrier() override {}
  std::unique_ptr<Communicator> duplicate() override { return c_.duplicate(); }

 private:
  RecordingComm& c_;
};

Communicator* RecordingComm::this_as_duplicate() { return new Proxy(*this); }

const nn::Layer& layer(const nn::Model& m, const std::string& name) {
  for (const auto& l : m.layers())
    if (l->name() == name) return *l;
  throw Error("no layer " + name);
}

TEST(GradReducer, DefaultBucketsSplitLinearFromConvolutionLayers) {
  auto model = nn::make_lenet5();
  auto buckets = make_buckets(model->params(), GradReducerOptions{}.bucket_bytes);
  ASSERT_EQ(buckets.size(), 2u);
  const auto& views = model->params().views();
  EXPECT_EQ(views[buckets[0].first_view].name, "fc1.weight");
  EXPECT_EQ(views[buckets[0].last_view].name, "fc3.bias");
  EXPECT_EQ(views[buckets[1].first_view].name, "conv1.weight");
  EXPECT_EQ(views[buckets[1].last_view].name, "conv2.bias");
}

TEST(GradReducer, WarmsUpOnceWithTheLargestBucket) {
  RecordingComm comm;
  auto model = nn::make_lenet5();
  GradReducer reducer(model->params(), comm, {.bucket_bytes = 25 << 10});
  EXPECT_EQ(comm.duplicates, 1);
  ASSERT_EQ(comm.calls.size(), 1u);
  EXPECT_TRUE(comm.calls[0].blocking);
  std::size_t largest = 0;
  for (const Bucket& b : reducer.buckets()) largest = std::max(largest, b.count);
  EXPECT_EQ(comm.calls[0].n, largest);
}

TEST(GradReducer, StartsABucketInsideBackwardAsSoonAsItIsReady) {
  RecordingComm comm;
  comm.tests_until_done = 3;  // each sum stays in flight over a few layer boundaries
  auto model = nn::make_lenet5();
  auto& p = model->params();
  for (std::size_t i = 0; i < p.size(); ++i) p.grads()[i] = 3.0f;
  GradReducer reducer(p, comm, {.bucket_bytes = 25 << 10});
  ASSERT_EQ(reducer.buckets().size(), 3u);  // {fc3, fc2}, {fc1}, {conv2, conv1}
  comm.calls.clear();

  reducer.on_grads_ready(layer(*model, "fc3"));
  EXPECT_TRUE(comm.calls.empty()) << "bucket 0 also needs fc2";
  reducer.on_grads_ready(layer(*model, "fc2"));
  ASSERT_EQ(comm.calls.size(), 1u) << "bucket {fc3, fc2} was not started in the hook";
  EXPECT_FALSE(comm.calls[0].blocking);
  EXPECT_EQ(comm.calls[0].data, p.grads() + reducer.buckets()[0].offset);
  // fc1's bucket is ready, but bucket 0 is still in flight: it waits its turn.
  reducer.on_grads_ready(layer(*model, "fc1"));
  EXPECT_EQ(comm.calls.size(), 1u);
  // A layer without parameters is still a point where communication moves on: bucket 0 completes there
  // and bucket 1 starts.
  reducer.on_grads_ready(layer(*model, "relu4"));
  ASSERT_EQ(comm.calls.size(), 2u);
  EXPECT_EQ(comm.calls[1].data, p.grads() + reducer.buckets()[1].offset);

  reducer.wait();  // finishes bucket 1; conv1/conv2 were never reported: wait() reduces their bucket
  ASSERT_EQ(comm.calls.size(), 3u);
  EXPECT_EQ(comm.calls[2].data, p.grads() + reducer.buckets()[2].offset);
  for (std::size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], 3.0f) << "not averaged at " << i;
  EXPECT_EQ(reducer.stats().steps, 1);

  // The next step starts clean: the same three buckets again.
  reducer.on_grads_ready(layer(*model, "fc3"));
  reducer.on_grads_ready(layer(*model, "fc2"));
  EXPECT_EQ(comm.calls.size(), 4u);
  reducer.wait();
  EXPECT_EQ(comm.calls.size(), 6u);
  for (std::size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], 3.0f) << "not averaged at " << i;
}

TEST(GradReducer, NoOverlapReducesOnlyInWait) {
  RecordingComm comm;
  auto model = nn::make_lenet5();
  GradReducer reducer(model->params(), comm, {.bucket_bytes = 25 << 10, .overlap = false});
  comm.calls.clear();
  for (const char* name : {"fc3", "fc2", "fc1", "conv2", "conv1"}) reducer.on_grads_ready(layer(*model, name));
  EXPECT_TRUE(comm.calls.empty());
  EXPECT_EQ(comm.tests, 0);
  reducer.wait();
  ASSERT_EQ(comm.calls.size(), 3u);
  for (std::size_t b = 0; b < 3; ++b)
    EXPECT_EQ(comm.calls[b].data, model->params().grads() + reducer.buckets()[b].offset);
}

TEST(GradReducer, RealBackwardDrivesTheBuckets) {
  RecordingComm comm;
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  model->reserve(2);
  auto& p = model->params();
  GradReducer reducer(p, comm, {});
  comm.calls.clear();
  const auto& k = ops::reference_kernels();
  std::vector<float> x(2 * 28 * 28, 0.5f), dlogits(20, 0.1f);
  model->forward(k, x.data(), 2);
  model->backward(k, x.data(), dlogits.data(), 2, reducer.hook());
  // Backward itself started both buckets: the linear one after fc1, the last one after conv1.
  ASSERT_EQ(comm.calls.size(), 2u);
  EXPECT_EQ(comm.calls[0].data, p.grads() + reducer.buckets()[0].offset);
  reducer.wait();
  ASSERT_EQ(comm.calls.size(), 2u);
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
  RecordingComm comm;
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
