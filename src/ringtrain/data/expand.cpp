#include "ringtrain/data/expand.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "ringtrain/core/error.h"

namespace ringtrain::data {

namespace {

// Separable Gaussian smoothing with zero padding outside the image (as scipy's mode='constant').
void gaussian_smooth(float* field, float* tmp, int rows, int cols, const std::vector<float>& kernel) {
  const int radius = int(kernel.size()) / 2;
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x) {
      float acc = 0.0f;
      for (int t = -radius; t <= radius; ++t) {
        int xx = x + t;
        if (xx >= 0 && xx < cols) acc += kernel[t + radius] * field[y * cols + xx];
      }
      tmp[y * cols + x] = acc;
    }
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x) {
      float acc = 0.0f;
      for (int t = -radius; t <= radius; ++t) {
        int yy = y + t;
        if (yy >= 0 && yy < rows) acc += kernel[t + radius] * tmp[yy * cols + x];
      }
      field[y * cols + x] = acc;
    }
}

std::vector<float> gaussian_kernel(float sigma) {
  const int radius = std::max(1, int(std::ceil(3.0f * sigma)));
  std::vector<float> k(2 * radius + 1);
  float sum = 0.0f;
  for (int t = -radius; t <= radius; ++t) sum += k[t + radius] = std::exp(-0.5f * t * t / (sigma * sigma));
  for (float& v : k) v /= sum;
  return k;
}

float bilinear(const uint8_t* src, int rows, int cols, float y, float x) {
  const int y0 = int(std::floor(y)), x0 = int(std::floor(x));
  const float fy = y - y0, fx = x - x0;
  auto at = [&](int yy, int xx) -> float {
    return (yy < 0 || yy >= rows || xx < 0 || xx >= cols) ? 0.0f : float(src[yy * cols + xx]);
  };
  return (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x0 + 1)) +
         fy * ((1 - fx) * at(y0 + 1, x0) + fx * at(y0 + 1, x0 + 1));
}

}  // namespace

void deform_digit(uint8_t* dst, const uint8_t* src, int rows, int cols, const DeformParams& p, Rng& rng) {
  const int n = rows * cols;
  std::vector<float> dx(n), dy(n), tmp(n);
  for (int i = 0; i < n; ++i) dx[i] = rng.uniform(-1.0f, 1.0f);
  for (int i = 0; i < n; ++i) dy[i] = rng.uniform(-1.0f, 1.0f);
  static thread_local std::vector<float> kernel;
  static thread_local float kernel_sigma = -1.0f;
  if (kernel_sigma != p.sigma) {
    kernel = gaussian_kernel(p.sigma);
    kernel_sigma = p.sigma;
  }
  gaussian_smooth(dx.data(), tmp.data(), rows, cols, kernel);
  gaussian_smooth(dy.data(), tmp.data(), rows, cols, kernel);

  // Inverse affine map (output -> source coordinates) about the centre.
  const float angle = rng.uniform(-p.max_rotation_deg, p.max_rotation_deg) * 3.14159265358979f / 180.0f;
  const float scale = 1.0f + rng.uniform(-p.max_scale, p.max_scale);
  const float shear = rng.uniform(-p.max_shear, p.max_shear);
  const float tx = rng.uniform(-p.max_translation, p.max_translation);
  const float ty = rng.uniform(-p.max_translation, p.max_translation);
  const float c = std::cos(angle) / scale, s = std::sin(angle) / scale;
  const float cy = 0.5f * (rows - 1), cx = 0.5f * (cols - 1);

  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x) {
      // Elastic displacement first, then the affine transform of the displaced point.
      float u = x + p.alpha * dx[y * cols + x] - cx - tx;
      float v = y + p.alpha * dy[y * cols + x] - cy - ty;
      u -= shear * v;
      float sx = c * u + s * v + cx;
      float sy = -s * u + c * v + cy;
      float value = bilinear(src, rows, cols, sy, sx);
      dst[y * cols + x] = uint8_t(std::clamp(std::lround(value), 0L, 255L));
    }
}

Split expand_split(const Split& source, const ExpandOptions& options,
                   const std::function<void(int64_t, int64_t)>& progress) {
  check(source.count > 0, "expand: the source split is empty");
  check(options.count > 0, "expand: --count must be positive");
  check(options.deform.sigma > 0 && options.deform.alpha >= 0, "expand: sigma must be > 0 and alpha >= 0");
  const int64_t pixels = int64_t(source.rows) * source.cols;
  Split out;
  out.count = options.count;
  out.rows = source.rows;
  out.cols = source.cols;
  out.images.resize(std::size_t(options.count * pixels));
  out.labels.resize(std::size_t(options.count));

  int threads = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = int(std::min<int64_t>(threads, options.count));
  // Samples are handed out in blocks so the threads stay busy to the end; each sample's result depends
  // only on (seed, i), so the order of work does not matter.
  constexpr int64_t kBlock = 1024;
  std::atomic<int64_t> next{0}, done{0};
  auto work = [&] {
    for (;;) {
      const int64_t begin = next.fetch_add(kBlock);
      if (begin >= options.count) return;
      const int64_t end = std::min(options.count, begin + kBlock);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t src = i % source.count;
        uint8_t* dst = out.images.data() + i * pixels;
        out.labels[i] = source.labels[src];
        if (options.keep_originals && i < source.count) {
          std::copy(source.image(src), source.image(src) + pixels, dst);
          continue;
        }
        Rng rng(mix64(options.seed ^ mix64(uint64_t(i))));
        deform_digit(dst, source.image(src), source.rows, source.cols, options.deform, rng);
      }
      done.fetch_add(end - begin);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  if (progress) {
    // The calling thread reports progress while the pool works, then joins in.
    std::thread reporter([&] {
      while (done.load() < options.count) {
        progress(done.load(), options.count);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    });
    work();
    for (auto& t : pool) t.join();
    reporter.join();
    progress(options.count, options.count);
  } else {
    work();
    for (auto& t : pool) t.join();
  }
  return out;
}

}  // namespace ringtrain::data
