#include "model/params.h"

#include <atomic>
#include <cmath>
#include <random>

#include "core/backend.h"
#include "core/error.h"

namespace nmt {

namespace {
std::atomic<uint64_t> next_store_id{1};
}  // namespace

ParamStore::ParamStore() : id_(next_store_id++) {}

ParamStore::~ParamStore() {
  if (frozen_ && values_.numel()) backend(values_.device()).forget_constants(id_);
}

ConstantOwner& ConstantOwner::operator=(ConstantOwner&& o) noexcept {
  if (this != &o) {
    forget();
    id_ = o.id_, device_ = o.device_;
    o.id_ = 0;
  }
  return *this;
}

uint64_t ConstantOwner::renew(Device device) {
  forget();
  device_ = device;
  return id_ = next_store_id++;
}

void ConstantOwner::forget() noexcept {
  if (id_ == 0) return;
  try {
    backend(device_).forget_constants(id_);
  } catch (...) {  // a destructor's: the copies are dropped with the process
  }
  id_ = 0;
}

const Param* ParamStore::add(const std::string& name, Shape shape, Init init, float init_scale) {
  if (values_.numel()) throw Error("parameter " + name + " declared after allocation");
  if (find(name)) throw Error("duplicate parameter name " + name);
  Param p;
  p.name = name;
  p.shape = shape;
  p.init = init;
  p.init_scale = init_scale;
  p.store = this;
  // Keep every parameter 64-byte aligned inside the flat buffer.
  p.offset = total_;
  total_ += (shape.numel() + 15) / 16 * 16;
  params_.push_back(std::move(p));
  return &params_.back();
}

const Param* ParamStore::find(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

void ParamStore::allocate(uint64_t seed) {
  values_ = Tensor(Shape{total_});
  std::mt19937_64 rng(seed);
  for (auto& p : params_) {
    p.value = Tensor::view_of(values_.data() + p.offset, p.shape);
    float* v = p.value.data();
    const int64_t n = p.shape.numel();
    switch (p.init) {
      case Init::Zeros:
        break;
      case Init::Ones:
        for (int64_t i = 0; i < n; ++i) v[i] = 1.f;
        break;
      case Init::XavierUniform: {
        const double fan_out = p.shape[0], fan_in = p.shape[1];
        const double a = std::sqrt(6.0 / (fan_in + fan_out));
        std::uniform_real_distribution<float> d(-a, a);
        for (int64_t i = 0; i < n; ++i) v[i] = d(rng);
        break;
      }
      case Init::Normal: {
        std::normal_distribution<float> d(0.f, p.init_scale);
        for (int64_t i = 0; i < n; ++i) v[i] = d(rng);
        break;
      }
    }
  }
}

}  // namespace nmt
