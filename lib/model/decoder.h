// The decoder: N identical layers of masked self-attention, encoder-decoder
// attention and FFN, with the same residual + LayerNorm wrapping as the
// encoder. Training runs whole target sequences under the causal mask;
// translation runs one position at a time against a DecodeState.
#pragma once

#include <string>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/layers.h"

namespace nmt {

// Per-request decoding state, kept apart from the immutable model: the
// self-attention caches, the encoder output's cross-attention K/V (computed
// once per source batch), the source mask and the step's scratch buffers.
struct DecodeState {
  int64_t B = 0;                 // live sentences
  int64_t beam = 1;              // hypotheses per sentence (rows B*beam)
  int64_t S = 0;                 // source length (padded)
  int64_t step = 0;              // target positions decoded so far
  Tensor src_mask;               // (B, S) additive
  std::vector<Tensor> cross_kv;  // per layer (B*S, H*dk + H*dv)
  std::vector<KVCache> self;     // per layer
  AttnScratch scratch;
  Tensor x, y, a, r, h1, h2, ffn_hidden, logits;
  Tensor spare;  // gather target, swapped in to avoid allocation

  int64_t rows() const { return B * beam; }
};

class DecoderLayer {
 public:
  DecoderLayer(ParamStore& store, const std::string& name, const ModelConfig& cfg);
  // x (B*T, D), enc (B*S, D). Masks: causal {1,1,T,T}, source {B,1,1,S}.
  void forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
               const AttnMask& causal, const AttnMask& src_mask, bool training, uint64_t seed);
  // dx assigned; denc added to.
  void backward(const Tensor& x, const Tensor& enc, const Tensor& dy, Tensor& dx, Tensor& denc);
  const Tensor& output() const { return pre_ ? r3_ : h3_; }

  // One position: x (N, D) -> y (N, D), updating the layer's cache.
  void step(const Tensor& x, DecodeState& st, size_t layer, Tensor& y) const;
  const MultiHeadAttention& cross_attention() const { return cross_; }

 private:
  bool pre_;
  float dropout_;
  uint64_t seed_ = 0;
  MultiHeadAttention self_, cross_;
  FeedForward ffn_;
  LayerNorm ln1_, ln2_, ln3_;
  Tensor n1_, a_, r1_, h1_, c_, r2_, h2_, f_, r3_, h3_;
  Tensor g1_, g2_, g3_, g4_;
};

class Decoder {
 public:
  Decoder(ParamStore& store, const ModelConfig& cfg);
  void forward(const Tensor& x, const Tensor& enc, int64_t B, int64_t T, int64_t S,
               const AttnMask& causal, const AttnMask& src_mask, bool training, uint64_t seed);
  const Tensor& output() const;
  void backward(const Tensor& x, const Tensor& enc, const Tensor& dy, Tensor& dx, Tensor& denc);

  // x is used as scratch and clobbered.
  void step(Tensor& x, DecodeState& st, Tensor& y) const;
  const std::vector<DecoderLayer>& layers() const { return layers_; }

 private:
  std::vector<DecoderLayer> layers_;
  bool pre_;
  LayerNorm final_ln_;
  Tensor final_, g_a_, g_b_;
};

}  // namespace nmt
