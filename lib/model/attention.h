// Multi-head scaled dot-product attention, softmax(Q K^T / sqrt(d_k)) V,
// with all heads in one batched GEMM: projections stay in their (rows, H*d)
// layout and the GEMMs read them through head-split strides, so no head is
// looped over and nothing is transposed.
//
// Self-attention projects Q, K and V with one fused GEMM; encoder-decoder
// attention projects Q from the decoder and K, V (fused) from the encoder.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/layers.h"

namespace nmt {

// An additive mask (0 or a large negative), dense with dims that broadcast
// against the scores (B, H, T, S): {B,1,1,S} for source padding, {1,1,T,T}
// for the causal mask.
struct AttnMask {
  const float* data = nullptr;
  std::array<int64_t, 4> dims{};
};

// Decoder self-attention cache: keys and values of every position so far,
// (N, capacity, H*d), growing by one position per step.
struct KVCache {
  Tensor k, v;
  int64_t len = 0;
  int64_t capacity = 0;
};

// Temporaries for one incremental step, owned by the decoding state so that
// the model itself stays immutable and shareable.
struct AttnScratch {
  Tensor proj, scores, ctx;
};

class MultiHeadAttention {
 public:
  MultiHeadAttention() = default;
  MultiHeadAttention(ParamStore& store, const std::string& name, int64_t d_model, int64_t heads,
                     int64_t d_k, int64_t d_v, float attention_dropout, bool self_attention);

  // Full sequences. xq (B*T, D); xkv (B*S, D), ignored for self-attention.
  void forward(const Tensor& xq, const Tensor* xkv, int64_t B, int64_t T, int64_t S,
               const AttnMask& mask, Tensor& y, bool training, uint64_t seed);
  // dxq is assigned; dxkv (cross-attention only) is added to.
  void backward(const Tensor& xq, const Tensor* xkv, const Tensor& dy, Tensor& dxq, Tensor* dxkv);

  // Cross-attention K and V of the encoder output, once per source batch:
  // enc (B*S, D) -> kv (B*S, H*d_k + H*d_v).
  void project_kv(const Tensor& enc, Tensor& kv) const;
  // One decoder position for N = B*beam hypotheses.
  void step_self(const Tensor& x, KVCache& cache, AttnScratch& s, Tensor& y) const;
  void step_cross(const Tensor& x, const Tensor& kv, int64_t B, int64_t beam, int64_t S,
                  const AttnMask& mask, AttnScratch& s, Tensor& y) const;

  int64_t k_width() const { return H_ * dk_; }
  int64_t v_width() const { return H_ * dv_; }

 private:
  float scale() const;

  bool self_ = true;
  int64_t D_ = 0, H_ = 0, dk_ = 0, dv_ = 0;
  float attn_dropout_ = 0.f;
  Linear qkv_;     // self: (2*H*dk + H*dv, D)
  Linear q_, kv_;  // cross: (H*dk, D) and (H*dk + H*dv, D)
  Linear out_;     // (D, H*dv)

  // Saved for backward.
  int64_t B_ = 0, T_ = 0, S_ = 0;
  uint64_t seed_ = 0;
  Tensor proj_q_, proj_kv_;  // self: proj_q_ holds Q|K|V
  Tensor probs_;             // (B, H, T, S) softmax output
  Tensor probs_drop_;        // after attention dropout, when enabled
  Tensor ctx_;               // (B*T, H*dv)
  Tensor dctx_, dprobs_, dscores_, dproj_q_, dproj_kv_;
};

}  // namespace nmt
