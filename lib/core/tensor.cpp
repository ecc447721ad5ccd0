#include "core/tensor.h"

#include <cstring>
#include <sstream>

#include "core/error.h"

namespace nmt {

Shape::Shape(std::initializer_list<int64_t> d) {
  if (d.size() > kMaxDims) throw Error("tensor rank above 4 is not supported");
  for (int64_t v : d) dims[ndim++] = v;
}

int64_t Shape::numel() const {
  if (ndim == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream s;
  s << '(';
  for (int i = 0; i < ndim; ++i) s << (i ? ", " : "") << dims[i];
  s << ')';
  return s.str();
}

Tensor::Tensor(Shape shape, Device device) : device_(device), owned_(true) {
  resize(shape);
  zero();
}

Tensor::~Tensor() { release(); }

Tensor::Tensor(Tensor&& o) noexcept
    : data_(o.data_),
      shape_(o.shape_),
      device_(o.device_),
      owned_(o.owned_),
      capacity_(o.capacity_) {
  o.data_ = nullptr;
  o.owned_ = false;
  o.capacity_ = 0;
  o.shape_ = Shape();
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    shape_ = o.shape_;
    device_ = o.device_;
    owned_ = o.owned_;
    capacity_ = o.capacity_;
    o.data_ = nullptr;
    o.owned_ = false;
    o.capacity_ = 0;
    o.shape_ = Shape();
  }
  return *this;
}

void Tensor::release() {
  if (owned_ && data_) device_free(device_, data_);
  data_ = nullptr;
  capacity_ = 0;
}

Tensor Tensor::view_of(float* data, Shape shape, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.device_ = device;
  t.owned_ = false;
  return t;
}

void Tensor::resize(Shape shape) {
  const int64_t n = shape.numel();
  if (!owned_ && data_ == nullptr && capacity_ == 0) owned_ = true;  // default-constructed
  if (!owned_) {
    if (n > shape_.numel()) throw Error("cannot grow a tensor view");
    shape_ = shape;
    return;
  }
  if (n > capacity_) {
    release();
    // Grow by half again so that slowly growing shapes settle quickly.
    const int64_t cap = n + n / 2;
    data_ = static_cast<float*>(device_alloc(device_, cap * sizeof(float)));
    capacity_ = cap;
  }
  shape_ = shape;
}

void Tensor::zero() {
  if (numel() == 0) return;
  if (device_ == Device::CPU) {
    std::memset(data_, 0, numel() * sizeof(float));
  } else {
    Tensor host(shape_);
    device_copy(device_, data_, Device::CPU, host.data(), numel() * sizeof(float));
  }
}

Tensor Tensor::view(Shape shape) const {
  if (shape.numel() != numel())
    throw Error("view " + shape.str() + " does not match tensor " + shape_.str());
  return view_of(data_, shape, device_);
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (begin < 0 || end > dim(0) || begin > end) throw Error("row range out of bounds");
  Shape s = shape_;
  s.dims[0] = end - begin;
  const int64_t row = dim(0) ? numel() / dim(0) : 0;
  return view_of(data_ + begin * row, s, device_);
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  if (t.shape() != expected)
    throw Error(std::string(what) + ": expected shape " + expected.str() + ", got " +
                t.shape().str());
}

}  // namespace nmt
