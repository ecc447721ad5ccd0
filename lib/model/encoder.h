// The encoder: N identical layers of self-attention and FFN, each sub-layer
// wrapped as LayerNorm(x + Dropout(Sublayer(x))) (post-LN, the paper), or
// x + Dropout(Sublayer(LayerNorm(x))) (pre-LN, with a final LayerNorm).
#pragma once

#include <string>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/layers.h"

namespace nmt {

class EncoderLayer {
 public:
  EncoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg);
  // x (B*S, D) -> output() (B*S, D). mask: source padding {B,1,1,S}.
  void forward(const Tensor& x, int64_t B, int64_t S, const AttnMask& mask, bool training,
               uint64_t seed);
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  const Tensor& output() const { return pre_ ? r2_ : h2_; }

 private:
  bool pre_;
  float dropout_;
  uint64_t seed_ = 0;
  MultiHeadAttention attn_;
  FeedForward ffn_;
  LayerNorm ln1_, ln2_;
  Tensor n1_, a_, r1_, h1_, f_, r2_, h2_;  // (B*S, D) activations kept for backward
  Tensor g1_, g2_, g3_;                    // gradient scratch
};

class Encoder {
 public:
  Encoder(ParamStore& store, const ModelConfig& cfg);
  void forward(const Tensor& x, int64_t B, int64_t S, const AttnMask& mask, bool training,
               uint64_t seed);
  const Tensor& output() const;
  // dy: gradient w.r.t. output(); dx: w.r.t. the embeddings x.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);

 private:
  std::vector<EncoderLayer> layers_;
  bool pre_;
  LayerNorm final_ln_;  // pre-LN only
  Tensor final_, g_a_, g_b_;
};

}  // namespace nmt
