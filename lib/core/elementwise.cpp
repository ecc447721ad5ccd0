#include "core/elementwise.h"

#include <omp.h>

#include <vector>

namespace nmt::cpu {

void add(const float* a, const float* b, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

void add_inplace(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void add_mask(float* scores, const std::array<int64_t, 4>& d, const float* mask,
              const std::array<int64_t, 4>& md) {
  const int64_t sb = md[0] == 1 ? 0 : md[1] * md[2] * md[3], sh = md[1] == 1 ? 0 : md[2] * md[3],
                st = md[2] == 1 ? 0 : md[3];
  const bool row_bcast = md[3] == 1;
#pragma omp parallel for collapse(2) if (d[0] * d[1] * d[2] * d[3] > 65536)
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t h = 0; h < d[1]; ++h)
      for (int64_t t = 0; t < d[2]; ++t) {
        float* row = scores + ((b * d[1] + h) * d[2] + t) * d[3];
        const float* m = mask + b * sb + h * sh + t * st;
        if (row_bcast) {
          for (int64_t s = 0; s < d[3]; ++s) row[s] += m[0];
        } else {
          for (int64_t s = 0; s < d[3]; ++s) row[s] += m[s];
        }
      }
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void dropout(float* x, int64_t n, float p, uint64_t seed) {
  if (p <= 0.f) return;
  const float keep = 1.f / (1.f - p);
  const uint32_t threshold = static_cast<uint32_t>(p * 4294967296.0);
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = static_cast<uint32_t>(mix_seed(seed, static_cast<uint64_t>(i)) >> 32);
    x[i] = r < threshold ? 0.f : x[i] * keep;
  }
}

void relu_backward(const float* y, float* dy, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > 0.f ? dy[i] : 0.f;
}

void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) {
  // Sum in a fixed order (rows in sequence per column) so results do not
  // depend on the thread count.
#pragma omp parallel for if (rows * cols > 65536)
  for (int64_t j = 0; j < cols; ++j) {
    float s = 0.f;
    for (int64_t i = 0; i < rows; ++i) s += src[i * cols + j];
    dst[j] += s;
  }
}

}  // namespace nmt::cpu
