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
  // A weight matrix that int8 holds as s8 rows with a scale each (GEMM
  // weights and token tables; not position tables, which are added, not
  // multiplied).
  bool quantisable = false;
  // A view into ParamStore::values(); in a store that holds its weights in
  // int8 (ParamStore::holds_int8), a quantisable matrix is an S8 view with
  // one F32 scale per row in `scales` instead.
  Tensor value;
  Tensor scales;
  const class ParamStore* store = nullptr;

  // The row scales of an int8 matrix, else null (as the ops take them).
  const Tensor* int8_scales() const { return scales.empty() ? nullptr : &scales; }
};

class ParamStore {
 public:
  // The values live on `device`: files, initialisation and checkpoints go
  // through host staging, and only the backend touches them there.
  explicit ParamStore(Device device = Device::CPU);
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Declares a parameter; its view is bound by allocate(). Pointers stay
  // valid for the store's lifetime.
  // quantisable: a 2-D weight that int8 may hold as s8 rows.
  const Param* add(const std::string& name, Shape shape, Init init, float init_scale = 0.f,
                   bool quantisable = true);
  // Allocates the values and initialises them from the seed.
  void allocate(uint64_t seed);
  // Allocates them as zeros, to be loaded.
  void allocate_zeros();
  // Allocates a store for translation in int8: its quantisable matrices get
  // s8 values and a scale per row (zero), the rest f32 values (zero), so
  // that an int8 model is never held as floats. Nothing trains such a store.
  // On the CPU only (no other backend runs int8 products).
  void allocate_int8();
  // Turns an allocated f32 store into that form: each quantisable matrix
  // rounded per row (model/quantise.h's rounding) and its floats released.
  void hold_in_int8();
  bool holds_int8() const { return int8_.numel() > 0; }
  bool allocated() const { return values_.numel() > 0 || holds_int8(); }
  // Bytes of parameter memory held (values, int8 rows and their scales).
  int64_t bytes() const { return values_.bytes() + int8_.bytes() + scales_.bytes(); }

  const Param* find(const std::string& name) const;
  // A writable view of one parameter's values (loading, optimisers, tests);
  // the layers read p->value, which they cannot write.
  Tensor value(const Param* p) { return p->value.view(); }
  // The writable scales of a matrix that the store holds in int8.
  Tensor scales(const Param* p) { return p->scales.view(); }
  const std::deque<Param>& params() const { return params_; }
  // Elements of the f32 layout of every parameter, padding included (what
  // Grads, Adam and checkpoints hold).
  int64_t size() const { return total_; }
  // Promises that the values never change again (a model loaded to
  // translate or score): backends may then keep repacked copies of the
  // weights, converted to `compute`. constant_id() is 0 until then.
  // products_only: nothing will read the Linear layers' weights but their
  // products (translation and scoring, not a command that writes the model
  // again), so that the backend may keep them in its packed copy alone
  // (GemmAttr::b_packed_only).
  void freeze(ComputeType compute = ComputeType::F32, bool products_only = false) {
    frozen_ = true;
    compute_ = compute;
    products_only_ = products_only;
  }
  uint64_t constant_id() const { return frozen_ ? id_ : 0; }
  bool products_only() const { return frozen_ && products_only_; }
  // Training in another compute type (bf16: mixed precision) without
  // freezing: the products convert the weights per call.
  void set_compute_type(ComputeType compute) { compute_ = compute; }
  ComputeType compute_type() const { return compute_; }
  // Every parameter's floats in one buffer (size() elements), unless the
  // store holds int8: then only those of the parameters that are not.
  Tensor& values() { return values_; }
  const Tensor& values() const { return values_; }
  Device device() const { return device_; }

 private:
  // Binds the int8 layout: values_ for the f32 parameters, int8_ and
  // scales_ for the quantisable ones.
  void lay_out_int8();

  std::deque<Param> params_;  // deque: stable addresses for layers' Param*
  int64_t total_ = 0;
  Tensor values_;
  Tensor int8_, scales_;  // S8 and F32, when the store holds int8
  uint64_t id_;
  Device device_;
  bool frozen_ = false, products_only_ = false;
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
  explicit Grads(const ParamStore& store) : buffer_(Shape{store.size()}, store.device()) {}
  Tensor of(const Param* p) {
    return Tensor::view_of(buffer_.data() + p->offset, p->shape, buffer_.device());
  }
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
