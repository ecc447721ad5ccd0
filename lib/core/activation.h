// The feed-forward activations and their derivatives: one definition of the
// arithmetic for every backend (the CPU loops and the CUDA kernels include
// it), so a model computes the same function wherever it runs. A GEMM may
// also apply one as its epilogue (oneDNN's eltwise post-ops), which agrees
// with these to rounding.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace nmt {

// The paper's ReLU; swish (x * sigmoid(x): Marian's, OPUS-MT's); GELU with
// the exact erf and its tanh approximation (BERT-style models, CTranslate2).
enum class Activation { None, Relu, Swish, Gelu, GeluTanh };

NMT_KERNEL float activate(Activation a, float x) {
  switch (a) {
    case Activation::Relu:
      return x > 0.f ? x : 0.f;
    case Activation::Swish:
      return x / (1.f + expf(-x));
    case Activation::Gelu:
      return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case Activation::GeluTanh:
      return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case Activation::None:
      break;
  }
  return x;
}

// d activate(x) / dx, from the input x (ReLU's from its output works as
// well: both are 0 exactly where the unit was off).
NMT_KERNEL float activate_derivative(Activation a, float x) {
  switch (a) {
    case Activation::Relu:
      return x > 0.f ? 1.f : 0.f;
    case Activation::Swish: {
      const float s = 1.f / (1.f + expf(-x));
      return s + x * s * (1.f - s);
    }
    case Activation::Gelu:
      return 0.5f * (1.f + erff(x * 0.70710678118654752f)) +
             x * 0.3989422804014327f * expf(-0.5f * x * x);
    case Activation::GeluTanh: {
      const float k = 0.7978845608028654f, c = 0.044715f;
      const float t = tanhf(k * (x + c * x * x * x));
      return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k * (1.f + 3.f * c * x * x);
    }
    case Activation::None:
      break;
  }
  return 1.f;
}

}  // namespace nmt
