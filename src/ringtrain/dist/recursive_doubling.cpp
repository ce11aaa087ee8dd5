#include "ringtrain/dist/recursive_doubling.h"

#include "ringtrain/dist/power_of_two_fold.h"

namespace ringtrain::dist {

void append_recursive_doubling(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n) {
  if (me.size == 1 || n == 0) return;
  const PowerOfTwoFold f(me.size);
  append_fold_in(steps, me, offset, n);
  if (const int nr = f.new_rank(me.rank); nr >= 0) {
    for (int mask = 1; mask < f.p; mask <<= 1) {
      const int peer = f.old_rank(nr ^ mask);
      Step s;
      s.send = {me.comm, peer, offset, n};
      s.recv = {me.comm, peer, offset, n};
      s.reduce = true;
      steps.push_back(s);
    }
  }
  append_fold_out(steps, me, offset, n);
}

std::vector<Step> RecursiveDoublingAllreduce::plan(std::size_t n) const {
  std::vector<Step> steps;
  append_recursive_doubling(steps, me_, 0, n);
  return steps;
}

}  // namespace ringtrain::dist
