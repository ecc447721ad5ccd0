// The counter-based hash behind every random choice in training: dropout
// masks, per-step and per-layer seeds. A pure function of (seed, counter),
// so a mask needs no storage (the backward pass regenerates it), does not
// depend on how a loop is split over threads, and is bit-identical on every
// device (the CUDA kernels call this same function).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace nmt {

// splitmix64 of a combination of the two.
NMT_KERNEL uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 32 random bits of dropout's element i: elements 2j and 2j+1 take the
// high and low halves of one hash, so a loop over pairs hashes once for two
// elements (the hash's 64-bit multiplies were most of dropout's time on the
// CPU).
NMT_KERNEL uint32_t dropout_bits(uint64_t pair_hash, uint64_t i) {
  return static_cast<uint32_t>(i & 1 ? pair_hash : pair_hash >> 32);
}

// Dropout of element i, given its pair's hash: 0 with probability p (bits
// below threshold = p 2^32), else x / (1 - p) (keep).
NMT_KERNEL float dropout_of(float x, uint64_t pair_hash, uint64_t i, uint32_t threshold,
                                        float keep) {
  return dropout_bits(pair_hash, i) < threshold ? 0.f : x * keep;
}

// Dropout of element i: 0 with probability p, else x / (1 - p).
NMT_KERNEL float dropout_value(float x, uint64_t seed, uint64_t i, uint32_t threshold,
                                           float keep) {
  return dropout_of(x, mix_seed(seed, i >> 1), i, threshold, keep);
}

}  // namespace nmt
