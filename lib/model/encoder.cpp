#include "model/encoder.h"

#include "core/elementwise.h"

namespace nmt {

EncoderLayer::EncoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg)
    : pre_(cfg.pre_norm()),
      dropout_(cfg.dropout),
      attn_(store, name + "/self_attn", cfg.d_model, cfg.heads, cfg.d_k, cfg.d_v,
            cfg.attention_dropout, /*self_attention=*/true),
      ffn_(store, name + "/ffn", cfg.d_model, cfg.d_ff, cfg.relu_dropout),
      ln1_(store, name + "/ln1", cfg.d_model, cfg.layer_norm_eps),
      ln2_(store, name + "/ln2", cfg.d_model, cfg.layer_norm_eps) {}

void EncoderLayer::forward(const Tensor& x, int64_t B, int64_t S, const AttnMask& mask,
                           bool training, uint64_t seed) {
  seed_ = seed;
  const int64_t n = x.numel();
  const float p = training ? dropout_ : 0.f;
  if (pre_) {
    ln1_.forward(x, n1_, training);
    attn_.forward(n1_, nullptr, B, S, S, mask, a_, training, cpu::mix_seed(seed, 1));
    cpu::dropout(a_.data(), n, p, cpu::mix_seed(seed, 2));
    r1_.resize(x.shape());
    cpu::add(x.data(), a_.data(), r1_.data(), n);
    ln2_.forward(r1_, h1_, training);
    ffn_.forward(h1_, f_, training, cpu::mix_seed(seed, 3));
    cpu::dropout(f_.data(), n, p, cpu::mix_seed(seed, 4));
    r2_.resize(x.shape());
    cpu::add(r1_.data(), f_.data(), r2_.data(), n);
  } else {
    attn_.forward(x, nullptr, B, S, S, mask, a_, training, cpu::mix_seed(seed, 1));
    cpu::dropout(a_.data(), n, p, cpu::mix_seed(seed, 2));
    r1_.resize(x.shape());
    cpu::add(x.data(), a_.data(), r1_.data(), n);
    ln1_.forward(r1_, h1_, training);
    ffn_.forward(h1_, f_, training, cpu::mix_seed(seed, 3));
    cpu::dropout(f_.data(), n, p, cpu::mix_seed(seed, 4));
    r2_.resize(x.shape());
    cpu::add(h1_.data(), f_.data(), r2_.data(), n);
    ln2_.forward(r2_, h2_, training);
  }
}

void EncoderLayer::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t n = x.numel();
  if (pre_) {
    // y = r1 + drop(ffn(ln2(r1))), r1 = x + drop(attn(ln1(x)))
    g1_.resize(dy.shape());
    std::copy(dy.data(), dy.data() + n, g1_.data());
    cpu::dropout_backward(g1_.data(), n, dropout_, cpu::mix_seed(seed_, 4));
    ffn_.backward(h1_, g1_, g2_);                // g2 = d ln2 out
    ln2_.backward(r1_, g2_, g3_);                // g3 = d r1 via ffn branch
    cpu::add_inplace(g3_.data(), dy.data(), n);  // + residual
    g1_.resize(dy.shape());
    std::copy(g3_.data(), g3_.data() + n, g1_.data());
    cpu::dropout_backward(g1_.data(), n, dropout_, cpu::mix_seed(seed_, 2));
    attn_.backward(n1_, nullptr, g1_, g2_, nullptr);  // g2 = d n1
    ln1_.backward(x, g2_, dx);
    cpu::add_inplace(dx.data(), g3_.data(), n);
  } else {
    // y = ln2(h1 + drop(ffn(h1))), h1 = ln1(x + drop(attn(x)))
    ln2_.backward(r2_, dy, g1_);  // g1 = d r2
    g2_.resize(dy.shape());
    std::copy(g1_.data(), g1_.data() + n, g2_.data());
    cpu::dropout_backward(g2_.data(), n, dropout_, cpu::mix_seed(seed_, 4));
    ffn_.backward(h1_, g2_, g3_);  // g3 = d h1 via ffn
    cpu::add_inplace(g3_.data(), g1_.data(), n);
    ln1_.backward(r1_, g3_, g1_);  // g1 = d r1
    g2_.resize(dy.shape());
    std::copy(g1_.data(), g1_.data() + n, g2_.data());
    cpu::dropout_backward(g2_.data(), n, dropout_, cpu::mix_seed(seed_, 2));
    attn_.backward(x, nullptr, g2_, dx, nullptr);
    cpu::add_inplace(dx.data(), g1_.data(), n);
  }
}

Encoder::Encoder(ParamStore& store, const ModelConfig& cfg) : pre_(cfg.pre_norm()) {
  layers_.reserve(cfg.encoder_layers);
  for (int i = 0; i < cfg.encoder_layers; ++i)
    layers_.emplace_back(store, "encoder/layer_" + std::to_string(i), cfg);
  if (pre_) final_ln_ = LayerNorm(store, "encoder/final_ln", cfg.d_model, cfg.layer_norm_eps);
}

void Encoder::forward(const Tensor& x, int64_t B, int64_t S, const AttnMask& mask, bool training,
                      uint64_t seed) {
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].forward(*in, B, S, mask, training, cpu::mix_seed(seed, 100 + i));
    in = &layers_[i].output();
  }
  if (pre_) final_ln_.forward(*in, final_, training);
}

const Tensor& Encoder::output() const { return pre_ ? final_ : layers_.back().output(); }

void Encoder::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const Tensor* g = &dy;
  if (pre_) {
    final_ln_.backward(layers_.back().output(), dy, g_a_);
    g = &g_a_;
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor& in = i ? layers_[i - 1].output() : x;
    Tensor& out = i ? (g == &g_a_ ? g_b_ : g_a_) : dx;
    layers_[i].backward(in, *g, out);
    g = &out;
  }
}

}  // namespace nmt
