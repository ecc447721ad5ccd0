#include "cpu/numerics.h"

#include <dnnl.hpp>

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"

namespace nmt::cpu {
namespace {

// The largest f32 weights (bytes) for which the FFN's second product reads
// only its non-zero inputs, per kernel class: the largest size at which
// bench_gemm's "decoding ffn2" rows (88 rows, 84% and 92% zeros, the shares
// of trained transformer-base and -small models; NMT_NUMERICS=sparse=64M
// runs them all sparse) ran faster sparse at both shares. README
// "Numerics" has the runs. Each non-zero reads a row of the weights, so
// larger weights, read from further out in the caches, lose.
struct SparseRule {
  Isa kernels;
  int64_t max_bytes;
};
constexpr SparseRule kSparseTable[] = {
    {Isa::scalar, 0},  // slower at 84% zeros at every size: never
    {Isa::avx2, int64_t{4} << 20},
    {Isa::avx512, int64_t{2} << 20},
};

int64_t sparse_rule(Isa kernels) {
  for (const SparseRule& r : kSparseTable)
    if (r.kernels == kernels) return r.max_bytes;
  return 0;
}

[[noreturn]] void bad(const std::string& what) {
  throw InputError("NMT_NUMERICS: " + what + " (it takes " + describe_keys() + ")");
}

Isa parse_isa(const std::string& v) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (v == isa_name(i)) return i;
  bad("kernels=" + v + " is not a kernel class");
}

int64_t parse_bytes(const std::string& v) {
  // A count of bytes, or of KiB and MiB with a suffix K or M.
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  int64_t unit = 1;
  if (end && *end == 'K') unit = 1024, ++end;
  else if (end && *end == 'M') unit = 1024 * 1024, ++end;
  if (v.empty() || !end || *end || errno || n < 0 || n > (int64_t{1} << 40) / unit)
    bad("sparse=" + v + " is not a size in bytes (e.g. 0, 512K, 2M)");
  return n * unit;
}

// NMT_NUMERICS's pairs, in order, each key once.
std::vector<std::pair<std::string, std::string>> parse_forced(const std::string& forced) {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::stringstream list(forced);
  std::string pair;
  while (std::getline(list, pair, ',')) {
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string::npos) bad("\"" + pair + "\" is not key=value");
    const std::string key = pair.substr(0, eq);
    if (key != "kernels" && key != "f32" && key != "int8" && key != "sparse")
      bad("no key \"" + key + "\"");
    for (const auto& [k, v] : pairs)
      if (k == key) bad(key + " given twice");
    pairs.emplace_back(key, pair.substr(eq + 1));
  }
  return pairs;
}

CpuFeatures this_cpu() {
  // oneDNN's instruction sets are sets of bits, each holding those below;
  // its effective one is capped by ONEDNN_MAX_CPU_ISA.
  const unsigned effective = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto has = [effective](dnnl::cpu_isa want) {
    return (effective & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
  };
  CpuFeatures f;
  if (has(dnnl::cpu_isa::avx512_core) && cpu_runs(Isa::avx512))
    f.widest = Isa::avx512;
  else if (has(dnnl::cpu_isa::avx2) && cpu_runs(Isa::avx2))
    f.widest = Isa::avx2;
  f.vnni = has(dnnl::cpu_isa::avx512_core_vnni) || has(dnnl::cpu_isa::avx2_vnni);
  f.amx = has(dnnl::cpu_isa::avx512_core_amx);
  f.bf16 = has(dnnl::cpu_isa::avx512_core_bf16);
  return f;
}

}  // namespace

Numerics choose_numerics(const CpuFeatures& cpu, const std::string& forced) {
  const auto pairs = parse_forced(forced);
  const auto given = [&pairs](const char* key) -> const std::string* {
    for (const auto& [k, v] : pairs)
      if (k == key) return &v;
    return nullptr;
  };
  Numerics n;
  n.kernels = cpu.widest;
  if (const std::string* v = given("kernels")) {
    n.kernels = parse_isa(*v);
    if (static_cast<int>(n.kernels) > static_cast<int>(cpu.widest))
      bad("kernels=" + *v + ": this CPU runs " + isa_name(cpu.widest) + " at most");
  }
  // f32: oneDNN 2.6's brgemm kernels (AVX-512) sum a row in an order that
  // does not depend on the other rows; below AVX-512 its jit gemm's does (a
  // 6th-digit change of a sentence's score with its batch), so nmt's rows
  // kernel (AVX2 and wider) multiplies there.
  n.f32 = n.kernels == Isa::avx2 ? F32Products::nmt_rows : F32Products::onednn;
  if (const std::string* v = given("f32")) {
    if (*v == "nmt")
      n.f32 = F32Products::nmt_rows;
    else if (*v == "onednn")
      n.f32 = F32Products::onednn;
    else
      bad("f32=" + *v + " is not nmt or onednn");
  }
  // int8: oneDNN with VNNI; without it, nmt's rows kernel keeps all 8 bits
  // of the weights where oneDNN would need 7.
  n.int8 = cpu.vnni                    ? Int8Products::onednn_vnni
           : n.kernels != Isa::scalar ? Int8Products::nmt_rows
                                      : Int8Products::onednn_7bit;
  if (const std::string* v = given("int8")) {
    if (*v == "nmt")
      n.int8 = Int8Products::nmt_rows;
    else if (*v == "onednn-vnni")
      n.int8 = Int8Products::onednn_vnni;
    else if (*v == "onednn-7bit")
      n.int8 = Int8Products::onednn_7bit;
    else
      bad("int8=" + *v + " is not nmt, onednn-vnni or onednn-7bit");
    if (n.int8 == Int8Products::onednn_vnni && !cpu.vnni) bad("int8=" + *v + ": this CPU has no VNNI");
  }
  if (n.f32 == F32Products::nmt_rows && n.kernels == Isa::scalar)
    bad("f32=nmt needs kernels avx2 or wider");
  if (n.int8 == Int8Products::nmt_rows && n.kernels == Isa::scalar)
    bad("int8=nmt needs kernels avx2 or wider");
  n.sparse_bytes = sparse_rule(n.kernels);
  if (const std::string* v = given("sparse")) n.sparse_bytes = parse_bytes(*v);
  n.amx_rows = cpu.amx;
  n.bf16 = cpu.bf16;
  return n;
}

const Numerics& numerics() {
  static const Numerics chosen = [] {
    const char* forced = std::getenv("NMT_NUMERICS");
    return choose_numerics(this_cpu(), forced ? forced : "");
  }();
  return chosen;
}

Isa isa() { return numerics().kernels; }

std::string describe(const Numerics& n) {
  std::string s = std::string("kernels ") + isa_name(n.kernels) + "; f32 products: " +
                  (n.f32 == F32Products::nmt_rows ? "nmt rows" : "oneDNN") + "; int8 products: ";
  switch (n.int8) {
    case Int8Products::nmt_rows:
      s += "nmt rows (16-bit x 8-bit, exact sums)";
      break;
    case Int8Products::onednn_vnni:
      s += "oneDNN VNNI";
      break;
    case Int8Products::onednn_7bit:
      s += "oneDNN (7-bit weights)";
      break;
  }
  if (n.amx_rows) s += " in AMX tiles of 16 rows";
  s += "; sparse ffn2: ";
  s += n.sparse_bytes == 0                     ? std::string("never")
       : n.sparse_bytes % (1024 * 1024) == 0 ? "weights up to " +
                                                   std::to_string(n.sparse_bytes >> 20) + " MiB"
       : n.sparse_bytes % 1024 == 0          ? "weights up to " +
                                                   std::to_string(n.sparse_bytes >> 10) + " KiB"
                                             : "weights up to " + std::to_string(n.sparse_bytes) + " B";
  s += n.bf16 ? "; bf16 products" : "; no bf16 products";
  return s;
}

std::string describe_keys() {
  return "kernels=scalar|avx2|avx512, f32=nmt|onednn, int8=nmt|onednn-vnni|onednn-7bit, "
         "sparse=<bytes, K or M>";
}

}  // namespace nmt::cpu
