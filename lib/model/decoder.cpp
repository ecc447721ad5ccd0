#include "model/decoder.h"

#include <utility>

#include "core/elementwise.h"

namespace nmt {

namespace {
void copy_into(Tensor& dst, const Tensor& src) {
  dst.resize(src.shape());
  std::copy(src.data(), src.data() + src.numel(), dst.data());
}
}  // namespace

DecoderLayer::DecoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg)
    : pre_(cfg.pre_norm()),
      dropout_(cfg.dropout),
      self_(store, name + "/self_attn", cfg.d_model, cfg.heads, cfg.d_k, cfg.d_v,
            cfg.attention_dropout, true),
      cross_(store, name + "/cross_attn", cfg.d_model, cfg.heads, cfg.d_k, cfg.d_v,
             cfg.attention_dropout, false),
      ffn_(store, name + "/ffn", cfg.d_model, cfg.d_ff, cfg.relu_dropout),
      ln1_(store, name + "/ln1", cfg.d_model, cfg.layer_norm_eps),
      ln2_(store, name + "/ln2", cfg.d_model, cfg.layer_norm_eps),
      ln3_(store, name + "/ln3", cfg.d_model, cfg.layer_norm_eps) {}

void DecoderLayer::forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                           const AttnMask& causal, const AttnMask& src_mask, bool training,
                           uint64_t seed) {
  seed_ = seed;
  const int64_t n = x.numel();
  const float p = training ? dropout_ : 0.f;
  auto sub_residual = [&](const Tensor& in, Tensor& out_branch, Tensor& sum, int site) {
    cpu::dropout(out_branch.data(), n, p, cpu::mix_seed(seed, site));
    sum.resize(in.shape());
    cpu::add(in.data(), out_branch.data(), sum.data(), n);
  };
  if (pre_) {
    ln1_.forward(x, n1_, training);
    self_.forward(n1_, nullptr, B, T, T, causal, a_, training, cpu::mix_seed(seed, 1));
    sub_residual(x, a_, r1_, 2);
    ln2_.forward(r1_, h1_, training);
    cross_.forward(h1_, &enc, B, T, S, src_mask, c_, training, cpu::mix_seed(seed, 3));
    sub_residual(r1_, c_, r2_, 4);
    ln3_.forward(r2_, h2_, training);
    ffn_.forward(h2_, f_, training, cpu::mix_seed(seed, 5));
    sub_residual(r2_, f_, r3_, 6);
  } else {
    self_.forward(x, nullptr, B, T, T, causal, a_, training, cpu::mix_seed(seed, 1));
    sub_residual(x, a_, r1_, 2);
    ln1_.forward(r1_, h1_, training);
    cross_.forward(h1_, &enc, B, T, S, src_mask, c_, training, cpu::mix_seed(seed, 3));
    sub_residual(h1_, c_, r2_, 4);
    ln2_.forward(r2_, h2_, training);
    ffn_.forward(h2_, f_, training, cpu::mix_seed(seed, 5));
    sub_residual(h2_, f_, r3_, 6);
    ln3_.forward(r3_, h3_, training);
  }
}

void DecoderLayer::backward(const Tensor& x, const Tensor& enc, const Tensor& dy, Tensor& dx,
                            Tensor& denc) {
  const int64_t n = x.numel();
  auto undrop = [&](Tensor& dst, const Tensor& src, int site) {
    copy_into(dst, src);
    cpu::dropout_backward(dst.data(), n, dropout_, cpu::mix_seed(seed_, site));
  };
  if (pre_) {
    // y = r2 + drop(ffn(ln3(r2)))
    undrop(g1_, dy, 6);
    ffn_.backward(h2_, g1_, g2_);
    ln3_.backward(r2_, g2_, g3_);
    cpu::add_inplace(g3_.data(), dy.data(), n);  // g3 = d r2
    // r2 = r1 + drop(cross(ln2(r1)))
    undrop(g1_, g3_, 4);
    cross_.backward(h1_, &enc, g1_, g2_, &denc);
    ln2_.backward(r1_, g2_, g4_);
    cpu::add_inplace(g4_.data(), g3_.data(), n);  // g4 = d r1
    // r1 = x + drop(self(ln1(x)))
    undrop(g1_, g4_, 2);
    self_.backward(n1_, nullptr, g1_, g2_, nullptr);
    ln1_.backward(x, g2_, dx);
    cpu::add_inplace(dx.data(), g4_.data(), n);
  } else {
    ln3_.backward(r3_, dy, g3_);  // d r3
    undrop(g1_, g3_, 6);
    ffn_.backward(h2_, g1_, g2_);
    cpu::add_inplace(g3_.data(), g2_.data(), n);  // d h2
    ln2_.backward(r2_, g3_, g4_);                 // d r2
    undrop(g1_, g4_, 4);
    cross_.backward(h1_, &enc, g1_, g2_, &denc);
    cpu::add_inplace(g4_.data(), g2_.data(), n);  // d h1
    ln1_.backward(r1_, g4_, g3_);                 // d r1
    undrop(g1_, g3_, 2);
    self_.backward(x, nullptr, g1_, dx, nullptr);
    cpu::add_inplace(dx.data(), g3_.data(), n);
  }
}

void DecoderLayer::step(const Tensor& x, DecodeState& st, size_t layer, Tensor& y) const {
  const int64_t n = x.numel();
  AttnMask src{st.src_mask.data(), {st.B, 1, 1, st.S}};
  AttnScratch& s = st.scratch;
  if (pre_) {
    ln1_.infer(x, st.h1);
    self_.step_self(st.h1, st.self[layer], s, st.a);
    st.r.resize(x.shape());
    cpu::add(x.data(), st.a.data(), st.r.data(), n);  // r1
    ln2_.infer(st.r, st.h1);
    cross_.step_cross(st.h1, st.cross_kv[layer], st.B, st.beam, st.S, src, s, st.a);
    cpu::add_inplace(st.r.data(), st.a.data(), n);  // r2
    ln3_.infer(st.r, st.h1);
    ffn_.infer(st.h1, st.ffn_hidden, st.a);
    y.resize(x.shape());
    cpu::add(st.r.data(), st.a.data(), y.data(), n);
  } else {
    self_.step_self(x, st.self[layer], s, st.a);
    st.r.resize(x.shape());
    cpu::add(x.data(), st.a.data(), st.r.data(), n);
    ln1_.infer(st.r, st.h1);
    cross_.step_cross(st.h1, st.cross_kv[layer], st.B, st.beam, st.S, src, s, st.a);
    cpu::add(st.h1.data(), st.a.data(), st.r.data(), n);
    ln2_.infer(st.r, st.h2);
    ffn_.infer(st.h2, st.ffn_hidden, st.a);
    cpu::add(st.h2.data(), st.a.data(), st.r.data(), n);
    ln3_.infer(st.r, y);
  }
}

Decoder::Decoder(ParamStore& store, const ModelConfig& cfg) : pre_(cfg.pre_norm()) {
  layers_.reserve(cfg.decoder_layers);
  for (int i = 0; i < cfg.decoder_layers; ++i)
    layers_.emplace_back(store, "decoder/layer_" + std::to_string(i), cfg);
  if (pre_) final_ln_ = LayerNorm(store, "decoder/final_ln", cfg.d_model, cfg.layer_norm_eps);
}

void Decoder::forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
                      const AttnMask& causal, const AttnMask& src_mask, bool training,
                      uint64_t seed) {
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].forward(*in, enc, B, T, S, causal, src_mask, training, cpu::mix_seed(seed, 200 + i));
    in = &layers_[i].output();
  }
  if (pre_) final_ln_.forward(*in, final_, training);
}

const Tensor& Decoder::output() const { return pre_ ? final_ : layers_.back().output(); }

void Decoder::backward(const Tensor& x, const Tensor& enc, const Tensor& dy, Tensor& dx,
                       Tensor& denc) {
  const Tensor* g = &dy;
  if (pre_) {
    final_ln_.backward(layers_.back().output(), dy, g_a_);
    g = &g_a_;
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor& in = i ? layers_[i - 1].output() : x;
    Tensor& out = i ? (g == &g_a_ ? g_b_ : g_a_) : dx;
    layers_[i].backward(in, enc, *g, out, denc);
    g = &out;
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
  // After the loop `in` holds the result.
  if (pre_) {
    final_ln_.infer(*in, *out);
    std::swap(in, out);
  }
  if (in != &y) {
    y.resize(in->shape());
    std::copy(in->data(), in->data() + in->numel(), y.data());
  }
}

}  // namespace nmt
