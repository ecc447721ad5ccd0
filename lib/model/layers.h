// The small layers the Transformer is built from: Linear, LayerNorm and the
// position-wise FeedForward. A layer holds views of its weights, which it
// never writes; each has a forward and a backward pass, and the tensors the
// backward pass needs are kept by the caller (in the step's arena).
//
// Gradient convention for every layer (llm.c style):
//   - parameter gradients ACCUMULATE (+=) into Grads, so gradient
//     accumulation over several batches needs nothing special;
//   - activation gradients are ASSIGNED (dx = ...), unless a function says
//     it adds (accumulate_dx), as the residual path and the encoder output
//     (read by every decoder layer) need.
#pragma once

#include <cstdint>
#include <string>

#include "core/activation.h"
#include "core/tensor.h"
#include "model/params.h"
#include "ops/ops.h"

namespace nmt {

// W (out, in) and its bias b (or none) as products read them: the value,
// while the store holds it, and the prepared form, once it is prepared.
ops::Weight weight_of(const Param& w, const Param* b);

// y = x W^T + b, W stored (out, in) like the paper's (d_model x d_ff) maps.
struct Linear {
  const Param* w = nullptr;
  const Param* b = nullptr;

  Linear() = default;
  // sparse_input: its inputs are mostly zeros (the FFN's second product,
  // after ReLU), which its prepared form may skip.
  Linear(ParamStore& store, const std::string& name, int64_t in, int64_t out, bool bias = true,
         bool sparse_input = false);
  // x (N, in) -> y (N, out); the activation is fused into the GEMM.
  void forward(const Tensor& x, Tensor& y, Activation act = Activation::None) const;
  // W and b as products read them.
  ops::Weight weight() const;
  // dx (N, in) = dy W (added to dx when accumulate_dx); dW += dy^T x; db += sum dy.
  void backward(const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx, Grads& g) const;
  int64_t in() const { return w->shape[1]; }
  int64_t out() const { return w->shape[0]; }
};

// Mean and variance per row, saved by a training forward pass.
struct NormStats {
  Tensor mean, var;  // (N)
};

struct LayerNorm {
  const Param* gamma = nullptr;
  const Param* beta = nullptr;
  float eps = 1e-6f;

  LayerNorm() = default;
  LayerNorm(ParamStore& store, const std::string& name, int64_t d, float eps);
  // stats: given when training (the backward pass needs them).
  void forward(const Tensor& x, Tensor& y, NormStats* stats = nullptr) const;
  // A residual and its norm: sum = x + a (where given) and y = LN(x + a),
  // in one op when translating. Training (stats given) keeps the sum for
  // the backward pass, so it must be given then.
  void forward_sum(const Tensor& x, const Tensor& a, Tensor* sum, Tensor& y,
                   NormStats* stats = nullptr) const;
  void backward(const Tensor& x, const Tensor& dy, const NormStats& stats, Tensor& dx,
                Grads& g) const;
};

// Position-wise FFN: act(x W1 + b1) W2 + b2 (the paper's act is ReLU),
// dropout on the hidden units.
struct FeedForward {
  Linear w1, w2;
  float relu_dropout = 0.f;
  Activation act = Activation::Relu;

  FeedForward() = default;
  FeedForward(ParamStore& store, const std::string& name, int64_t d_model, int64_t d_ff,
              float relu_dropout, Activation act);
  // hidden (N, d_ff) holds the units after the activation (and dropout,
  // when training with a seed); the backward pass reads it. A training pass
  // with an activation other than ReLU also keeps the units before it in
  // *pre (N, d_ff), whose derivative needs them; elsewhere pre is null and
  // the activation is fused into the GEMM.
  void forward(const Tensor& x, Tensor& hidden, Tensor* pre, Tensor& y, bool training,
               uint64_t seed) const;
  // dhidden: scratch (N, d_ff); pre: as the forward pass kept it.
  void backward(const Tensor& x, const Tensor& hidden, const Tensor* pre, const Tensor& dy,
                Tensor& dhidden, Tensor& dx, Grads& g, uint64_t seed) const;
  // Whether a training pass needs the pre-activation units.
  bool keeps_pre() const { return act != Activation::Relu; }
};

}  // namespace nmt
