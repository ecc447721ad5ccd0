#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace nmt {

double noam_lr(int64_t step, int64_t d_model, int64_t warmup, double scale) {
  if (step < 1) step = 1;
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(std::max<int64_t>(warmup, 1));
  return scale * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

const char* lr_shape_name(LrShape s) {
  switch (s) {
    case LrShape::Linear: return "linear";
    case LrShape::Cosine: return "cosine";
    default: return "inverse-sqrt";
  }
}

double schedule_lr(LrShape shape, int64_t step, int64_t d_model, int64_t warmup, double scale,
                   int64_t total) {
  if (shape == LrShape::InverseSqrt || total <= warmup || step <= warmup)
    return noam_lr(step, d_model, warmup, scale);
  const double peak = noam_lr(warmup, d_model, warmup, scale);
  const double p = std::min(1.0, double(step - warmup) / double(total - warmup));
  if (shape == LrShape::Linear) return peak * (1.0 - p);
  return peak * 0.5 * (1.0 + std::cos(M_PI * p));
}

Adam::Adam(int64_t n, Device device, AdamOptions opts)
    : opts_(opts), m_(Shape{n}, device), v_(Shape{n}, device) {}

void Adam::update(Tensor& params, const Tensor& grads, double lr, const Tensor* clip_sumsq,
                  int64_t clip_at, double clip_norm) {
  ops::AdamStep s;
  s.beta1 = opts_.beta1;
  s.beta2 = opts_.beta2;
  s.eps = opts_.eps;
  s.lr = lr;
  s.t = ++t_;
  s.clip_sumsq = clip_sumsq;
  s.clip_at = clip_at;
  s.clip_norm = clip_norm;
  ops::adam_update(params, grads, m_, v_, s);
}

}  // namespace nmt
