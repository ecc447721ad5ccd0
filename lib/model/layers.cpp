#include "model/layers.h"

#include "core/cpu_kernels.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace nmt {

Linear::Linear(ParamStore& store, const std::string& name, int64_t in, int64_t out, bool bias)
    : in_(in), out_(out) {
  w_ = store.add(name + "/weight", Shape{out, in}, Init::XavierUniform);
  if (bias) b_ = store.add(name + "/bias", Shape{out}, Init::Zeros);
}

void Linear::forward(const Tensor& x, Tensor& y, bool relu) const {
  const int64_t N = x.numel() / in_;
  y.resize(Shape{N, out_});
  cpu::GemmAttr attr;
  attr.bias = b_ ? b_->value.data() : nullptr;
  attr.relu = relu;
  cpu::gemm(cpu::mat(x.data(), N, in_, in_), cpu::mat_t(w_->value.data(), out_, in_, in_),
            cpu::mat(y.data(), N, out_, out_), attr);
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx) {
  const int64_t N = x.numel() / in_;
  if (dx) {
    if (!accumulate_dx) dx->resize(Shape{N, in_});
    cpu::GemmAttr a;
    a.accumulate = accumulate_dx;
    cpu::gemm(cpu::mat(dy.data(), N, out_, out_), cpu::mat(w_->value.data(), out_, in_, in_),
              cpu::mat(dx->data(), N, in_, in_), a);
  }
  cpu::GemmAttr acc;
  acc.accumulate = true;
  cpu::gemm(cpu::mat_t(dy.data(), N, out_, out_), cpu::mat(x.data(), N, in_, in_),
            cpu::mat(w_->grad.data(), out_, in_, in_), acc);
  if (b_) cpu::add_column_sums(dy.data(), b_->grad.data(), N, out_);
}

LayerNorm::LayerNorm(ParamStore& store, const std::string& name, int64_t d, float eps) : eps_(eps) {
  gamma_ = store.add(name + "/gamma", Shape{d}, Init::Ones);
  beta_ = store.add(name + "/beta", Shape{d}, Init::Zeros);
}

void LayerNorm::forward(const Tensor& x, Tensor& y, bool training) {
  const int64_t D = gamma_->shape[0], N = x.numel() / D;
  y.resize(Shape{N, D});
  if (training) {
    mean_.resize(Shape{N});
    var_.resize(Shape{N});
  }
  cpu::layer_norm(x.data(), y.data(), gamma_->value.data(), beta_->value.data(),
                  training ? mean_.data() : nullptr, training ? var_.data() : nullptr, N, D, eps_,
                  training);
}

void LayerNorm::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t D = gamma_->shape[0], N = x.numel() / D;
  dx.resize(Shape{N, D});
  cpu::layer_norm_backward(x.data(), dy.data(), gamma_->value.data(), mean_.data(), var_.data(),
                           dx.data(), gamma_->grad.data(), beta_->grad.data(), N, D, eps_);
}

void LayerNorm::infer(const Tensor& x, Tensor& y) const {
  const int64_t D = gamma_->shape[0], N = x.numel() / D;
  y.resize(Shape{N, D});
  cpu::layer_norm(x.data(), y.data(), gamma_->value.data(), beta_->value.data(), nullptr, nullptr,
                  N, D, eps_, false);
}

FeedForward::FeedForward(ParamStore& store, const std::string& name, int64_t d_model, int64_t d_ff,
                         float relu_dropout)
    : w1_(store, name + "/w1", d_model, d_ff),
      w2_(store, name + "/w2", d_ff, d_model),
      relu_dropout_(relu_dropout) {}

void FeedForward::forward(const Tensor& x, Tensor& y, bool training, uint64_t seed) {
  w1_.forward(x, h_, /*relu=*/true);
  seed_ = seed;
  if (training) cpu::dropout(h_.data(), h_.numel(), relu_dropout_, seed_);
  w2_.forward(h_, y);
}

void FeedForward::infer(const Tensor& x, Tensor& hidden, Tensor& y) const {
  w1_.forward(x, hidden, /*relu=*/true);
  w2_.forward(hidden, y);
}

void FeedForward::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  w2_.backward(h_, dy, &dh_);
  cpu::dropout_backward(dh_.data(), dh_.numel(), relu_dropout_, seed_);
  // h_ is post-dropout; a dropped unit has zero gradient either way.
  cpu::relu_backward(h_.data(), dh_.data(), dh_.numel());
  w1_.backward(x, dh_, &dx);
}

}  // namespace nmt
