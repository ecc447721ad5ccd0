// Greedy and beam search over the Transformer's incremental decoder.
//
// The encoder runs once per batch; each step feeds one token per live
// hypothesis and reuses the cached self-attention keys/values and the
// cross-attention K/V computed once per source batch. Finished sentences
// leave the batch. Scores use the GNMT length penalty the paper applied,
// lp(Y) = ((5 + |Y|) / 6)^alpha, or plain length normalisation.
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace nmt {

struct SearchOptions {
  int beam = 4;              // 1: greedy
  float alpha = 0.6f;        // length penalty exponent
  bool length_norm = false;  // score / |Y| instead of the GNMT penalty
  int n_best = 1;            // hypotheses returned per sentence (<= beam)
  float max_len_a = 1.f;     // max output length = a * source length + b
  int max_len_b = 50;
  int force_length = 0;  // >0: suppress </s> until exactly this many tokens (benchmarks)
};

// Throws InputError naming the option unless every value is in range (NaN
// never is): beam and n_best 1..1024, alpha 0..10, max_len_a 0..100,
// max_len_b 0..100000, force_length >= 0.
void validate(const SearchOptions& opts);

struct Hypothesis {
  std::vector<int32_t> tokens;  // without </s>
  double logprob = 0;           // sum of token log-probabilities, </s> included
  double score = 0;             // logprob / length penalty
};

// Translates one batch of id sequences (without </s>); returns, per input
// and in input order, up to n_best hypotheses sorted best first.
// `state` is reused across calls so that buffers are not reallocated.
std::vector<std::vector<Hypothesis>> search(const Transformer& model,
                                            const std::vector<std::vector<int32_t>>& src,
                                            const SearchOptions& opts, DecodeState& state);

double length_penalty(int64_t length, const SearchOptions& opts);

}  // namespace nmt
