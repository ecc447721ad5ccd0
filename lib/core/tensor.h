// The one tensor type: f32, contiguous, up to 4 dimensions, on a device.
// A tensor either owns 64-byte aligned storage (and resizing reuses its
// capacity, so buffers sized once are never reallocated in a hot loop) or
// views memory owned elsewhere (a named slice of the flat parameter buffer,
// a row range of an activation).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/device.h"

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

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::CPU);
  ~Tensor();
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // A non-owning tensor over memory that outlives it.
  static Tensor view_of(float* data, Shape shape, Device device = Device::CPU);

  // Changes the shape; reallocates only when the capacity is too small.
  // Contents are unspecified afterwards. Views cannot grow.
  void resize(Shape shape);
  void zero();

  // A non-owning view of the same memory with another shape of equal size.
  Tensor view(Shape shape) const;
  Tensor view() const { return view(shape_); }
  // Rows [begin, end) along the first dimension.
  Tensor rows(int64_t begin, int64_t end) const;

  float* data() { return data_; }
  const float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int ndim() const { return shape_.ndim; }
  int64_t numel() const { return shape_.numel(); }
  Device device() const { return device_; }
  bool owns() const { return owned_; }
  bool empty() const { return numel() == 0; }

 private:
  void release();

  float* data_ = nullptr;
  Shape shape_;
  Device device_ = Device::CPU;
  bool owned_ = false;
  int64_t capacity_ = 0;  // elements, when owned
};

// Throws nmt::Error naming `what` unless t has exactly this shape.
void check_shape(const Tensor& t, const Shape& expected, const char* what);

}  // namespace nmt
