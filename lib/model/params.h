// All parameters of a model live in one flat buffer, with hierarchical names
// ("encoder/layer_3/self_attn/qkv/weight") and views into it. Zeroing
// gradients, clipping, Adam, checkpoints and averaging are then one loop or
// one read over the buffer.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nmt {

enum class Init { Zeros, Ones, XavierUniform, Normal };

struct Param {
  std::string name;
  Shape shape;
  Init init = Init::Zeros;
  float init_scale = 0.f;  // stddev for Normal
  int64_t offset = 0;      // in elements, within the flat buffers
  Tensor value;            // view into ParamStore::values()
  Tensor grad;             // view into ParamStore::grads(), once enabled
};

class ParamStore {
 public:
  // Declares a parameter; its views are bound by allocate(). Pointers stay
  // valid for the store's lifetime.
  Param* add(const std::string& name, Shape shape, Init init, float init_scale = 0.f);
  // Allocates the values (and initialises them from the seed).
  void allocate(uint64_t seed);
  // Allocates and binds the gradient buffer (training only).
  void enable_grads();
  void zero_grads();

  Param* find(const std::string& name);
  const std::deque<Param>& params() const { return params_; }
  std::deque<Param>& params() { return params_; }
  int64_t size() const { return total_; }
  Tensor& values() { return values_; }
  Tensor& grads() { return grads_; }

 private:
  std::deque<Param> params_;  // deque: stable addresses for layers' Param*
  int64_t total_ = 0;
  Tensor values_;
  Tensor grads_;
};

}  // namespace nmt
