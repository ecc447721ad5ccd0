#include "core/tensor.h"

#include <sstream>

#include "core/backend.h"
#include "core/error.h"

namespace nmt {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    case DType::S8:
      return "s8";
    case DType::I32:
      return "i32";
    case DType::F64:
      return "f64";
    case DType::I64:
      return "i64";
  }
  return "?";
}

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

Tensor::Tensor(Shape shape, Device device, DType dtype)
    : dtype_(dtype), device_(device), owned_(true) {
  set_shape(shape);
  const int64_t bytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype_));
  if (bytes > 0) {
    data_ = backend(device_).alloc_zeroed(static_cast<size_t>(bytes));
    capacity_ = bytes;
  }
}

Tensor::~Tensor() { release(); }

Tensor::Tensor(Tensor&& o) noexcept
    : data_(o.data_),
      shape_(o.shape_),
      strides_(o.strides_),
      dtype_(o.dtype_),
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
    strides_ = o.strides_;
    dtype_ = o.dtype_;
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
  if (owned_ && data_) backend(device_).free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

void Tensor::set_shape(const Shape& s) {
  shape_ = s;
  int64_t stride = 1;
  for (int i = s.ndim - 1; i >= 0; --i) {
    strides_[i] = stride;
    stride *= s.dims[i];
  }
}

Tensor Tensor::view_of(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.data_ = data;
  t.dtype_ = dtype;
  t.device_ = device;
  t.owned_ = false;
  t.set_shape(shape);
  t.capacity_ = shape.numel() * static_cast<int64_t>(dtype_size(dtype));
  return t;
}

void Tensor::grow(Shape shape) {
  const int64_t bytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype_));
  if (bytes > capacity_) throw Error("a tensor cannot grow beyond its capacity and keep its contents");
  set_shape(shape);
}

void Tensor::resize(Shape shape) {
  if (!owned_ && data_ == nullptr && capacity_ == 0) owned_ = true;  // default-constructed
  const int64_t bytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype_));
  if (!owned_) {
    // A view may take any shape that fits the memory it was given.
    if (bytes > capacity_) throw Error("cannot grow a tensor view beyond its memory");
    set_shape(shape);
    return;
  }
  if (bytes > capacity_) {
    // Grow by half again so that slowly growing shapes settle quickly; a
    // first allocation takes what it asks for (a model's parameters are
    // never resized, and slack at the end of a block that takes huge pages
    // could round it up by a huge page).
    const int64_t cap = data_ ? bytes + bytes / 2 : bytes;
    void* old = data_;
    data_ = nullptr, capacity_ = 0;  // as released, should the allocation throw
    data_ = old ? backend(device_).regrow(old, static_cast<size_t>(cap))
                : backend(device_).alloc(static_cast<size_t>(cap));
    capacity_ = cap;
  }
  set_shape(shape);
}

void Tensor::resize(Shape shape, Device device) {
  if (device != device_) {
    if (!owned_ && (data_ || capacity_)) throw Error("cannot move a tensor view to another device");
    release();
    device_ = device;
    owned_ = true;
  }
  resize(shape);
}

void Tensor::zero() {
  if (numel() == 0) return;
  if (!contiguous()) throw Error("zero() of a strided view");
  backend(device_).zero(data_, bytes());
}

bool Tensor::contiguous() const {
  int64_t stride = 1;
  for (int i = shape_.ndim - 1; i >= 0; --i) {
    if (shape_.dims[i] != 1 && strides_[i] != stride) return false;
    stride *= shape_.dims[i];
  }
  return true;
}

float* Tensor::data() {
  if (dtype_ != DType::F32)
    throw Error(std::string("f32 access to a ") + dtype_name(dtype_) + " tensor");
  return static_cast<float*>(data_);
}

const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

Tensor Tensor::view(Shape shape) const {
  if (shape.numel() != numel())
    throw Error("view " + shape.str() + " does not match tensor " + shape_.str());
  if (!contiguous()) throw Error("view of a strided tensor");
  return view_of(data_, shape, dtype_, device_);
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (begin < 0 || end > dim(0) || begin > end) throw Error("row range out of bounds");
  Shape s = shape_;
  s.dims[0] = end - begin;
  Tensor t = view_of(static_cast<char*>(data_) + begin * strides_[0] * dtype_size(dtype_), s,
                     dtype_, device_);
  t.strides_ = strides_;
  return t;
}

Tensor Tensor::strided(Shape shape, Strides strides, int64_t offset) const {
  Tensor t =
      view_of(static_cast<char*>(data_) + offset * dtype_size(dtype_), shape, dtype_, device_);
  t.strides_ = strides;
  return t;
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  if (t.shape() != expected)
    throw Error(std::string(what) + ": expected shape " + expected.str() + ", got " +
                t.shape().str());
}

}  // namespace nmt
