// The small layers the Transformer is built from: Linear, LayerNorm,
// FeedForward, and Embeddings (token embedding * sqrt(d_model) + positions).
//
// Gradient convention for every layer (llm.c style):
//   - parameter gradients ACCUMULATE (+=) into Param::grad, so gradient
//     accumulation over several batches needs nothing special;
//   - activation gradients are ASSIGNED (dx = ...), unless a function says
//     it adds (accumulate_dx), as the residual path and the encoder output
//     (read by every decoder layer) need.
// Each layer keeps in its own buffers exactly what its backward pass needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/params.h"

namespace nmt {

// y = x W^T + b, W stored (out, in) like the paper's (d_model x d_ff) maps.
class Linear {
 public:
  Linear() = default;
  Linear(ParamStore& store, const std::string& name, int64_t in, int64_t out, bool bias = true);
  // x (N, in) -> y (N, out); relu is fused into the GEMM as a post-op.
  void forward(const Tensor& x, Tensor& y, bool relu = false) const;
  // dx (N, in) = dy W (added to dx when accumulate_dx); dW += dy^T x; db += sum dy.
  void backward(const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx = false);
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  Param* weight() const { return w_; }

 private:
  Param* w_ = nullptr;
  Param* b_ = nullptr;
  int64_t in_ = 0, out_ = 0;
};

class LayerNorm {
 public:
  LayerNorm() = default;
  LayerNorm(ParamStore& store, const std::string& name, int64_t d, float eps);
  // Saves mean and variance when training.
  void forward(const Tensor& x, Tensor& y, bool training);
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  void infer(const Tensor& x, Tensor& y) const;

 private:
  Param* gamma_ = nullptr;
  Param* beta_ = nullptr;
  float eps_ = 1e-6f;
  Tensor mean_, var_;  // (N)
};

// Position-wise FFN: max(0, x W1 + b1) W2 + b2.
class FeedForward {
 public:
  FeedForward() = default;
  FeedForward(ParamStore& store, const std::string& name, int64_t d_model, int64_t d_ff,
              float relu_dropout);
  void forward(const Tensor& x, Tensor& y, bool training, uint64_t seed);
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  // Inference with caller-owned hidden buffer (N, d_ff).
  void infer(const Tensor& x, Tensor& hidden, Tensor& y) const;

 private:
  Linear w1_, w2_;
  float relu_dropout_ = 0.f;
  uint64_t seed_ = 0;
  Tensor h_;   // (N, d_ff) after ReLU (and dropout)
  Tensor dh_;  // (N, d_ff)
};

}  // namespace nmt
