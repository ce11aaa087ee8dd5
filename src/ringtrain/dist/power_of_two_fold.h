// The standard fold that lets recursive doubling and halving-doubling run on any number of ranks W:
// with p = 2^floor(log2 W) and rem = W - p, the first 2*rem ranks pair up; each odd one sends its
// whole vector to its even neighbour (which adds it) before the power-of-two algorithm, sits out, and
// receives the result from it after. The p ranks left are renumbered 0..p-1.
#pragma once
#include <cstddef>
#include <vector>

#include "ringtrain/dist/step_schedule.h"

namespace ringtrain::dist {

struct PowerOfTwoFold {
  int p = 1, rem = 0;
  explicit PowerOfTwoFold(int W) {
    while (p * 2 <= W) p *= 2;
    rem = W - p;
  }
  // The rank among the p that take part, or -1 for an odd rank of the first 2*rem (folded away).
  int new_rank(int r) const { return r < 2 * rem ? (r % 2 ? -1 : r / 2) : r - rem; }
  int old_rank(int nr) const { return nr < rem ? 2 * nr : nr + rem; }
};

// Before: the odd ranks of the first 2*rem send [offset, offset+n) to r-1, which adds it.
void append_fold_in(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n);
// After: the even ones send the result back to r+1.
void append_fold_out(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n);

}  // namespace ringtrain::dist
