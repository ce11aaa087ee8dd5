#include "ringtrain/nn/shard.h"

#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Shape ShardInfo::shard_shape(int r) const {
  Shape s = full;
  if (sharded()) s[std::size_t(dim)] = int64_t(blocks) * (end(r) - begin(r));
  return s;
}

std::vector<int64_t> even_split(int64_t D, int T, const std::string& what) {
  check(T >= 1, what + ": cannot split over " + std::to_string(T) + " ranks");
  check(D >= T, what + ": " + std::to_string(D) + " features cannot be split over " + std::to_string(T) +
                    " tensor-parallel ranks (each rank needs at least one); use a --tp of at most " +
                    std::to_string(D));
  std::vector<int64_t> b(std::size_t(T) + 1, 0);
  for (int r = 0; r < T; ++r) b[std::size_t(r) + 1] = b[std::size_t(r)] + D / T + (r < D % T ? 1 : 0);
  return b;
}

void check_split(const std::vector<int64_t>& bounds, int64_t D, int T, const std::string& what) {
  check(int(bounds.size()) == T + 1, what + ": a split over " + std::to_string(T) + " ranks needs " +
                                         std::to_string(T + 1) + " bounds, got " + std::to_string(bounds.size()));
  check(bounds.front() == 0 && bounds.back() == D,
        what + ": split bounds must run from 0 to " + std::to_string(D));
  for (int r = 0; r < T; ++r)
    check(bounds[std::size_t(r) + 1] > bounds[std::size_t(r)], what + ": shard " + std::to_string(r) + " is empty");
}

namespace {
// The whole tensor as [outer, D, inner] with D = full[dim] / blocks and outer counting the blocks too
// (outer = the dimensions before dim x blocks); a shard is [outer, end-begin, inner].
void copy_shard(const ShardInfo& info, int r, const float* src, float* dst, bool to_full) {
  if (!info.sharded()) {
    std::memcpy(dst, src, std::size_t(shape_numel(info.full)) * sizeof(float));
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < info.dim; ++d) outer *= info.full[std::size_t(d)];
  for (std::size_t d = std::size_t(info.dim) + 1; d < info.full.size(); ++d) inner *= info.full[d];
  check(info.blocks >= 1 && info.full[std::size_t(info.dim)] % info.blocks == 0,
        "shard: " + std::to_string(info.full[std::size_t(info.dim)]) + " elements are not " +
            std::to_string(info.blocks) + " equal blocks");
  outer *= info.blocks;
  const int64_t D = info.full[std::size_t(info.dim)] / info.blocks;
  const int64_t b = info.begin(r), n = info.end(r) - b;
  for (int64_t o = 0; o < outer; ++o) {
    const std::size_t full_at = std::size_t((o * D + b) * inner), shard_at = std::size_t(o * n * inner);
    if (to_full)
      std::memcpy(dst + full_at, src + shard_at, std::size_t(n * inner) * sizeof(float));
    else
      std::memcpy(dst + shard_at, src + full_at, std::size_t(n * inner) * sizeof(float));
  }
}
}  // namespace

void extract_shard(const ShardInfo& info, int r, const float* full, float* shard) {
  copy_shard(info, r, full, shard, false);
}
void insert_shard(const ShardInfo& info, int r, const float* shard, float* full) {
  copy_shard(info, r, shard, full, true);
}

}  // namespace ringtrain::nn
