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
#include <memory>
#include <string>

#include "core/tensor.h"

namespace nmt {

class PreparedWeight;  // core/backend.h

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
  // Empty once the store has dropped it: a weight that nothing but its
  // products reads, in a store prepared to translate (ParamStore::prepare).
  Tensor value;
  Tensor scales;
  const class ParamStore* store = nullptr;
  // A weight that products multiply by (ParamStore::multiplied): the
  // backend's prepared form, made by ParamStore::prepare.
  bool product = false;
  bool sparse_input = false;   // its products' inputs are mostly zeros
  bool products_only = false;  // nothing else reads its value
  std::shared_ptr<const PreparedWeight> prepared;

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
  // p is a weight matrix W (out, in) that products multiply by (a Linear
  // layer's, an output projection): prepare() hands it to the backend.
  // sparse_input: the products' inputs are mostly zeros (a ReLU's output);
  // products_only: nothing but those products reads its value (not an
  // output projection tied to an embedding or gathered for a shortlist).
  void multiplied(const Param* p, bool sparse_input, bool products_only);
  // Promises that the values never change again (a model loaded to
  // translate or score): each weight that products multiply by is prepared
  // by its backend, once, for products in `compute` (packed, converted,
  // quantised). drop_values: the values that nothing but those products
  // reads go (translation and scoring, not a command that writes the model
  // again), so that each matrix is held once.
  void prepare(ComputeType compute = ComputeType::F32, bool drop_values = false);
  bool prepared() const { return prepared_; }
  bool dropped_values() const { return dropped_values_; }
  // Bytes of the backend's prepared weights.
  int64_t prepared_bytes() const;
  // Their forms, counted: "36 f32 rows (nmt), 6 f32 sparse rows (nmt)".
  std::string prepared_forms() const;
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
  // Fresh zeroed buffers for the parameters `keep` selects, views bound
  // (int8: the quantisable ones in int8_ and scales_); the rest get none.
  void lay_out(bool int8, const std::function<bool(const Param&)>& keep);
  // Moves the values still read into buffers of their own; the rest go.
  void drop_product_only_values();

  std::deque<Param> params_;  // deque: stable addresses for layers' Param*
  int64_t total_ = 0;
  Tensor values_;
  Tensor int8_, scales_;  // S8 and F32, when the store holds int8
  Device device_;
  bool prepared_ = false, dropped_values_ = false;
  ComputeType compute_ = ComputeType::F32;
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
