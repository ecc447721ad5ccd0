#include "model/quantise.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/backend.h"
#include "core/error.h"

namespace nmt {

void quantise_rows(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales) {
#pragma omp parallel for if (rows * cols > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + r * cols;
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float s = amax > 0 ? amax / 127.f : 1.f;
    scales[r] = s;
    for (int64_t c = 0; c < cols; ++c)
      q[r * cols + c] = static_cast<int8_t>(std::nearbyint(x[c] / s));
  }
}

Int8Rows quantise_rows(const float* w, int64_t rows, int64_t cols) {
  Int8Rows q;
  q.values.resize(rows * cols);
  q.scales.resize(rows);
  quantise_rows(w, rows, cols, q.values.data(), q.scales.data());
  return q;
}

void prepare_for_inference(ParamStore& store, ComputeType compute, bool drop_values) {
  require_compute_type(store.device(), compute);
  if (compute == ComputeType::INT8) store.hold_in_int8();
  store.prepare(compute, drop_values);
}

}  // namespace nmt
