// Where a tensor lives. Only the backends know whether CUDA was built in: in
// a build without it, asking for the CUDA backend throws "nmt was built
// without CUDA support", and cuda_available() is false.
#pragma once

#include <string>

namespace nmt {

enum class Device { CPU, CUDA };

const char* device_name(Device d);
// "cpu", "cuda" or "cuda:N" (N is accepted and must be 0 for now).
Device parse_device(const std::string& name);

// What the products against a loaded model's weights compute in: f32, or
// the weights (and each call's activations) converted to bf16, or to int8
// with a scale per output channel and one per call. Sums are f32 (s32 for
// int8); everything else (attention, softmax, layer norm) stays f32.
enum class ComputeType { F32, BF16, INT8 };
// "f32", "bf16", "int8"; inline, as the CUDA library (lib/cuda) uses it and
// links nothing of nmtlib's.
inline const char* compute_type_name(ComputeType t) {
  return t == ComputeType::BF16 ? "bf16" : t == ComputeType::INT8 ? "int8" : "f32";
}
// f32/float32, bf16/bfloat16 or int8; throws InputError naming the choices.
ComputeType parse_compute_type(const std::string& name);

// Throws Error saying why unless device d can run here: "nmt was built
// without CUDA support", "no CUDA device is available".
void require_device(Device d);

// The device a user named, ready to use: a UsageError for a name that is
// none; an Error for a GPU that this build or machine does not have ("no
// CUDA device is available").
Device open_device(const std::string& name);

// True when the build has CUDA, its library (libnmt_cuda.so) loads, and a GPU
// is present.
bool cuda_available();

// The backends compiled in, with versions: "cpu: oneDNN 2.6.3 (...); cuda: ...".
std::string backends_info();

}  // namespace nmt
