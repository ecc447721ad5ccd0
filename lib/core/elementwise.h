// Element-wise CPU kernels that oneDNN has no primitive for, or where a plain
// OpenMP loop is as fast: residual adds, dropout, ReLU gradients, column sums.
#pragma once

#include <array>
#include <cstdint>

namespace nmt::cpu {

// dst = a + b
void add(const float* a, const float* b, float* dst, int64_t n);
// dst += src
void add_inplace(float* dst, const float* src, int64_t n);

// Dropout from a counter-based hash of (seed, index): the mask needs no
// storage (the backward pass regenerates it) and does not depend on how the
// loop is split over threads, so training is deterministic.
void dropout(float* x, int64_t n, float p, uint64_t seed);
inline void dropout_backward(float* dx, int64_t n, float p, uint64_t seed) {
  dropout(dx, n, p, seed);
}

// dx = dy where y > 0, else 0 (in place on dy).
void relu_backward(const float* y, float* dy, int64_t n);

// dst[j] += sum_i src[i, j] over a (rows, cols) matrix (bias gradients).
void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols);

// scores (B, H, T, S) += mask broadcast from mask_dims (a dim of 1
// broadcasts): {B,1,1,S} for source padding, {1,1,T,T} for causality.
void add_mask(float* scores, const std::array<int64_t, 4>& dims, const float* mask,
              const std::array<int64_t, 4>& mask_dims);

uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace nmt::cpu
