#include "model/arena.h"

namespace nmt {

void Arena::lay_out(Device device, const std::function<void(Arena&)>& layout) {
  binding_ = false;
  used_ = 0;
  layout(*this);
  if (used_ > buffer_.numel() || buffer_.device() != device)
    buffer_.resize(Shape{used_}, device);  // grows by half again
  binding_ = true;
  used_ = 0;
  layout(*this);
}

void Arena::take(Tensor& t, Shape shape, DType dtype) {
  if (binding_) t = Tensor::view_of(buffer_.data() + used_, shape, dtype, buffer_.device());
  used_ += (shape.numel() + 15) / 16 * 16;
}

}  // namespace nmt
