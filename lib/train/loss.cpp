#include "train/loss.h"

#include <cmath>
#include <vector>

namespace nmt {

LossStats label_smoothed_xent(const Tensor& logits, const int32_t* targets, float eps,
                              int32_t pad_id, Tensor* dlogits, float grad_scale) {
  const int64_t N = logits.dim(0), V = logits.dim(1);
  if (dlogits) dlogits->resize(logits.shape());
  std::vector<double> loss(N, 0.0), nll(N, 0.0);
#pragma omp parallel for
  for (int64_t i = 0; i < N; ++i) {
    const float* x = logits.data() + i * V;
    float* g = dlogits ? dlogits->data() + i * V : nullptr;
    if (targets[i] == pad_id) {
      if (g) std::fill(g, g + V, 0.f);
      continue;
    }
    float mx = x[0];
    for (int64_t j = 1; j < V; ++j) mx = std::max(mx, x[j]);
    double z = 0, sum_x = 0;
    for (int64_t j = 0; j < V; ++j) {
      z += std::exp(static_cast<double>(x[j] - mx));
      sum_x += x[j];
    }
    const double logz = mx + std::log(z);
    const double lp_target = x[targets[i]] - logz;
    const double mean_lp = sum_x / V - logz;
    nll[i] = -lp_target;
    loss[i] = -(1.0 - eps) * lp_target - eps * mean_lp;
    if (g) {
      // d/dx_j = softmax_j - q_j, q = (1-eps) onehot + eps / V
      const double inv_z = 1.0 / z;
      const float u = eps / V;
      for (int64_t j = 0; j < V; ++j)
        g[j] =
            static_cast<float>((std::exp(static_cast<double>(x[j] - mx)) * inv_z - u) * grad_scale);
      g[targets[i]] -= (1.f - eps) * grad_scale;
    }
  }
  LossStats s;
  for (int64_t i = 0; i < N; ++i) {
    if (targets[i] == pad_id) continue;
    s.loss += loss[i];
    s.nll += nll[i];
    ++s.tokens;
  }
  return s;
}

}  // namespace nmt
