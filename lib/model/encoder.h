// The encoder: N identical layers of self-attention and FFN, each sub-layer
// wrapped as LayerNorm(x + Dropout(Sublayer(x))) (post-LN, the paper), or
// x + Dropout(Sublayer(LayerNorm(x))) (pre-LN, with a final LayerNorm unless
// the config says final_norm false, as Marian's pre-norm models without
// --transformer-postprocess-top n have it).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/layers.h"

namespace nmt {

// What one layer's forward pass leaves for its backward pass: (B*S, D)
// activations, and the norm statistics when training.
struct EncoderLayerActs {
  AttnActs attn;
  Tensor ffn_hidden;                // (B*S, d_ff)
  Tensor ffn_pre;                   // (B*S, d_ff), training with an activation other than ReLU
  Tensor n1, a, r1, h1, f, r2, h2;  // n1: pre-LN only; h2: post-LN only
  NormStats ln1, ln2;
};

// The backward pass's scratch, shared by every layer (encoder and decoder)
// of a step.
struct LayerGrads {
  AttnGrads attn;
  Tensor dhidden;         // (rows, d_ff)
  Tensor g1, g2, g3, g4;  // (rows, D)
};

class EncoderLayer {
 public:
  EncoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg);
  // x (B*S, D) -> output(a). mask: source padding (B,1,1,S). Training:
  // dropout (seeded) and norm statistics; otherwise neither.
  void forward(const Tensor& x, int64_t B, int64_t S, const Tensor& mask, EncoderLayerActs& a,
               bool training, uint64_t seed) const;
  const Tensor& output(const EncoderLayerActs& a) const { return pre_ ? a.r2 : a.h2; }
  void backward(const Tensor& x, int64_t B, int64_t S, const EncoderLayerActs& a, const Tensor& dy,
                LayerGrads& s, Tensor& dx, Grads& g, uint64_t seed) const;

 private:
  Tensor* ffn_pre(EncoderLayerActs& a, bool training) const {
    return training && ffn_.keeps_pre() ? &a.ffn_pre : nullptr;
  }
  const Tensor* ffn_pre(const EncoderLayerActs& a, bool training) const {
    return training && ffn_.keeps_pre() ? &a.ffn_pre : nullptr;
  }

  bool pre_;
  float dropout_;
  MultiHeadAttention attn_;
  FeedForward ffn_;
  LayerNorm ln1_, ln2_;
};

struct EncoderActs {
  // One per layer for training (the backward pass reads them all); a pass
  // without one needs only two, which the layers take in turn, each reading
  // the other's output.
  std::vector<EncoderLayerActs> layers;
  Tensor final_out;  // pre-LN with final_norm only
  NormStats final_ln;
};

class Encoder {
 public:
  Encoder(ParamStore& store, const ModelConfig& cfg);
  void forward(const Tensor& x, int64_t B, int64_t S, const Tensor& mask, EncoderActs& a,
               bool training, uint64_t seed) const;
  const Tensor& output(const EncoderActs& a) const;
  // dy: gradient w.r.t. output(a); dx: w.r.t. the embeddings x. ping, pong:
  // (B*S, D) scratch.
  void backward(const Tensor& x, int64_t B, int64_t S, const EncoderActs& a, const Tensor& dy,
                LayerGrads& s, Tensor& ping, Tensor& pong, Tensor& dx, Grads& g,
                uint64_t seed) const;
  size_t depth() const { return layers_.size(); }
  bool pre_norm() const { return pre_; }
  bool final_norm() const { return final_; }

 private:
  std::vector<EncoderLayer> layers_;
  bool pre_;
  bool final_;          // pre-LN and the config's final_norm
  LayerNorm final_ln_;  // when final_
  // Each layer's parameters in the flat buffer, for Grads::ready().
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

}  // namespace nmt
