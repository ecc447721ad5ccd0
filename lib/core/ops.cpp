#include "core/ops.h"

#include "core/cpu_kernels.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace nmt {

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
            float beta) {
  if (a.ndim() != 2 || b.ndim() != 2) throw Error("matmul: expected 2-D tensors");
  const int64_t M = trans_a ? a.dim(1) : a.dim(0), K = trans_a ? a.dim(0) : a.dim(1);
  const int64_t Kb = trans_b ? b.dim(1) : b.dim(0), N = trans_b ? b.dim(0) : b.dim(1);
  if (K != Kb)
    throw Error("matmul: inner dimensions " + std::to_string(K) + " and " + std::to_string(Kb) +
                " differ");
  if (a.device() != b.device() || a.device() != c.device())
    throw Error("matmul: operands on different devices");
  if (beta != 0.f && beta != 1.f) throw Error("matmul: beta must be 0 or 1");
  if (beta == 0.f) c.resize(Shape{M, N});
  check_shape(c, Shape{M, N}, "matmul output");
  if (a.device() == Device::CUDA) {
    cuda::gemm(a.data(), trans_a, b.data(), trans_b, c.data(), M, N, K, alpha, beta);
    return;
  }
  cpu::GemmAttr attr;
  attr.alpha = alpha;
  attr.accumulate = beta == 1.f;
  const cpu::MatRef A = trans_a ? cpu::mat_t(a.data(), K, M, M) : cpu::mat(a.data(), M, K, K);
  const cpu::MatRef B = trans_b ? cpu::mat_t(b.data(), N, K, K) : cpu::mat(b.data(), K, N, N);
  cpu::gemm(A, B, cpu::mat(c.data(), M, N, N), attr);
}

Tensor to_device(const Tensor& t, Device d) {
  Tensor out(t.shape(), d);
  device_copy(d, out.data(), t.device(), t.data(), t.numel() * sizeof(float));
  return out;
}

}  // namespace nmt
