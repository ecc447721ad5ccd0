// Multi-head scaled dot-product attention, softmax(Q K^T / sqrt(d_k)) V,
// with all heads in one batched GEMM: projections stay in their (rows, H*d)
// layout and the GEMMs read them through head-split views, so no head is
// looped over and nothing is transposed.
//
// Self-attention projects Q, K and V with one fused GEMM; encoder-decoder
// attention projects Q from the decoder and K, V (fused) from the encoder.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/layers.h"

namespace nmt {

// What a forward pass over whole sequences leaves for the backward pass (a
// training step keeps these in its arena; inference reuses them as scratch).
struct AttnActs {
  Tensor proj_q;   // self: (B*T, 2*H*dk + H*dv) Q|K|V; cross: (B*T, H*dk)
  Tensor proj_kv;  // cross only: (B*S, H*dk + H*dv)
  // Whether the (B, H, T, S) weights are kept: for training's backward
  // pass, for attention maps, and under a causal mask, whose products are
  // GEMMs over them. It never selects arithmetic: inference over padding
  // masks always runs the fused loop (ops::attend), whose sums never see
  // the padding, so a sentence's result does not depend on how far its
  // batch is padded; kept weights are then computed beside it.
  bool keep_probs = true;
  Tensor probs;       // (B, H, T, S) after the softmax
  Tensor probs_drop;  // after attention dropout (empty without it)
  Tensor ctx;         // (B*T, H*dv)
};

// Scratch of the backward pass, shared by all layers of a step.
struct AttnGrads {
  Tensor dctx, dprobs, dscores, dproj_q, dproj_kv;
};

// Decoder self-attention cache: keys and values of every position so far,
// (capacity, R, H*d), growing by one position per step. Positions are the
// outer dimension: a batch's history is the dense prefix of its buffers,
// len * R rows, whatever its capacity and row count, so every batch of a
// file reuses the pages the last one touched. (Rows outer, each row's
// history began a capacity after the last row's, and batches of other row
// counts touched other pages: an int8 translation of test_2016_flickr took
// 49.5K page faults, against 46.2K position-major, and 140 MB against
// 132 MB resident.)
struct KVCache {
  Tensor k, v;
  int64_t len = 0;       // one past the last position any row wrote (what a reorder copies)
  int64_t capacity = 0;  // positions each row has room for
  int64_t rows() const { return k.ndim() == 3 ? k.dim(1) : 0; }  // R, the row stride
};

// Temporaries of one incremental step, owned by the decoding state.
struct AttnScratch {
  Tensor proj, scores, ctx;
};

class MultiHeadAttention {
 public:
  MultiHeadAttention() = default;
  MultiHeadAttention(ParamStore& store, const std::string& name, int64_t d_model, int64_t heads,
                     int64_t d_k, int64_t d_v, float attention_dropout, bool self_attention);

  // Whole sequences. xq (B*T, D); xkv (B*S, D), ignored for self-attention.
  // mask: (B,1,1,S) padding or (1,1,T,T) causal, or null. Attention dropout
  // (seeded) only when training.
  void forward(const Tensor& xq, const Tensor* xkv, int64_t B, int64_t T, int64_t S,
               const Tensor* mask, AttnActs& a, Tensor& y, bool training, uint64_t seed) const;
  // dxq is assigned; dxkv (cross-attention only) is added to.
  void backward(const Tensor& xq, const Tensor* xkv, int64_t B, int64_t T, int64_t S,
                const AttnActs& a, const Tensor& dy, AttnGrads& s, Tensor& dxq, Tensor* dxkv,
                Grads& g, uint64_t seed) const;

  // Cross-attention K and V of the encoder output, once per source batch:
  // enc (B*S, D) -> kv (B*S, H*dk + H*dv).
  void project_kv(const Tensor& enc, Tensor& kv) const;
  // One decoder position for N = B*beam hypotheses: row r's key and value
  // go to its position pos[r]. mask: null when every row is at one
  // position, else (N, L) hiding each row's positions after its own.
  void step_self(const Tensor& x, KVCache& cache, const std::vector<int32_t>& pos,
                 const Tensor* mask, AttnScratch& s, Tensor& y) const;
  void step_cross(const Tensor& x, const Tensor& kv, int64_t B, int64_t beam, int64_t S,
                  const Tensor& mask, AttnScratch& s, Tensor& y) const;

  int64_t k_width() const { return H_ * dk_; }
  int64_t v_width() const { return H_ * dv_; }
  int64_t num_heads() const { return H_; }
  bool has_dropout() const { return attn_dropout_ > 0.f; }

 private:
  float scale() const;

  bool self_ = true;
  int64_t D_ = 0, H_ = 0, dk_ = 0, dv_ = 0;
  float attn_dropout_ = 0.f;
  Linear qkv_;     // self: (2*H*dk + H*dv, D)
  Linear q_, kv_;  // cross: (H*dk, D) and (H*dk + H*dv, D)
  Linear out_;     // (D, H*dv)
};

}  // namespace nmt
