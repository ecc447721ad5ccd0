// Adam over the flat parameter buffer and the paper's learning-rate schedule
// (section 5.3): lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
// here times a user scale. Both moments live in flat buffers the size of the
// parameter buffer, so an update is one op and a checkpoint two tensors.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace nmt {

// step counts from 1.
double noam_lr(int64_t step, int64_t d_model, int64_t warmup, double scale = 1.0);

// The shapes the learning rate can take after its linear warmup, all with
// the same peak (noam_lr's at the end of warmup): the paper's inverse square
// root, which never ends, and two that end at 0 after `total` updates, for
// a run whose budget is known (see train/recipe.h).
enum class LrShape { InverseSqrt, Linear, Cosine };
const char* lr_shape_name(LrShape s);  // "inverse-sqrt", "linear", "cosine"
// total <= warmup (unknown or too short) decays like InverseSqrt.
double schedule_lr(LrShape shape, int64_t step, int64_t d_model, int64_t warmup, double scale,
                   int64_t total);

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-9;
};

class Adam {
 public:
  // Both moments live on `device`, beside the parameters.
  explicit Adam(int64_t n, Device device = Device::CPU, AdamOptions opts = {});
  // One update with bias correction (Kingma & Ba):
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  t += 1
  //   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  // Clipped first, when clip_sumsq is given (see ops::AdamStep).
  void update(Tensor& params, const Tensor& grads, double lr, const Tensor* clip_sumsq = nullptr,
              int64_t clip_at = 0, double clip_norm = 0);
  Tensor& m() { return m_; }
  Tensor& v() { return v_; }
  int64_t t() const { return t_; }
  void set_t(int64_t t) { t_ = t; }
  const AdamOptions& options() const { return opts_; }

 private:
  AdamOptions opts_;
  Tensor m_, v_;  // (n)
  int64_t t_ = 0;
};

}  // namespace nmt
