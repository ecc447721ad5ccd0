#include "model/attention.h"

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace nmt {

using ops::heads;
using ops::transposed;

MultiHeadAttention::MultiHeadAttention(ParamStore& store, const std::string& name, int64_t d_model,
                                       int64_t heads, int64_t d_k, int64_t d_v,
                                       float attention_dropout, bool self_attention)
    : self_(self_attention),
      D_(d_model),
      H_(heads),
      dk_(d_k),
      dv_(d_v),
      attn_dropout_(attention_dropout) {
  if (self_) {
    qkv_ = Linear(store, name + "/qkv", D_, 2 * H_ * dk_ + H_ * dv_);
  } else {
    q_ = Linear(store, name + "/q", D_, H_ * dk_);
    kv_ = Linear(store, name + "/kv", D_, H_ * dk_ + H_ * dv_);
  }
  out_ = Linear(store, name + "/out", H_ * dv_, D_);
}

float MultiHeadAttention::scale() const { return 1.f / std::sqrt(static_cast<float>(dk_)); }

void MultiHeadAttention::forward(const Tensor& xq, const Tensor* xkv, int64_t B, int64_t T,
                                 int64_t S, const Tensor* mask, AttnActs& a, Tensor& y,
                                 bool training, uint64_t seed) const {
  const int64_t Wk = H_ * dk_;
  Tensor q, k, v;  // (B, H, len, d) views of the projections
  if (self_) {
    qkv_.forward(xq, a.proj_q);
    q = heads(a.proj_q, B, T, H_, dk_, 0);
    k = heads(a.proj_q, B, T, H_, dk_, Wk);
    v = heads(a.proj_q, B, T, H_, dv_, 2 * Wk);
  } else {
    q_.forward(xq, a.proj_q);
    kv_.forward(*xkv, a.proj_kv);
    q = heads(a.proj_q, B, T, H_, dk_, 0);
    k = heads(a.proj_kv, B, S, H_, dk_, 0);
    v = heads(a.proj_kv, B, S, H_, dv_, Wk);
  }
  a.probs.resize(Shape{a.keep_probs ? B : 0, H_, T, S}, xq.device());
  if (a.keep_probs) {
    ops::bmm(q, transposed(k), a.probs, scale());
    ops::masked_softmax_(a.probs, mask);
  }
  if (!training && (!mask || mask->dim(2) == 1)) {
    // Inference over padding masks: the fused loop, whether or not the
    // weights are kept as well (attention maps), so that asking for them
    // changes no number.
    a.ctx.resize(Shape{B * T, H_ * dv_}, xq.device());
    Tensor ctx = heads(a.ctx, B, T, H_, dv_, 0);
    ops::attend(q, k, v, mask, scale(), ctx);
    out_.forward(a.ctx, y);
    return;
  }
  if (!a.keep_probs) throw Error("attention: training and causal masks keep their weights");
  const Tensor* p = &a.probs;
  if (training && attn_dropout_ > 0.f) {
    ops::copy(a.probs, a.probs_drop);
    ops::dropout_(a.probs_drop, attn_dropout_, seed);
    p = &a.probs_drop;
  }
  a.ctx.resize(Shape{B * T, H_ * dv_}, xq.device());
  Tensor ctx = heads(a.ctx, B, T, H_, dv_, 0);
  ops::bmm(*p, v, ctx);
  out_.forward(a.ctx, y);
}

void MultiHeadAttention::backward(const Tensor& xq, const Tensor* xkv, int64_t B, int64_t T,
                                  int64_t S, const AttnActs& a, const Tensor& dy, AttnGrads& s,
                                  Tensor& dxq, Tensor* dxkv, Grads& g, uint64_t seed) const {
  const int64_t Wk = H_ * dk_, Wv = H_ * dv_;
  const bool dropped = attn_dropout_ > 0.f && a.probs_drop.numel() == a.probs.numel();
  out_.backward(a.ctx, dy, &s.dctx, false, g);

  Tensor q, k, v, dq, dk, dv;
  if (self_) {
    s.dproj_q.resize(Shape{B * T, 2 * Wk + Wv}, dy.device());
    q = heads(a.proj_q, B, T, H_, dk_, 0), dq = heads(s.dproj_q, B, T, H_, dk_, 0);
    k = heads(a.proj_q, B, T, H_, dk_, Wk), dk = heads(s.dproj_q, B, T, H_, dk_, Wk);
    v = heads(a.proj_q, B, T, H_, dv_, 2 * Wk), dv = heads(s.dproj_q, B, T, H_, dv_, 2 * Wk);
  } else {
    s.dproj_q.resize(Shape{B * T, Wk}, dy.device());
    s.dproj_kv.resize(Shape{B * S, Wk + Wv}, dy.device());
    q = heads(a.proj_q, B, T, H_, dk_, 0), dq = heads(s.dproj_q, B, T, H_, dk_, 0);
    k = heads(a.proj_kv, B, S, H_, dk_, 0), dk = heads(s.dproj_kv, B, S, H_, dk_, 0);
    v = heads(a.proj_kv, B, S, H_, dv_, Wk), dv = heads(s.dproj_kv, B, S, H_, dv_, Wk);
  }
  const Tensor& P = dropped ? a.probs_drop : a.probs;
  const Tensor dctx = heads(s.dctx, B, T, H_, dv_, 0);
  // dV = P^T dctx ; dP = dctx V^T
  ops::bmm(transposed(P), dctx, dv);
  s.dprobs.resize(a.probs.shape(), dy.device());
  ops::bmm(dctx, transposed(v), s.dprobs);
  if (dropped) ops::dropout_(s.dprobs, attn_dropout_, seed);
  ops::softmax_backward(a.probs, s.dprobs, s.dscores);
  // dQ = scale dS K ; dK = scale dS^T Q
  ops::bmm(s.dscores, k, dq, scale());
  ops::bmm(transposed(s.dscores), q, dk, scale());

  if (self_) {
    qkv_.backward(xq, s.dproj_q, &dxq, false, g);
  } else {
    q_.backward(xq, s.dproj_q, &dxq, false, g);
    kv_.backward(*xkv, s.dproj_kv, dxkv, /*accumulate_dx=*/true, g);
  }
}

void MultiHeadAttention::project_kv(const Tensor& enc, Tensor& kv) const { kv_.forward(enc, kv); }

void MultiHeadAttention::step_self(const Tensor& x, KVCache& cache,
                                   const std::vector<int32_t>& pos, const Tensor* mask,
                                   AttnScratch& s, Tensor& y) const {
  const int64_t N = x.dim(0), Wk = H_ * dk_, Wv = H_ * dv_, ld = 2 * Wk + Wv;
  if (static_cast<int64_t>(pos.size()) != N) throw Error("decoder step: a position per row needed");
  const int64_t cap = cache.capacity, R = cache.rows();
  if (N > R) throw Error("decoder step: more rows than the cache holds");
  // Rows at several positions come with a mask as wide as the furthest one;
  // without one, every row is at pos[0].
  const int64_t L = mask ? mask->dim(1) : (N ? pos[0] + 1 : 1);
  if (mask && (mask->ndim() != 2 || mask->dim(0) != N))
    throw Error("decoder step: the mask is not (rows, length)");
  if (L > cap) throw Error("decoder cache is full");
  qkv_.forward(x, s.proj);
  // Append each row's key and value at its position: one copy per run of
  // rows at one position (a single run unless sentences joined).
  for (int64_t r0 = 0, r1 = 0; r0 < N; r0 = r1) {
    const int64_t t = pos[r0];
    if (t < 0 || t >= L) throw Error("decoder step: a row's position is outside its mask");
    for (r1 = r0 + 1; r1 < N && pos[r1] == t;) ++r1;
    const int64_t n = r1 - r0;
    Tensor k_new = cache.k.strided(Shape{n, Wk}, {Wk, 1, 0, 0}, (t * R + r0) * Wk);
    Tensor v_new = cache.v.strided(Shape{n, Wv}, {Wv, 1, 0, 0}, (t * R + r0) * Wv);
    ops::copy_rows(s.proj.strided(Shape{n, Wk}, {ld, 1, 0, 0}, r0 * ld + Wk), k_new);
    ops::copy_rows(s.proj.strided(Shape{n, Wv}, {ld, 1, 0, 0}, r0 * ld + 2 * Wk), v_new);
  }
  // Positions after a row's own hold another sentence's history or nothing:
  // the mask leaves them out of its sums (see Backend::attend).
  cache.len = L;
  const Tensor q = s.proj.strided(Shape{N, H_, 1, dk_}, {ld, dk_, ld, 1});
  const Tensor k = cache.k.strided(Shape{N, H_, L, dk_}, {Wk, dk_, R * Wk, 1});
  const Tensor v = cache.v.strided(Shape{N, H_, L, dv_}, {Wv, dv_, R * Wv, 1});
  s.ctx.resize(Shape{N, Wv}, x.device());
  Tensor ctx = s.ctx.strided(Shape{N, H_, 1, dv_}, {Wv, dv_, Wv, 1});
  ops::attend(q, k, v, mask, scale(), ctx);
  out_.forward(s.ctx, y);
}

void MultiHeadAttention::step_cross(const Tensor& x, const Tensor& kv, int64_t B, int64_t beam,
                                    int64_t S, const Tensor& mask, AttnScratch& s,
                                    Tensor& y) const {
  // The beam hypotheses of one sentence are consecutive rows, so they act as
  // that sentence's query positions and share its keys and values unchanged.
  const int64_t Wk = H_ * dk_, Wv = H_ * dv_;
  q_.forward(x, s.proj);
  const Tensor q = s.proj.strided(Shape{B, H_, beam, dk_}, {beam * Wk, dk_, Wk, 1});
  s.ctx.resize(Shape{B * beam, Wv}, x.device());
  Tensor ctx = s.ctx.strided(Shape{B, H_, beam, dv_}, {beam * Wv, dv_, Wv, 1});
  ops::attend(q, heads(kv, B, S, H_, dk_, 0), heads(kv, B, S, H_, dv_, Wk), &mask, scale(), ctx);
  out_.forward(s.ctx, y);
}

}  // namespace nmt
