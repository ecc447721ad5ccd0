// A weight as the CPU backend multiplies by it (Backend::prepare_weight):
// the packed or quantised copy that weights_pack.cpp makes once, when the
// model is loaded (or a search gathers its shortlist's rows), and that
// weights_gemm.cpp's products read. The form is numerics()'s choice for the
// compute type and the shape, made at preparation, never at a product.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "core/backend.h"
#include "cpu/primitive_cache.h"

namespace nmt::cpu {

enum class WeightForm : uint8_t {
  f32_rows,     // f32 for rows_gemm (BA16a16b)
  sparse_rows,  // f32 rows (K, N) for sparse_rows_product: inputs mostly zero
  s8_rows,      // s8 pairs for rows_gemm_s8 (BA16b2a)
  onednn,       // oneDNN matmul primitives, in the layouts they prefer
};

// One packed copy: its oneDNN layout and its bytes.
struct PackedCopy {
  dnnl::memory::desc md;
  uint64_t layout = 0;  // a hash of md, part of the primitives' keys
  std::shared_ptr<void> data;
  size_t bytes = 0, capacity = 0;  // capacity: of data, which may be larger (reused)
};

class CpuWeight final : public PreparedWeight {
 public:
  int64_t bytes() const override;
  bool reads_source() const override { return false; }
  std::string form() const override;

  WeightForm how = WeightForm::f32_rows;
  ComputeType compute = ComputeType::F32;
  int64_t K = 0, N = 0;
  // One copy; for oneDNN one per layout its primitives want, which may
  // differ by row count: piece_copy[rows] indexes copies for every row count
  // of a piece (the cut's, see for_each_piece).
  std::vector<PackedCopy> copies;
  std::array<uint8_t, 257> piece_copy{};
  Cut cut{256, 32, 4};
  std::vector<float> scales;  // int8: one per column (output channel)
};

// The pieces' row cuts (for_each_piece): (256, 32, 4) by default, at most
// 88 counts, multiples of 4 because beam search's rows come in multiples of
// the beam; (256, 16, 16) for int8 on AMX, which multiplies tiles of 16
// rows, so a tail costs a tile's pass anyway: at most 31 counts, each a
// primitive to create (README.md, "Weights prepared once, at load").
constexpr Cut kDefaultCut{256, 32, 4}, kAmxCut{256, 16, 16};

// The oneDNN matmul for `rows` rows of activations (row strides lda, ldc)
// against weights of layout `weights` (format_tag::any to ask), in w's
// compute type, with a bias or not. int8 multiplies the bare product by a
// runtime per-column scale post-op (oneDNN 2.6 runs runtime output scales
// only on its slow generic kernel).
dnnl::matmul::primitive_desc matmul_for(int64_t rows, int64_t K, int64_t N, int64_t lda,
                                        int64_t ldc, ComputeType ct,
                                        const dnnl::memory::desc& weights, bool bias,
                                        Activation act);
dnnl::memory::data_type weight_type(ComputeType ct);

std::shared_ptr<PreparedWeight> prepare_weight(const WeightSource& w,
                                               std::shared_ptr<PreparedWeight> reuse);

}  // namespace nmt::cpu
