// Element types, shared by tensors and by the backend seam's matrix
// descriptors (core/backend.h), which take no tensor type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

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

// A bf16 is the top half of a float's bits: widening is exact.
inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Rounded to nearest even; a NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

}  // namespace nmt
