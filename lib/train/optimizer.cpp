#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace nmt {

double noam_lr(int64_t step, int64_t d_model, int64_t warmup, double scale) {
  if (step < 1) step = 1;
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(std::max<int64_t>(warmup, 1));
  return scale * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

Adam::Adam(int64_t n, AdamOptions opts) : opts_(opts), m_(Shape{n}), v_(Shape{n}) {}

void Adam::update(Tensor& params, const Tensor& grads, double lr) {
  ops::AdamStep s;
  s.beta1 = opts_.beta1;
  s.beta2 = opts_.beta2;
  s.eps = opts_.eps;
  s.lr = lr;
  s.t = ++t_;
  ops::adam_update(params, grads, m_, v_, s);
}

}  // namespace nmt
