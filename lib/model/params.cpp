#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "model/quantise.h"
#include "ops/ops.h"

namespace nmt {

namespace {
// No other backend runs int8 products, so no other device holds int8.
void int8_on_cpu_only(Device d) {
  if (d != Device::CPU)
    throw Error(std::string("int8 weights are held on the CPU only, not on ") + device_name(d));
}

}  // namespace

ParamStore::ParamStore(Device device) : device_(device) {}

ParamStore::~ParamStore() = default;

const Param* ParamStore::add(const std::string& name, Shape shape, Init init, float init_scale,
                             bool quantisable) {
  if (allocated()) throw Error("parameter " + name + " declared after allocation");
  if (find(name)) throw Error("duplicate parameter name " + name);
  Param p;
  p.name = name;
  p.shape = shape;
  p.init = init;
  p.init_scale = init_scale;
  p.quantisable = quantisable && shape.ndim == 2;
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

void ParamStore::allocate_zeros() {
  if (allocated()) throw Error("the parameters are allocated already");
  values_ = Tensor(Shape{total_}, device_);  // zeroed
  for (auto& p : params_) p.value = Tensor::view_of(values_.data() + p.offset, p.shape, device_);
}

void ParamStore::allocate(uint64_t seed) {
  allocate_zeros();
  // Drawn on the host, in one order whatever the device, so that a seed
  // gives the same model everywhere.
  std::vector<float> staging;
  float* base = values_.data();
  if (device_ != Device::CPU) staging.assign(static_cast<size_t>(total_), 0.f), base = staging.data();
  std::mt19937_64 rng(seed);
  for (auto& p : params_) {
    float* v = base + p.offset;
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
  if (device_ != Device::CPU) backend(device_).from_host(values_.raw(), base, values_.bytes());
}

void ParamStore::lay_out_int8() {
  int8_on_cpu_only(device_);
  lay_out(/*int8=*/true, [](const Param&) { return true; });
}

void ParamStore::lay_out(bool int8, const std::function<bool(const Param&)>& keep) {
  const auto s8 = [&](const Param& p) { return int8 && p.quantisable; };
  int64_t floats = 0, bytes = 0, rows = 0;
  for (const Param& p : params_) {
    if (!keep(p)) continue;
    if (s8(p))
      bytes += (p.shape.numel() + 63) / 64 * 64, rows += (p.shape[0] + 15) / 16 * 16;
    else
      floats += (p.shape.numel() + 15) / 16 * 16;
  }
  values_ = Tensor(Shape{floats}, device_);
  int8_ = int8 ? Tensor(Shape{bytes}, device_, DType::S8) : Tensor();
  scales_ = int8 ? Tensor(Shape{rows}, device_) : Tensor();  // all three zeroed
  floats = bytes = rows = 0;
  for (Param& p : params_) {
    if (!keep(p)) {
      p.value = Tensor(), p.scales = Tensor(), p.offset = -1;
    } else if (s8(p)) {
      p.value = Tensor::view_of(int8_.data_as<int8_t>() + bytes, p.shape, DType::S8, device_);
      p.scales = Tensor::view_of(scales_.data() + rows, Shape{p.shape[0]}, device_);
      bytes += (p.shape.numel() + 63) / 64 * 64, rows += (p.shape[0] + 15) / 16 * 16;
    } else {
      p.value = Tensor::view_of(values_.data() + floats, p.shape, device_);
      p.scales = Tensor(), p.offset = floats;
      floats += (p.shape.numel() + 15) / 16 * 16;
    }
  }
}

void ParamStore::allocate_int8() {
  if (allocated()) throw Error("the parameters are allocated already");
  lay_out_int8();
}

void ParamStore::hold_in_int8() {
  if (!allocated() || holds_int8()) return;
  if (prepared_) throw Error("hold_in_int8: the store is prepared already");
  int8_on_cpu_only(device_);
  Tensor floats = std::move(values_);  // the f32 layout, read while the new one is filled
  lay_out_int8();
  for (Param& p : params_) {
    const float* src = floats.data() + p.offset;
    if (p.quantisable)
      quantise_rows(src, p.shape[0], p.shape[1], p.value.data_as<int8_t>(), p.scales.data());
    else
      std::copy(src, src + p.shape.numel(), p.value.data());
  }
}

void ParamStore::multiplied(const Param* p, bool sparse_input, bool products_only) {
  if (p->store != this) throw Error("multiplied: a parameter of another store");
  if (p->shape.ndim != 2) throw Error("multiplied: " + p->name + " is no matrix");
  Param& q = const_cast<Param&>(*p);  // this store's own (params_)
  // Marked twice (an output projection tied to a Linear): what both allow.
  q.sparse_input = sparse_input && (!q.product || q.sparse_input);
  q.products_only = products_only && (!q.product || q.products_only);
  q.product = true;
}

void ParamStore::prepare(ComputeType compute, bool drop_values) {
  if (!allocated()) throw Error("prepare: the parameters are not allocated");
  if (prepared_) throw Error("prepare: the store is prepared already");
  compute_ = compute;
  for (Param& p : params_)
    if (p.product)
      p.prepared = ops::prepare_weight(p.value, p.int8_scales(), compute, p.sparse_input);
  prepared_ = true;
  // Dropping moves the values kept: only where no prepared form reads them
  // (the CPU's; a backend that multiplies the source keeps every value).
  bool own_copies = true;
  for (const Param& p : params_) own_copies = own_copies && !(p.prepared && p.prepared->reads_source());
  if (drop_values && own_copies) drop_product_only_values();
}

int64_t ParamStore::prepared_bytes() const {
  int64_t n = 0;
  for (const Param& p : params_)
    if (p.prepared) n += p.prepared->bytes();
  return n;
}

std::string ParamStore::prepared_forms() const {
  std::vector<std::pair<std::string, int>> forms;
  for (const Param& p : params_) {
    if (!p.prepared) continue;
    const std::string f = p.prepared->form();
    auto it = std::find_if(forms.begin(), forms.end(), [&](const auto& x) { return x.first == f; });
    if (it == forms.end()) it = forms.insert(forms.end(), {f, 0});
    ++it->second;
  }
  std::string out;
  for (const auto& [f, n] : forms) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + f;
  return out.empty() ? "none prepared" : out;
}

void ParamStore::drop_product_only_values() {
  // The old views, read while the new layout, without the dropped, is filled.
  std::vector<Tensor> old_values, old_scales;
  for (const Param& p : params_) old_values.push_back(p.value.view()), old_scales.push_back(p.scales.view());
  Tensor held_values = std::move(values_), held_int8 = std::move(int8_),
         held_scales = std::move(scales_);
  lay_out(held_int8.numel() > 0, [](const Param& p) { return !(p.products_only && p.prepared); });
  Backend& be = backend(device_);
  size_t i = 0;
  for (Param& p : params_) {
    if (!p.value.empty()) be.copy(p.value.raw(), old_values[i].raw(), p.value.bytes());
    if (!p.scales.empty()) be.copy(p.scales.raw(), old_scales[i].raw(), p.scales.bytes());
    ++i;
  }
  dropped_values_ = true;
}

}  // namespace nmt
