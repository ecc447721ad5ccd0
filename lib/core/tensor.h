// The one tensor type: a dtype, up to 4 dimensions with element strides, on
// a device. A tensor either owns 64-byte aligned storage (and resizing
// reuses its capacity, so buffers sized once are never reallocated in a hot
// loop) or views memory owned elsewhere (a named slice of the flat parameter
// buffer, a row range of an activation, a slice of an arena).
//
// Owned tensors are contiguous. Strided views exist for one purpose: the
// batched GEMMs of attention read Q, K and V as (B, H, T, d) views of their
// (B*T, H*d) projections, so no head is ever copied or transposed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace nmt {

// Fixed-capacity shape, so that describing a tensor never allocates.
struct Shape {
  static constexpr int kMaxDims = 4;
  int ndim = 0;
  std::array<int64_t, kMaxDims> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  int64_t operator[](int i) const { return dims[i < 0 ? ndim + i : i]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;
};

using Strides = std::array<int64_t, Shape::kMaxDims>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::CPU, DType dtype = DType::F32);
  ~Tensor();
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // A non-owning, contiguous tensor over memory that outlives it.
  static Tensor view_of(void* data, Shape shape, DType dtype = DType::F32,
                        Device device = Device::CPU);
  static Tensor view_of(const float* data, Shape shape, Device device = Device::CPU) {
    return view_of(const_cast<float*>(data), shape, DType::F32, device);
  }

  // Changes the shape; reallocates only when the capacity is too small.
  // Contents are unspecified afterwards. A view takes any shape that fits
  // the memory it was made over, and cannot grow beyond it.
  void resize(Shape shape);
  // The same on `device`: an owned tensor on another device (an output the
  // ops tier places beside its inputs, a member first sized for a model on
  // a GPU) drops its memory there and allocates here; a view cannot move.
  void resize(Shape shape, Device device);
  // Changes the shape within the capacity, keeping the contents (a buffer
  // sized ahead for rows that join it later); throws if it does not fit.
  void grow(Shape shape);
  void zero();

  // A non-owning view of the same memory with another shape of equal size.
  Tensor view(Shape shape) const;
  Tensor view() const { return view(shape_); }
  // Rows [begin, end) along the first dimension.
  Tensor rows(int64_t begin, int64_t end) const;
  // A strided view starting `offset` elements in.
  Tensor strided(Shape shape, Strides strides, int64_t offset = 0) const;

  // Element access for f32 tensors (throws for another dtype).
  float* data();
  const float* data() const;
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data_);
  }
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  bool contiguous() const;
  int64_t dim(int i) const { return shape_[i]; }
  int ndim() const { return shape_.ndim; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool empty() const { return numel() == 0; }

 private:
  void release();
  void set_shape(const Shape& s);

  void* data_ = nullptr;
  Shape shape_;
  Strides strides_{};
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  bool owned_ = false;
  int64_t capacity_ = 0;  // bytes: allocated when owned, viewed otherwise
};

// Throws nmt::Error naming `what` unless t has exactly this shape.
void check_shape(const Tensor& t, const Shape& expected, const char* what);

}  // namespace nmt
