#include "ringtrain/dist/power_of_two_fold.h"

namespace ringtrain::dist {

void append_fold_in(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n) {
  const PowerOfTwoFold f(me.size);
  if (me.rank >= 2 * f.rem) return;
  Step s;
  if (me.rank % 2) s.send = {me.comm, me.rank - 1, offset, n};
  else s.recv = {me.comm, me.rank + 1, offset, n}, s.reduce = true;
  steps.push_back(s);
}

void append_fold_out(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n) {
  const PowerOfTwoFold f(me.size);
  if (me.rank >= 2 * f.rem) return;
  Step s;
  if (me.rank % 2) s.recv = {me.comm, me.rank - 1, offset, n};
  else s.send = {me.comm, me.rank + 1, offset, n};
  steps.push_back(s);
}

}  // namespace ringtrain::dist
