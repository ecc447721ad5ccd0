// int8 weights: every weight matrix (Param::quantisable: Linear weights and
// the token tables, one of which is also the output projection) stored as s8 rows, each with the
// scale max|row| / 127. A row is one output channel of its product, as
// oneDNN's per-channel output scales and CTranslate2's int8 have it.
//
// `nmt quantize` writes these; `--compute-type int8` on an f32 model rounds
// its weights the same way at load, so both give the same translations.
#pragma once

#include <cstdint>
#include <vector>

#include "model/params.h"

namespace nmt {

struct Int8Rows {
  std::vector<int8_t> values;  // (rows, cols)
  std::vector<float> scales;   // (rows)
};

// Rows of w (rows, cols) into q and one scale per row.
void quantise_rows(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales);
Int8Rows quantise_rows(const float* w, int64_t rows, int64_t cols);

// Makes a model's weights constant for translation or scoring in `compute`:
// int8 holds its matrices as s8 rows from then on (rounding them first, if
// the store holds floats). Throws InputError if the CPU cannot run `compute`.
// drop_values: see ParamStore::prepare.
void prepare_for_inference(ParamStore& store, ComputeType compute, bool drop_values = false);

}  // namespace nmt
