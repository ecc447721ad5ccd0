#include "model/attention.h"

#include <cmath>
#include <cstring>

#include "core/cpu_kernels.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace nmt {

using cpu::MatRef;

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
                                 int64_t S, const AttnMask& mask, Tensor& y, bool training,
                                 uint64_t seed) {
  B_ = B, T_ = T, S_ = S, seed_ = seed;
  const int64_t Wk = H_ * dk_, Wv = H_ * dv_;
  const float *q, *k, *v;
  int64_t ldq, ldkv;
  if (self_) {
    qkv_.forward(xq, proj_q_);
    ldq = ldkv = 2 * Wk + Wv;
    q = proj_q_.data(), k = q + Wk, v = q + 2 * Wk;
  } else {
    q_.forward(xq, proj_q_);
    kv_.forward(*xkv, proj_kv_);
    ldq = Wk, ldkv = Wk + Wv;
    q = proj_q_.data(), k = proj_kv_.data(), v = k + Wk;
  }
  probs_.resize(Shape{B, H_, T, S});
  cpu::GemmAttr attr;
  attr.alpha = scale();
  cpu::gemm(cpu::heads(q, B, H_, T, dk_, ldq), cpu::heads_t(k, B, H_, S, dk_, ldkv),
            MatRef{probs_.data(), {B, H_, T, S}, {H_ * T * S, T * S, S, 1}}, attr);
  if (mask.data) cpu::add_mask(probs_.data(), {B, H_, T, S}, mask.data, mask.dims);
  cpu::softmax(probs_.data(), probs_.data(), B * H_ * T, S);
  const float* p = probs_.data();
  if (training && attn_dropout_ > 0.f) {
    probs_drop_.resize(probs_.shape());
    std::memcpy(probs_drop_.data(), probs_.data(), probs_.numel() * sizeof(float));
    cpu::dropout(probs_drop_.data(), probs_drop_.numel(), attn_dropout_, seed_);
    p = probs_drop_.data();
  }
  ctx_.resize(Shape{B * T, Wv});
  cpu::gemm(MatRef{p, {B, H_, T, S}, {H_ * T * S, T * S, S, 1}}, cpu::heads(v, B, H_, S, dv_, ldkv),
            cpu::heads(ctx_.data(), B, H_, T, dv_, Wv));
  out_.forward(ctx_, y);
}

void MultiHeadAttention::backward(const Tensor& xq, const Tensor* xkv, const Tensor& dy,
                                  Tensor& dxq, Tensor* dxkv) {
  const int64_t B = B_, T = T_, S = S_, H = H_;
  const int64_t Wk = H * dk_, Wv = H * dv_;
  const bool dropped = attn_dropout_ > 0.f && probs_drop_.numel() == probs_.numel();
  out_.backward(ctx_, dy, &dctx_);

  const float *q, *k, *v;
  float *dq, *dk, *dv;
  int64_t ldq, ldkv;
  if (self_) {
    ldq = ldkv = 2 * Wk + Wv;
    dproj_q_.resize(Shape{B * T, ldq});
    q = proj_q_.data(), k = q + Wk, v = q + 2 * Wk;
    dq = dproj_q_.data(), dk = dq + Wk, dv = dq + 2 * Wk;
  } else {
    ldq = Wk, ldkv = Wk + Wv;
    dproj_q_.resize(Shape{B * T, Wk});
    dproj_kv_.resize(Shape{B * S, ldkv});
    q = proj_q_.data(), k = proj_kv_.data(), v = k + Wk;
    dq = dproj_q_.data(), dk = dproj_kv_.data(), dv = dk + Wk;
  }
  const MatRef P{
      dropped ? probs_drop_.data() : probs_.data(), {B, H, T, S}, {H * T * S, T * S, S, 1}};
  const MatRef Pt{P.ptr, {B, H, S, T}, {H * T * S, T * S, 1, S}};

  // dV = P^T dctx ; dP = dctx V^T
  cpu::gemm(Pt, cpu::heads(dctx_.data(), B, H, T, dv_, Wv), cpu::heads(dv, B, H, S, dv_, ldkv));
  dprobs_.resize(probs_.shape());
  cpu::gemm(cpu::heads(dctx_.data(), B, H, T, dv_, Wv), cpu::heads_t(v, B, H, S, dv_, ldkv),
            MatRef{dprobs_.data(), {B, H, T, S}, {H * T * S, T * S, S, 1}});
  if (dropped) cpu::dropout_backward(dprobs_.data(), dprobs_.numel(), attn_dropout_, seed_);
  dscores_.resize(probs_.shape());
  cpu::softmax_backward(probs_.data(), dprobs_.data(), dscores_.data(), B * H * T, S);

  // dQ = scale * dS K ; dK = scale * dS^T Q
  cpu::GemmAttr sc;
  sc.alpha = scale();
  const MatRef dS{dscores_.data(), {B, H, T, S}, {H * T * S, T * S, S, 1}};
  const MatRef dSt{dscores_.data(), {B, H, S, T}, {H * T * S, T * S, 1, S}};
  cpu::gemm(dS, cpu::heads(k, B, H, S, dk_, ldkv), cpu::heads(dq, B, H, T, dk_, ldq), sc);
  cpu::gemm(dSt, cpu::heads(q, B, H, T, dk_, ldq), cpu::heads(dk, B, H, S, dk_, ldkv), sc);

  if (self_) {
    qkv_.backward(xq, dproj_q_, &dxq);
  } else {
    q_.backward(xq, dproj_q_, &dxq);
    kv_.backward(*xkv, dproj_kv_, dxkv, /*accumulate_dx=*/true);
  }
}

void MultiHeadAttention::project_kv(const Tensor& enc, Tensor& kv) const { kv_.forward(enc, kv); }

void MultiHeadAttention::step_self(const Tensor& x, KVCache& cache, AttnScratch& s,
                                   Tensor& y) const {
  const int64_t N = x.dim(0), Wk = H_ * dk_, Wv = H_ * dv_, ld = 2 * Wk + Wv;
  if (cache.len >= cache.capacity) throw Error("decoder cache is full");
  qkv_.forward(x, s.proj);
  // Append this position's key and value.
  const int64_t t = cache.len;
  for (int64_t n = 0; n < N; ++n) {
    const float* row = s.proj.data() + n * ld;
    std::memcpy(cache.k.data() + (n * cache.capacity + t) * Wk, row + Wk, Wk * sizeof(float));
    std::memcpy(cache.v.data() + (n * cache.capacity + t) * Wv, row + 2 * Wk, Wv * sizeof(float));
  }
  const int64_t L = ++cache.len, cap = cache.capacity;
  s.scores.resize(Shape{N, H_, 1, L});
  cpu::GemmAttr attr;
  attr.alpha = scale();
  cpu::gemm(MatRef{s.proj.data(), {N, H_, 1, dk_}, {ld, dk_, ld, 1}},
            MatRef{cache.k.data(), {N, H_, dk_, L}, {cap * Wk, dk_, 1, Wk}},
            MatRef{s.scores.data(), {N, H_, 1, L}, {H_ * L, L, L, 1}}, attr);
  cpu::softmax(s.scores.data(), s.scores.data(), N * H_, L);
  s.ctx.resize(Shape{N, Wv});
  cpu::gemm(MatRef{s.scores.data(), {N, H_, 1, L}, {H_ * L, L, L, 1}},
            MatRef{cache.v.data(), {N, H_, L, dv_}, {cap * Wv, dv_, Wv, 1}},
            MatRef{s.ctx.data(), {N, H_, 1, dv_}, {Wv, dv_, Wv, 1}});
  out_.forward(s.ctx, y);
}

void MultiHeadAttention::step_cross(const Tensor& x, const Tensor& kv, int64_t B, int64_t beam,
                                    int64_t S, const AttnMask& mask, AttnScratch& s,
                                    Tensor& y) const {
  // The beam hypotheses of one sentence are consecutive rows, so they act as
  // that sentence's query positions and share its keys and values unchanged.
  const int64_t Wk = H_ * dk_, Wv = H_ * dv_, ldkv = Wk + Wv;
  q_.forward(x, s.proj);
  s.scores.resize(Shape{B, H_, beam, S});
  cpu::GemmAttr attr;
  attr.alpha = scale();
  cpu::gemm(MatRef{s.proj.data(), {B, H_, beam, dk_}, {beam * Wk, dk_, Wk, 1}},
            cpu::heads_t(kv.data(), B, H_, S, dk_, ldkv),
            MatRef{s.scores.data(), {B, H_, beam, S}, {H_ * beam * S, beam * S, S, 1}}, attr);
  if (mask.data) cpu::add_mask(s.scores.data(), {B, H_, beam, S}, mask.data, mask.dims);
  cpu::softmax(s.scores.data(), s.scores.data(), B * H_ * beam, S);
  s.ctx.resize(Shape{B * beam, Wv});
  cpu::gemm(MatRef{s.scores.data(), {B, H_, beam, S}, {H_ * beam * S, beam * S, S, 1}},
            cpu::heads(kv.data() + Wk, B, H_, S, dv_, ldkv),
            MatRef{s.ctx.data(), {B, H_, beam, dv_}, {beam * Wv, dv_, Wv, 1}});
  out_.forward(s.ctx, y);
}

}  // namespace nmt
