#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace nmt {

double noam_lr(int64_t step, int64_t d_model, int64_t warmup, double scale) {
  if (step < 1) step = 1;
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(std::max<int64_t>(warmup, 1));
  return scale * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

Adam::Adam(int64_t n, AdamOptions opts) : opts_(opts), m_(Shape{n}), v_(Shape{n}) {}

void Adam::update(float* params, const float* grads, double lr) {
  ++t_;
  const int64_t n = m_.numel();
  const float b1 = static_cast<float>(opts_.beta1), b2 = static_cast<float>(opts_.beta2);
  const double c1 = 1.0 - std::pow(opts_.beta1, static_cast<double>(t_));
  const double c2 = 1.0 - std::pow(opts_.beta2, static_cast<double>(t_));
  // p -= lr/c1 * m / (sqrt(v)/sqrt(c2) + eps): the corrections fold into two
  // scalars, so the loop reads each buffer once.
  const float step = static_cast<float>(lr / c1);
  const float inv_sqrt_c2 = static_cast<float>(1.0 / std::sqrt(c2));
  const float eps = static_cast<float>(opts_.eps);
  float* m = m_.data();
  float* v = v_.data();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i];
    m[i] = b1 * m[i] + (1.f - b1) * g;
    v[i] = b2 * v[i] + (1.f - b2) * g * g;
    params[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
  }
}

double l2_norm(const float* x, int64_t n) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0;
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    part[c] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return std::sqrt(s);
}

void scale_buffer(float* x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace nmt
