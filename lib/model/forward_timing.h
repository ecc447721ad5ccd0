// A model's forward pass timed on a batch of random sentences, as `nmt
// summary` reports it: a warm-up pass (which builds the backend's
// primitives), then the mean of three.
#pragma once

#include <cstdint>

#include "model/transformer.h"

namespace nmt {

struct ForwardTiming {
  double seconds = 0;          // one pass
  double flops_per_token = 0;  // of the forward pass, per target token
  int64_t length = 0;          // source and target tokens per sentence, framing included
  int64_t target_tokens = 0;   // of the batch
};

// batch sentences of length - 1 random pieces each. A length past the
// model's positions is a UsageError about the option length.
ForwardTiming time_forward_pass(const Transformer& model, int batch, int length);

}  // namespace nmt
