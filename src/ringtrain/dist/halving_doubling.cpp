#include "ringtrain/dist/halving_doubling.h"

#include <utility>

#include "ringtrain/dist/power_of_two_fold.h"

namespace ringtrain::dist {

void append_halving_doubling(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n) {
  if (me.size == 1 || n == 0) return;
  const PowerOfTwoFold f(me.size);
  append_fold_in(steps, me, offset, n);
  if (const int nr = f.new_rank(me.rank); nr >= 0) {
    // held[k]: the range this rank held before halving step k (partners hold the same one).
    std::vector<std::pair<std::size_t, std::size_t>> held;
    std::size_t lo = offset, hi = offset + n;
    for (int mask = 1; mask < f.p; mask <<= 1) {
      held.emplace_back(lo, hi);
      const std::size_t mid = lo + (hi - lo) / 2;
      const bool lower = (nr & mask) == 0;
      const std::size_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
      const std::size_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
      const int peer = f.old_rank(nr ^ mask);
      Step s;
      s.send = {me.comm, peer, give_lo, give_hi - give_lo};
      s.recv = {me.comm, peer, keep_lo, keep_hi - keep_lo};
      s.reduce = true;
      steps.push_back(s);
      lo = keep_lo;
      hi = keep_hi;
    }
    // All-gather: the same halvings in reverse, each sending the summed range and receiving its sibling.
    for (int k = int(held.size()) - 1; k >= 0; --k) {
      const int peer = f.old_rank(nr ^ (1 << k));
      const auto [parent_lo, parent_hi] = held[std::size_t(k)];
      const bool lower = (nr & (1 << k)) == 0;  // not lo == parent_lo: a half may be empty
      const std::size_t sib_lo = lower ? hi : parent_lo, sib_hi = lower ? parent_hi : lo;
      Step s;
      s.send = {me.comm, peer, lo, hi - lo};
      s.recv = {me.comm, peer, sib_lo, sib_hi - sib_lo};
      steps.push_back(s);
      lo = parent_lo;
      hi = parent_hi;
    }
  }
  append_fold_out(steps, me, offset, n);
}

std::vector<Step> HalvingDoublingAllreduce::plan(std::size_t n) const {
  std::vector<Step> steps;
  append_halving_doubling(steps, me_, 0, n);
  return steps;
}

}  // namespace ringtrain::dist
