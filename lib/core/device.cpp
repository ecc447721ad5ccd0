// Device names and the backend lookup. Whether CUDA was built in is known
// only to lib/cuda: a build without it compiles lib/cuda/no_cuda.cpp.
#include "core/device.h"

#include <algorithm>
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
    throw about_option<UsageError>("device", name + ": only cuda:0 is supported for now");
  throw about_option<UsageError>("device", ": expected cpu or cuda[:N], got \"" + name + "\"");
}

ComputeType parse_compute_type(const std::string& name) {
  if (name == "f32" || name == "float32") return ComputeType::F32;
  if (name == "bf16" || name == "bfloat16") return ComputeType::BF16;
  if (name == "int8") return ComputeType::INT8;
  throw about_option<UsageError>("compute_type",
                                 ": expected f32, bf16 or int8, got \"" + name + "\"");
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

Device open_device(const std::string& name) {
  const Device d = parse_device(name);
  require_device(d);
  return d;
}

const char* op_name(Op op) {
  static const char* const names[kNumOps] = {
      "gemm",       "linear_backward", "softmax",   "softmax_backward",   "add_mask",
      "attend",     "masks",           "layer_norm", "layer_norm_backward", "elementwise",
      "dropout",    "activate",        "column_sums", "log_add_exp",       "embedding",
      "embedding_backward", "xent",    "adam",      "sum_squares",        "pick",
      "sample_tokens", "topk_log_softmax", "gemm_bf16_operands"};
  return names[static_cast<int>(op)];
}

const std::vector<Op>& ops_needed(bool training) {
  static const std::vector<Op> translate = {
      Op::Gemm,       Op::Softmax,  Op::AddMask,   Op::Attend, Op::Masks,
      Op::LayerNorm,  Op::Elementwise, Op::Activate, Op::LogAddExp, Op::Embedding,
      Op::Pick,       Op::SampleTokens, Op::TopkLogSoftmax};
  static const std::vector<Op> train = [] {
    std::vector<Op> v = translate;
    for (Op op : {Op::LinearBackward, Op::SoftmaxBackward, Op::LayerNormBackward, Op::Dropout,
                  Op::ColumnSums, Op::EmbeddingBackward, Op::Xent, Op::Adam, Op::SumSquares})
      v.push_back(op);
    return v;
  }();
  return training ? train : translate;
}

std::string missing_ops(Device d, ComputeType t, bool training) {
  // Grouped by reason, in the order the reasons first appear.
  std::vector<std::pair<std::string, std::string>> by_reason;
  for (Op op : ops_needed(training)) {
    const std::string why = backend(d).unsupported(op, t);
    if (why.empty()) continue;
    auto it = std::find_if(by_reason.begin(), by_reason.end(),
                           [&](const auto& r) { return r.first == why; });
    if (it == by_reason.end())
      by_reason.push_back({why, op_name(op)});
    else
      it->second += std::string(", ") + op_name(op);
  }
  std::string out;
  for (const auto& [why, ops] : by_reason) out += (out.empty() ? "" : "; ") + why + " (" + ops + ")";
  return out;
}

void require_compute_type(Device d, ComputeType t, bool training) {
  // An op the device lacks in any type is the device's fault; one it lacks
  // only in t is the compute type's.
  const std::string lacks = missing_ops(d, ComputeType::F32, training);
  if (!lacks.empty())
    throw InputError(std::string("the ") + device_name(d) + " backend cannot run this model: " +
                     lacks);
  const std::string why = missing_ops(d, t, training);
  if (!why.empty())
    throw about_option<InputError>("compute_type", std::string(compute_type_name(t)) + ": " + why);
}

std::string backends_info() {
  return "cpu: " + cpu_backend().version() + "; cuda: " + cuda_build_info() +
         "; mpi: " + mpi_build_info();
}

}  // namespace nmt
