// All parameters of a model live in one flat buffer, with hierarchical names
// ("encoder/layer_3/self_attn/qkv/weight") and views into it. Zeroing
// gradients, clipping, Adam, checkpoints and averaging are then one loop or
// one read over a buffer. Gradients live apart, in a Grads buffer of the same
// layout that training owns: the weights a translator reads are never
// written by a forward or backward pass.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

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
  const class ParamStore* store = nullptr;
};

class ParamStore {
 public:
  ParamStore();
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Declares a parameter; its view is bound by allocate(). Pointers stay
  // valid for the store's lifetime.
  const Param* add(const std::string& name, Shape shape, Init init, float init_scale = 0.f);
  // Allocates the values and initialises them from the seed.
  void allocate(uint64_t seed);

  const Param* find(const std::string& name) const;
  // A writable view of one parameter's values (loading, optimisers, tests);
  // the layers read p->value, which they cannot write.
  Tensor value(const Param* p) { return Tensor::view_of(values_.data() + p->offset, p->shape); }
  const std::deque<Param>& params() const { return params_; }
  int64_t size() const { return total_; }  // elements, padding included
  // Promises that the values never change again (a model loaded to
  // translate or score): backends may then keep repacked copies of the
  // weights, converted to `compute`. constant_id() is 0 until then.
  void freeze(ComputeType compute = ComputeType::F32) {
    frozen_ = true;
    compute_ = compute;
  }
  uint64_t constant_id() const { return frozen_ ? id_ : 0; }
  // Training in another compute type (bf16: mixed precision) without
  // freezing: the products convert the weights per call.
  void set_compute_type(ComputeType compute) { compute_ = compute; }
  ComputeType compute_type() const { return compute_; }
  Tensor& values() { return values_; }
  const Tensor& values() const { return values_; }

 private:
  std::deque<Param> params_;  // deque: stable addresses for layers' Param*
  int64_t total_ = 0;
  Tensor values_;
  uint64_t id_;
  bool frozen_ = false;
  ComputeType compute_ = ComputeType::F32;
};

// The owner of constants that live shorter than a model (a batch's rows of
// the output projection, see DecodeState::vocab), in the same id space as
// ParamStore's: renew() drops what the backend keeps for the previous id and
// takes a new one, so a buffer refilled for the next batch is never served
// from a stale packed copy; the destructor drops them too. A copy owns
// nothing until it renews.
class ConstantOwner {
 public:
  ConstantOwner() = default;
  ~ConstantOwner() { forget(); }
  ConstantOwner(const ConstantOwner&) {}
  ConstantOwner& operator=(const ConstantOwner&) {
    forget();
    return *this;
  }
  ConstantOwner(ConstantOwner&& o) noexcept : id_(o.id_), device_(o.device_) { o.id_ = 0; }
  ConstantOwner& operator=(ConstantOwner&& o) noexcept;
  uint64_t renew(Device device);
  uint64_t id() const { return id_; }

 private:
  void forget() noexcept;
  uint64_t id_ = 0;
  Device device_ = Device::CPU;
};

// Gradients of every parameter of a store, in one buffer with its layout.
// Layers accumulate into them (see layers.h for the convention). A backward
// pass announces each layer's range of the buffer once that layer is done,
// so that a distributed run can start summing it across processes while the
// layers below are still being computed.
class Grads {
 public:
  explicit Grads(const ParamStore& store) : buffer_(Shape{store.size()}) {}
  Tensor of(const Param* p) { return Tensor::view_of(buffer_.data() + p->offset, p->shape); }
  Tensor& buffer() { return buffer_; }
  void zero() { buffer_.zero(); }

  // Elements [begin, end) of the buffer hold their final values for this
  // backward pass.
  void ready(int64_t begin, int64_t end) {
    if (on_ready_) on_ready_(begin, end);
  }
  void on_ready(std::function<void(int64_t, int64_t)> f) { on_ready_ = std::move(f); }

 private:
  Tensor buffer_;
  std::function<void(int64_t, int64_t)> on_ready_;
};

}  // namespace nmt
