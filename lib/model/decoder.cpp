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

void DecoderLayer::forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                           const Tensor& causal, const Tensor& src_mask, DecoderLayerActs& a,
                           bool training, uint64_t seed) const {
  const float p = training ? dropout_ : 0.f;
  auto sub_residual = [&](const Tensor& in, Tensor& branch, Tensor& sum, uint64_t site) {
    ops::dropout_(branch, p, mix_seed(seed, site));
    ops::add(in, branch, sum);
  };
  NormStats* s1 = training ? &a.ln1 : nullptr;
  NormStats* s2 = training ? &a.ln2 : nullptr;
  NormStats* s3 = training ? &a.ln3 : nullptr;
  if (pre_) {
    ln1_.forward(x, a.n1, s1);
    self_.forward(a.n1, nullptr, B, T, T, &causal, a.self_attn, a.a, training, mix_seed(seed, 1));
    sub_residual(x, a.a, a.r1, 2);
    ln2_.forward(a.r1, a.h1, s2);
    cross_.forward(a.h1, &enc, B, T, S, &src_mask, a.cross_attn, a.c, training, mix_seed(seed, 3));
    sub_residual(a.r1, a.c, a.r2, 4);
    ln3_.forward(a.r2, a.h2, s3);
    ffn_.forward(a.h2, a.ffn_hidden, ffn_pre(a, training), a.f, training, mix_seed(seed, 5));
    sub_residual(a.r2, a.f, a.r3, 6);
  } else {
    self_.forward(x, nullptr, B, T, T, &causal, a.self_attn, a.a, training, mix_seed(seed, 1));
    sub_residual(x, a.a, a.r1, 2);
    ln1_.forward(a.r1, a.h1, s1);
    cross_.forward(a.h1, &enc, B, T, S, &src_mask, a.cross_attn, a.c, training, mix_seed(seed, 3));
    sub_residual(a.h1, a.c, a.r2, 4);
    ln2_.forward(a.r2, a.h2, s2);
    ffn_.forward(a.h2, a.ffn_hidden, ffn_pre(a, training), a.f, training, mix_seed(seed, 5));
    sub_residual(a.h2, a.f, a.r3, 6);
    ln3_.forward(a.r3, a.h3, s3);
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

void DecoderLayer::step(const Tensor& x, DecodeState& st, size_t layer, Tensor& y) const {
  AttnScratch& s = st.scratch;
  const Tensor* self_mask = st.self_mask.numel() ? &st.self_mask : nullptr;
  // Each residual and the norm after it in one op (forward_sum).
  if (pre_) {
    ln1_.forward(x, st.h1);
    self_.step_self(st.h1, st.self[layer], st.pos, self_mask, s, st.a);
    ln2_.forward_sum(x, st.a, &st.r, st.h1);  // r1 = x + a
    cross_.step_cross(st.h1, st.cross_kv[layer], st.B, st.beam, st.S, st.src_mask, s, st.a);
    ln3_.forward_sum(st.r, st.a, &st.r, st.h1);  // r2 = r1 + a
    ffn_.forward(st.h1, st.ffn_hidden, nullptr, st.a, false, 0);
    ops::add(st.r, st.a, y);
  } else {
    self_.step_self(x, st.self[layer], st.pos, self_mask, s, st.a);
    ln1_.forward_sum(x, st.a, nullptr, st.h1);
    cross_.step_cross(st.h1, st.cross_kv[layer], st.B, st.beam, st.S, st.src_mask, s, st.a);
    ln2_.forward_sum(st.h1, st.a, nullptr, st.h2);
    ffn_.forward(st.h2, st.ffn_hidden, nullptr, st.a, false, 0);
    ln3_.forward_sum(st.h2, st.a, nullptr, y);
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
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].forward(*in, enc, B, T, S, causal, src_mask, a.layers[i], training,
                       mix_seed(seed, 200 + i));
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

void Decoder::step(Tensor& x, DecodeState& st, Tensor& y) const {
  // Ping-pong between x and y: layer i reads `in` and writes `out`.
  Tensor* in = &x;
  Tensor* out = &y;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].step(*in, st, i, *out);
    std::swap(in, out);
  }
  if (final_) {
    final_ln_.forward(*in, *out);
    std::swap(in, out);
  }
  if (in != &y) ops::copy(*in, y);
}

}  // namespace nmt
