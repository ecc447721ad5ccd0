#include "model/quantise.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/backend.h"
#include "core/error.h"

namespace nmt {

bool quantised_in_int8(const Param& p) { return p.shape.ndim == 2; }

Int8Rows quantise_rows(const float* w, int64_t rows, int64_t cols) {
  Int8Rows q;
  q.values.resize(rows * cols);
  q.scales.resize(rows);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + r * cols;
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float s = amax > 0 ? amax / 127.f : 1.f;
    q.scales[r] = s;
    for (int64_t c = 0; c < cols; ++c)
      q.values[r * cols + c] = static_cast<int8_t>(std::nearbyint(x[c] / s));
  }
  return q;
}

void freeze_for_inference(ParamStore& store, ComputeType compute) {
  require_compute_type(store.values().device(), compute);
  if (compute == ComputeType::INT8) round_to_int8(store);
  store.freeze(compute);
}

void round_to_int8(ParamStore& store) {
  for (const Param& p : store.params()) {
    if (!quantised_in_int8(p)) continue;
    Tensor v = store.value(&p);
    const int64_t rows = p.shape[0], cols = p.shape[1];
    const Int8Rows q = quantise_rows(v.data(), rows, cols);
    float* x = v.data();
    for (int64_t i = 0; i < rows * cols; ++i) x[i] = q.values[i] * q.scales[i / cols];
  }
}

}  // namespace nmt
