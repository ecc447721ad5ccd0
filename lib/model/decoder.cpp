#include "model/decoder.h"

#include <utility>

#include "core/rng.h"
#include "ops/ops.h"

namespace nmt {

DecoderLayer::DecoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg)
    : pre_(cfg.pre_norm()),
      dropout_(cfg.dropout),
      self_(store, name + "/self_attn", cfg.d_model, cfg.heads, cfg.d_k, cfg.d_v,
            cfg.attention_dropout, true),
      cross_(store, name + "/cross_attn", cfg.d_model, cfg.heads, cfg.d_k, cfg.d_v,
             cfg.attention_dropout, false),
      ffn_(store, name + "/ffn", cfg.d_model, cfg.d_ff, cfg.relu_dropout, cfg.ffn_activation()),
      ln1_(store, name + "/ln1", cfg.d_model, cfg.layer_norm_eps),
      ln2_(store, name + "/ln2", cfg.d_model, cfg.layer_norm_eps),
      ln3_(store, name + "/ln3", cfg.d_model, cfg.layer_norm_eps) {}

void DecoderLayer::self_attention(const Tensor& h, const DecoderPass& p,
                                  DecoderLayerActs& a) const {
  if (!p.st)
    return self_.forward(h, nullptr, p.B, p.T, p.T, p.causal, a.self_attn, a.a, p.training,
                         mix_seed(p.seed, 1));
  DecodeState& st = *p.st;
  const Tensor* mask = st.step.self_mask.numel() ? &st.step.self_mask : nullptr;
  self_.step_self(h, st.cache.self[p.layer], st.pos, mask, st.step.attn, a.a);
}

void DecoderLayer::cross_attention(const Tensor& h, const DecoderPass& p,
                                   DecoderLayerActs& a) const {
  if (!p.st)
    return cross_.forward(h, p.enc, p.B, p.T, p.S, p.src_mask, a.cross_attn, a.c, p.training,
                          mix_seed(p.seed, 3));
  DecodeState& st = *p.st;
  cross_.step_cross(h, st.cache.cross_kv[p.layer], st.B, st.beam, st.S, st.cache.src_mask,
                    st.step.attn, a.c);
}

void DecoderLayer::forward(const Tensor& x, const DecoderPass& p, DecoderLayerActs& a) const {
  const bool training = p.training;
  const float drop = training ? dropout_ : 0.f;
  // sum = in + dropout(branch) and out = ln(sum), in one op where nothing
  // needs the sum (post-norm translation): the numbers of add, then norm.
  auto residual_norm = [&](const LayerNorm& ln, const Tensor& in, Tensor& branch, Tensor* sum,
                           Tensor& out, NormStats* stats, uint64_t site) {
    ops::dropout_(branch, drop, mix_seed(p.seed, site));
    ln.forward_sum(in, branch, sum, out, stats);
  };
  NormStats* s1 = training ? &a.ln1 : nullptr;
  NormStats* s2 = training ? &a.ln2 : nullptr;
  NormStats* s3 = training ? &a.ln3 : nullptr;
  Tensor* ffn_units = ffn_pre(a, training);
  if (pre_) {
    ln1_.forward(x, a.n1, s1);
    self_attention(a.n1, p, a);
    residual_norm(ln2_, x, a.a, &a.r1, a.h1, s2, 2);
    cross_attention(a.h1, p, a);
    residual_norm(ln3_, a.r1, a.c, &a.r2, a.h2, s3, 4);
    ffn_.forward(a.h2, a.ffn_hidden, ffn_units, a.f, training, mix_seed(p.seed, 5));
    ops::dropout_(a.f, drop, mix_seed(p.seed, 6));
    ops::add(a.r2, a.f, a.r3);
  } else {
    self_attention(x, p, a);
    residual_norm(ln1_, x, a.a, training ? &a.r1 : nullptr, a.h1, s1, 2);
    cross_attention(a.h1, p, a);
    residual_norm(ln2_, a.h1, a.c, training ? &a.r2 : nullptr, a.h2, s2, 4);
    ffn_.forward(a.h2, a.ffn_hidden, ffn_units, a.f, training, mix_seed(p.seed, 5));
    residual_norm(ln3_, a.h2, a.f, training ? &a.r3 : nullptr, a.h3, s3, 6);
  }
}

void DecoderLayer::backward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                            const DecoderLayerActs& a, const Tensor& dy, LayerGrads& s, Tensor& dx,
                            Tensor& denc, Grads& g, uint64_t seed) const {
  auto undrop = [&](Tensor& dst, const Tensor& src, uint64_t site) {
    ops::copy(src, dst);
    ops::dropout_(dst, dropout_, mix_seed(seed, site));
  };
  if (pre_) {
    // y = r2 + drop(ffn(ln3(r2)))
    undrop(s.g1, dy, 6);
    ffn_.backward(a.h2, a.ffn_hidden, ffn_pre(a, true), s.g1, s.dhidden, s.g2, g,
                  mix_seed(seed, 5));
    ln3_.backward(a.r2, s.g2, a.ln3, s.g3, g);
    ops::add_(s.g3, dy);  // g3 = d r2
    // r2 = r1 + drop(cross(ln2(r1)))
    undrop(s.g1, s.g3, 4);
    cross_.backward(a.h1, &enc, B, T, S, a.cross_attn, s.g1, s.attn, s.g2, &denc, g,
                    mix_seed(seed, 3));
    ln2_.backward(a.r1, s.g2, a.ln2, s.g4, g);
    ops::add_(s.g4, s.g3);  // g4 = d r1
    // r1 = x + drop(self(ln1(x)))
    undrop(s.g1, s.g4, 2);
    self_.backward(a.n1, nullptr, B, T, T, a.self_attn, s.g1, s.attn, s.g2, nullptr, g,
                   mix_seed(seed, 1));
    ln1_.backward(x, s.g2, a.ln1, dx, g);
    ops::add_(dx, s.g4);
  } else {
    ln3_.backward(a.r3, dy, a.ln3, s.g3, g);  // d r3
    undrop(s.g1, s.g3, 6);
    ffn_.backward(a.h2, a.ffn_hidden, ffn_pre(a, true), s.g1, s.dhidden, s.g2, g,
                  mix_seed(seed, 5));
    ops::add_(s.g3, s.g2);                      // d h2
    ln2_.backward(a.r2, s.g3, a.ln2, s.g4, g);  // d r2
    undrop(s.g1, s.g4, 4);
    cross_.backward(a.h1, &enc, B, T, S, a.cross_attn, s.g1, s.attn, s.g2, &denc, g,
                    mix_seed(seed, 3));
    ops::add_(s.g4, s.g2);                      // d h1
    ln1_.backward(a.r1, s.g4, a.ln1, s.g3, g);  // d r1
    undrop(s.g1, s.g3, 2);
    self_.backward(x, nullptr, B, T, T, a.self_attn, s.g1, s.attn, dx, nullptr, g,
                   mix_seed(seed, 1));
    ops::add_(dx, s.g3);
  }
}

Decoder::Decoder(ParamStore& store, const ModelConfig& cfg)
    : pre_(cfg.pre_norm()), final_(cfg.pre_norm() && cfg.final_norm) {
  layers_.reserve(cfg.decoder_layers);
  for (int i = 0; i < cfg.decoder_layers; ++i) {
    const int64_t begin = store.size();
    layers_.emplace_back(store, "decoder/layer_" + std::to_string(i), cfg);
    ranges_.push_back({begin, store.size()});
  }
  if (final_) final_ln_ = LayerNorm(store, "decoder/final_ln", cfg.d_model, cfg.layer_norm_eps);
}

void Decoder::forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                      const Tensor& causal, const Tensor& src_mask, DecoderActs& a, bool training,
                      uint64_t seed) const {
  DecoderPass p;
  p.enc = &enc, p.B = B, p.T = T, p.S = S, p.causal = &causal, p.src_mask = &src_mask;
  p.training = training;
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    p.seed = mix_seed(seed, 200 + i);
    layers_[i].forward(*in, p, a.layers[i]);
    in = &layers_[i].output(a.layers[i]);
  }
  if (final_) final_ln_.forward(*in, a.final_out, training ? &a.final_ln : nullptr);
}

const Tensor& Decoder::output(const DecoderActs& a) const {
  return final_ ? a.final_out : layers_.back().output(a.layers.back());
}

void Decoder::backward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                       const DecoderActs& a, const Tensor& dy, LayerGrads& s, Tensor& ping,
                       Tensor& pong, Tensor& dx, Tensor& denc, Grads& g, uint64_t seed) const {
  const Tensor* grad = &dy;
  if (final_) {
    final_ln_.backward(layers_.back().output(a.layers.back()), dy, a.final_ln, ping, g);
    grad = &ping;
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor& in = i ? layers_[i - 1].output(a.layers[i - 1]) : x;
    Tensor& out = i ? (grad == &ping ? pong : ping) : dx;
    layers_[i].backward(in, enc, B, T, S, a.layers[i], *grad, s, out, denc, g,
                        mix_seed(seed, 200 + i));
    g.ready(ranges_[i].first, ranges_[i].second);
    grad = &out;
  }
}

const Tensor& Decoder::step(const Tensor& x, DecodeState& st, Tensor& y) const {
  DecoderPass p;
  p.st = &st;
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    p.layer = i;
    DecoderLayerActs& a = st.step.layer_acts[i % 2];
    layers_[i].forward(*in, p, a);
    in = &layers_[i].output(a);
  }
  if (!final_) return *in;  // the last layer's output, where it lies
  final_ln_.forward(*in, y);
  return y;
}

}  // namespace nmt
