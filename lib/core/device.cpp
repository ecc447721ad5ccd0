// Device names and the backend lookup. Whether CUDA was built in is known
// only to lib/cuda: a build without it compiles lib/cuda/no_cuda.cpp.
#include "core/device.h"

#include <atomic>

#include "core/backend.h"
#include "core/comm.h"
#include "core/error.h"

namespace nmt {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name == "cuda" || name == "cuda:0") return Device::CUDA;
  if (name.rfind("cuda:", 0) == 0)
    throw UsageError("--device " + name + ": only cuda:0 is supported for now");
  throw UsageError("--device: expected cpu or cuda[:N], got \"" + name + "\"");
}

ComputeType parse_compute_type(const std::string& name) {
  if (name == "f32" || name == "float32") return ComputeType::F32;
  if (name == "bf16" || name == "bfloat16") return ComputeType::BF16;
  if (name == "int8") return ComputeType::INT8;
  throw UsageError("--compute-type: expected f32, bf16 or int8, got \"" + name + "\"");
}

namespace {
// Stand-ins that tests install for a device (see install_backend_for_testing).
std::atomic<Backend*> stand_in[2] = {nullptr, nullptr};
}  // namespace

void install_backend_for_testing(Device d, Backend* b) {
  stand_in[static_cast<int>(d)].store(b, std::memory_order_release);
}

Backend& backend(Device d) {
  if (Backend* b = stand_in[static_cast<int>(d)].load(std::memory_order_acquire)) return *b;
  return d == Device::CPU ? cpu_backend() : cuda_backend();
}

void require_device(Device d) { backend(d); }

void require_compute_type(Device d, ComputeType t) {
  const std::string why = backend(d).unsupported(t);
  if (!why.empty())
    throw InputError("--compute-type " + std::string(compute_type_name(t)) + ": " + why);
}

std::string backends_info() {
  return "cpu: " + cpu_backend().version() + "; cuda: " + cuda_build_info() +
         "; mpi: " + mpi_build_info();
}

}  // namespace nmt
