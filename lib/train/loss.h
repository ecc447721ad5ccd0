// Label-smoothed cross-entropy (epsilon_ls = 0.1 in the paper): the target
// distribution puts 1 - eps on the reference token and eps spread uniformly
// over the vocabulary. Padding positions contribute nothing.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nmt {

struct LossStats {
  double loss = 0;     // label-smoothed, summed over tokens
  double nll = 0;      // plain negative log-likelihood, summed (for perplexity)
  int64_t tokens = 0;  // non-pad targets
};

// logits (N, V), targets (N) with pad_id ignored. When dlogits is given it
// receives d(loss * grad_scale)/dlogits; pass grad_scale = 1 / tokens to
// average over the batch.
LossStats label_smoothed_xent(const Tensor& logits, const int32_t* targets, float eps,
                              int32_t pad_id, Tensor* dlogits, float grad_scale);

}  // namespace nmt
