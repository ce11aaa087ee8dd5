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
  if (s.recv.peer >= 0) {
    unsigned char* dst = s.reduce ? scratch_.data() : data_ + s.recv.offset * elem_;
    MPI_Irecv(dst, int(s.recv.count), type_, s.recv.peer, kTag, s.recv.comm, &req_[0]);
  }
  if (s.send.peer >= 0) {
    bytes_sent_ += s.send.count * elem_;
    MPI_Isend(data_ + s.send.offset * elem_, int(s.send.count), type_, s.send.peer, kTag, s.send.comm, &req_[1]);
  }
}

bool ScheduledAllreduce::advance(bool block) {
  if (!active_) return true;
  for (;;) {
    if (block) {
      wait_all(2, req_);
    } else {
      int flag = 0;
      MPI_Testall(2, req_, &flag, MPI_STATUSES_IGNORE);
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
