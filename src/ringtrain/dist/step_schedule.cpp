#include "ringtrain/dist/step_schedule.h"

#include <algorithm>
#include <climits>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::dist {

namespace {
// Every schedule's messages carry this tag; a step's messages match in posting order (MPI's
// non-overtaking rule), which is the order both peers walk their lists in.
constexpr int kTag = 7001;
// A step's range moves as messages of at most the ring's segment (RingOptions), all posted at once,
// and a step posts its sends before its receives, as the ring does. Between two emulated hosts over TCP
// (1 Gbit/s, resnet18's 19 buckets, recursive doubling, no overlap) the wait was 568-584 ms a step with one
// message a step, the receive posted first; 447-515 in segments; 402-409 with the sends first in one
// message; 388-390 with both, level with the ring (docs/BENCHMARKS.md, 2026-12-06). The bytes are the same.
constexpr std::size_t kSegmentBytes = RingOptions{}.segment_bytes;
}  // namespace

RankIn rank_in(MPI_Comm comm) {
  RankIn r{comm, 0, 1};
  MPI_Comm_rank(comm, &r.rank);
  MPI_Comm_size(comm, &r.size);
  return r;
}

void ScheduledAllreduce::start_typed(void* data, std::size_t n, MPI_Datatype type, std::size_t elem, AddFn add) {
  check(!active_, "all-reduce: a second operation started before the first finished");
  steps_ = plan(n);
  if (steps_.empty()) return;
  std::size_t largest = 0;
  for (const Step& s : steps_) {
    check(s.send.count <= std::size_t(INT_MAX) && s.recv.count <= std::size_t(INT_MAX),
          "all-reduce: a message of more than INT_MAX elements");
    if (s.reduce) largest = std::max(largest, s.recv.count);
  }
  if (scratch_.size() < largest * elem) scratch_.resize(largest * elem);
  data_ = static_cast<unsigned char*>(data);
  elem_ = elem;
  type_ = type;
  add_ = add;
  next_ = 0;
  active_ = true;
  post(steps_[next_++]);
}

void ScheduledAllreduce::post(const Step& s) {
  reqs_.clear();  // sends first (see kSegmentBytes)
  const std::size_t seg = std::max<std::size_t>(1, kSegmentBytes / elem_);
  // Segment b of a range [offset, offset + count): an empty range is still one (empty) message.
  auto each_segment = [&](const Transfer& t, auto&& f) {
    for (std::size_t b = 0; b == 0 || b < t.count; b += seg) {
      reqs_.push_back(MPI_REQUEST_NULL);
      f(b, int(std::min(seg, t.count - b)), &reqs_.back());
    }
  };
  if (s.send.peer >= 0) {
    bytes_sent_ += s.send.count * elem_;
    each_segment(s.send, [&](std::size_t b, int len, MPI_Request* r) {
      MPI_Isend(data_ + (s.send.offset + b) * elem_, len, type_, s.send.peer, kTag, s.send.comm, r);
    });
  }
  if (s.recv.peer >= 0) {
    unsigned char* dst = s.reduce ? scratch_.data() : data_ + s.recv.offset * elem_;
    each_segment(s.recv, [&](std::size_t b, int len, MPI_Request* r) {
      MPI_Irecv(dst + b * elem_, len, type_, s.recv.peer, kTag, s.recv.comm, r);
    });
  }
}

bool ScheduledAllreduce::advance(bool block) {
  if (!active_) return true;
  for (;;) {
    if (block) {
      wait_all(int(reqs_.size()), reqs_.data());
    } else {
      int flag = 0;
      MPI_Testall(int(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE);
      if (!flag) return false;
    }
    // Both ends of the step are done: the send buffer may change now, and the received range is here.
    const Step& s = steps_[next_ - 1];
    if (s.reduce && s.recv.peer >= 0) add_(data_ + s.recv.offset * elem_, scratch_.data(), s.recv.count);
    if (next_ == steps_.size()) break;
    post(steps_[next_++]);
  }
  active_ = false;
  return true;
}

}  // namespace ringtrain::dist
