// Ops on tensors: shape checks and device dispatch over the kernels, so that
// callers never name a backend. CPU tensors run on oneDNN, CUDA tensors on
// cuBLAS.
#pragma once

#include "core/tensor.h"

namespace nmt {

// c (M, N) = alpha * op(a) op(b) + beta * c, with op a transpose when asked.
// All three on the same device.
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            float alpha = 1.f, float beta = 0.f);

// A copy of t on another device.
Tensor to_device(const Tensor& t, Device d);

}  // namespace nmt
