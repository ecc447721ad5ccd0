// One buffer for all of a step's activations (llm.c's ActivationTensors):
// the tensors a forward pass saves for its backward pass, and the backward
// pass's scratch, are views into it, laid out anew for each batch's shape.
// The buffer only grows, so once the largest batch has been seen a training
// step allocates nothing.
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace nmt {

class Arena {
 public:
  // Calls layout(*this) once to measure and once to bind: inside it, each
  // take() gives a tensor its view (64-byte aligned) on `device`.
  void lay_out(Device device, const std::function<void(Arena&)>& layout);
  void take(Tensor& t, Shape shape, DType dtype = DType::F32);  // 4-byte dtypes
  int64_t bytes() const { return buffer_.numel() * 4; }

 private:
  Tensor buffer_;  // f32 elements
  int64_t used_ = 0;
  bool binding_ = false;
};

}  // namespace nmt
