// Element types, shared by tensors and by the backend seam's matrix
// descriptors (core/backend.h), which take no tensor type.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nmt {

// f32 is what the ops compute in; bf16 is also an operand type of the GPU's
// products (MatDesc::dtype); S8 holds int8 weights, I32 and I64 ids and
// indices, F64 a training step's totals.
enum class DType : uint8_t { F32, BF16, F16, S8, I32, I64, F64 };

// Inline: the CUDA module, which links no tensor code, sizes its operands by it.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::BF16:
    case DType::F16:
      return 2;
    case DType::S8:
      return 1;
    case DType::I64:
    case DType::F64:
      return 8;
    case DType::F32:
    case DType::I32:
      break;
  }
  return 4;
}
const char* dtype_name(DType t);

}  // namespace nmt
