#include "model/encoder.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"
#include "ops/ops.h"

namespace nmt {

EncoderLayer::EncoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg)
    : pre_(cfg.pre_norm()),
      dropout_(cfg.dropout),
      attn_(store, name + "/self_attn", cfg.d_model, cfg.heads, cfg.d_k, cfg.d_v,
            cfg.attention_dropout, /*self_attention=*/true),
      ffn_(store, name + "/ffn", cfg.d_model, cfg.d_ff, cfg.relu_dropout, cfg.ffn_activation()),
      ln1_(store, name + "/ln1", cfg.d_model, cfg.layer_norm_eps),
      ln2_(store, name + "/ln2", cfg.d_model, cfg.layer_norm_eps) {}

void EncoderLayer::forward(const Tensor& x, int64_t B, int64_t S, const Tensor& mask,
                           EncoderLayerActs& a, bool training, uint64_t seed) const {
  const float p = training ? dropout_ : 0.f;
  NormStats* s1 = training ? &a.ln1 : nullptr;
  NormStats* s2 = training ? &a.ln2 : nullptr;
  // Each residual and the norm after it: one op when translating; training
  // keeps the sums (forward_sum).
  if (pre_) {
    // r1 = x + drop(attn(ln1(x))); r2 = r1 + drop(ffn(ln2(r1)))
    ln1_.forward(x, a.n1, s1);
    attn_.forward(a.n1, nullptr, B, S, S, &mask, a.attn, a.a, training, mix_seed(seed, 1));
    ops::dropout_(a.a, p, mix_seed(seed, 2));
    ln2_.forward_sum(x, a.a, &a.r1, a.h1, s2);
    ffn_.forward(a.h1, a.ffn_hidden, ffn_pre(a, training), a.f, training, mix_seed(seed, 3));
    ops::dropout_(a.f, p, mix_seed(seed, 4));
    ops::add(a.r1, a.f, a.r2);
  } else {
    // h1 = ln1(x + drop(attn(x))); h2 = ln2(h1 + drop(ffn(h1)))
    attn_.forward(x, nullptr, B, S, S, &mask, a.attn, a.a, training, mix_seed(seed, 1));
    ops::dropout_(a.a, p, mix_seed(seed, 2));
    ln1_.forward_sum(x, a.a, training ? &a.r1 : nullptr, a.h1, s1);
    ffn_.forward(a.h1, a.ffn_hidden, ffn_pre(a, training), a.f, training, mix_seed(seed, 3));
    ops::dropout_(a.f, p, mix_seed(seed, 4));
    ln2_.forward_sum(a.h1, a.f, training ? &a.r2 : nullptr, a.h2, s2);
  }
}

void EncoderLayer::backward(const Tensor& x, int64_t B, int64_t S, const EncoderLayerActs& a,
                            const Tensor& dy, LayerGrads& s, Tensor& dx, Grads& g,
                            uint64_t seed) const {
  // Dropout's backward pass: the same mask on a copy of the gradient.
  auto undrop = [&](Tensor& dst, const Tensor& src, uint64_t site) {
    ops::copy(src, dst);
    ops::dropout_(dst, dropout_, mix_seed(seed, site));
  };
  if (pre_) {
    undrop(s.g1, dy, 4);
    ffn_.backward(a.h1, a.ffn_hidden, ffn_pre(a, true), s.g1, s.dhidden, s.g2, g,
                  mix_seed(seed, 3));
    ln2_.backward(a.r1, s.g2, a.ln2, s.g3, g);  // g3 = d r1 via the ffn branch
    ops::add_(s.g3, dy);                        // + the residual
    undrop(s.g1, s.g3, 2);
    attn_.backward(a.n1, nullptr, B, S, S, a.attn, s.g1, s.attn, s.g2, nullptr, g,
                   mix_seed(seed, 1));
    ln1_.backward(x, s.g2, a.ln1, dx, g);
    ops::add_(dx, s.g3);
  } else {
    ln2_.backward(a.r2, dy, a.ln2, s.g1, g);  // g1 = d r2
    undrop(s.g2, s.g1, 4);
    ffn_.backward(a.h1, a.ffn_hidden, ffn_pre(a, true), s.g2, s.dhidden, s.g3, g,
                  mix_seed(seed, 3));
    ops::add_(s.g3, s.g1);                      // d h1
    ln1_.backward(a.r1, s.g3, a.ln1, s.g1, g);  // g1 = d r1
    undrop(s.g2, s.g1, 2);
    attn_.backward(x, nullptr, B, S, S, a.attn, s.g2, s.attn, dx, nullptr, g, mix_seed(seed, 1));
    ops::add_(dx, s.g1);
  }
}

Encoder::Encoder(ParamStore& store, const ModelConfig& cfg)
    : pre_(cfg.pre_norm()), final_(cfg.pre_norm() && cfg.final_norm) {
  layers_.reserve(cfg.encoder_layers);
  for (int i = 0; i < cfg.encoder_layers; ++i) {
    const int64_t begin = store.size();
    layers_.emplace_back(store, "encoder/layer_" + std::to_string(i), cfg);
    ranges_.push_back({begin, store.size()});
  }
  if (final_) final_ln_ = LayerNorm(store, "encoder/final_ln", cfg.d_model, cfg.layer_norm_eps);
}

void Encoder::forward(const Tensor& x, int64_t B, int64_t S, const Tensor& mask, EncoderActs& a,
                      bool training, uint64_t seed) const {
  const size_t sets = a.layers.size();
  if (sets < std::min<size_t>(layers_.size(), 2) || (training && sets < layers_.size()))
    throw Error("Encoder::forward: too few layer activations laid out");
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].forward(*in, B, S, mask, a.layers[i % sets], training, mix_seed(seed, 100 + i));
    in = &layers_[i].output(a.layers[i % sets]);
  }
  if (final_) final_ln_.forward(*in, a.final_out, training ? &a.final_ln : nullptr);
}

const Tensor& Encoder::output(const EncoderActs& a) const {
  return final_ ? a.final_out
                : layers_.back().output(a.layers[(layers_.size() - 1) % a.layers.size()]);
}

void Encoder::backward(const Tensor& x, int64_t B, int64_t S, const EncoderActs& a,
                       const Tensor& dy, LayerGrads& s, Tensor& ping, Tensor& pong, Tensor& dx,
                       Grads& g, uint64_t seed) const {
  const Tensor* grad = &dy;
  if (final_) {
    final_ln_.backward(layers_.back().output(a.layers.back()), dy, a.final_ln, ping, g);
    grad = &ping;
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor& in = i ? layers_[i - 1].output(a.layers[i - 1]) : x;
    Tensor& out = i ? (grad == &ping ? pong : ping) : dx;
    layers_[i].backward(in, B, S, a.layers[i], *grad, s, out, g, mix_seed(seed, 100 + i));
    g.ready(ranges_[i].first, ranges_[i].second);
    grad = &out;
  }
}

}  // namespace nmt
