#include "model/layers.h"

#include "core/error.h"
#include "ops/ops.h"

namespace nmt {

Linear::Linear(ParamStore& store, const std::string& name, int64_t in, int64_t out, bool bias,
               bool sparse_input) {
  w = store.add(name + "/weight", Shape{out, in}, Init::XavierUniform);
  if (bias) b = store.add(name + "/bias", Shape{out}, Init::Zeros);
  store.multiplied(w, sparse_input, /*products_only=*/true);
}

ops::Weight weight_of(const Param& w, const Param* b) {
  ops::Weight o;
  o.out = w.shape[0], o.in = w.shape[1];
  if (!w.value.empty()) o.value = &w.value;
  o.scales = w.int8_scales();
  o.bias = b ? &b->value : nullptr;
  o.prepared = w.prepared.get();
  o.compute = w.store->compute_type();
  return o;
}

ops::Weight Linear::weight() const { return weight_of(*w, b); }

void Linear::forward(const Tensor& x, Tensor& y, Activation act) const {
  ops::linear(x, weight(), y, act);
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx,
                      Grads& g) const {
  Tensor dw = g.of(w);
  Tensor db;
  if (b) db = g.of(b);
  ops::linear_backward(x, dy, w->value, dx, accumulate_dx, dw, b ? &db : nullptr,
                       w->store->compute_type());
}

LayerNorm::LayerNorm(ParamStore& store, const std::string& name, int64_t d, float e) : eps(e) {
  gamma = store.add(name + "/gamma", Shape{d}, Init::Ones);
  beta = store.add(name + "/beta", Shape{d}, Init::Zeros);
}

void LayerNorm::forward(const Tensor& x, Tensor& y, NormStats* stats) const {
  ops::layer_norm(x, gamma->value, beta->value, eps, y, stats ? &stats->mean : nullptr,
                  stats ? &stats->var : nullptr);
}

void LayerNorm::forward_sum(const Tensor& x, const Tensor& a, Tensor* sum, Tensor& y,
                            NormStats* stats) const {
  if (!stats) return ops::add_layer_norm(x, a, gamma->value, beta->value, eps, sum, y);
  if (!sum) throw Error("LayerNorm::forward_sum: training keeps the sum");
  ops::add(x, a, *sum);
  forward(*sum, y, stats);
}

void LayerNorm::backward(const Tensor& x, const Tensor& dy, const NormStats& stats, Tensor& dx,
                         Grads& g) const {
  Tensor dgamma = g.of(gamma), dbeta = g.of(beta);
  ops::layer_norm_backward(x, dy, gamma->value, stats.mean, stats.var, eps, dx, dgamma, dbeta);
}

FeedForward::FeedForward(ParamStore& store, const std::string& name, int64_t d_model, int64_t d_ff,
                         float dropout, Activation a)
    : w1(store, name + "/w1", d_model, d_ff),
      // ReLU leaves most hidden units at zero (about 92% in the Multi30k
      // transformer-small while it translates), which the second product can skip.
      w2(store, name + "/w2", d_ff, d_model, true, a == Activation::Relu),
      relu_dropout(dropout),
      act(a) {}

void FeedForward::forward(const Tensor& x, Tensor& hidden, Tensor* pre, Tensor& y, bool training,
                          uint64_t seed) const {
  if (pre) {
    w1.forward(x, *pre);
    ops::activate(*pre, hidden, act);
  } else {
    w1.forward(x, hidden, act);
  }
  if (training) ops::dropout_(hidden, relu_dropout, seed);
  w2.forward(hidden, y);
}

void FeedForward::backward(const Tensor& x, const Tensor& hidden, const Tensor* pre,
                           const Tensor& dy, Tensor& dhidden, Tensor& dx, Grads& g,
                           uint64_t seed) const {
  w2.backward(hidden, dy, &dhidden, false, g);
  ops::dropout_(dhidden, relu_dropout, seed);
  // ReLU's derivative reads its output: hidden is post-dropout, and a
  // dropped unit has zero gradient either way.
  if (keeps_pre() && !pre) throw Error("FeedForward::backward: the forward pass kept no units");
  ops::activation_backward_(keeps_pre() ? *pre : hidden, dhidden, act);
  w1.backward(x, dhidden, &dx, false, g);
}

}  // namespace nmt
