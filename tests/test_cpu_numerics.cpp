// The CPU backend's numerics (lib/cpu/numerics.h): the rule for each kind
// of CPU, and NMT_NUMERICS's forcing, checked without the CPU at hand.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cpu/numerics.h"

using namespace nmt;
using namespace nmt::cpu;

namespace {

CpuFeatures features(Isa widest, bool vnni = false, bool amx = false, bool bf16 = false) {
  CpuFeatures f;
  f.widest = widest, f.vnni = vnni, f.amx = amx, f.bf16 = bf16;
  return f;
}

// The message choose_numerics refuses `forced` with on `c`, or "".
std::string refusal(const CpuFeatures& c, const std::string& forced) {
  try {
    choose_numerics(c, forced);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("numerics: the rule for each class of CPU", "[numerics]") {
  // Below AVX2: oneDNN multiplies, 7-bit int8 weights, no sparse products.
  Numerics n = choose_numerics(features(Isa::scalar));
  CHECK(n.kernels == Isa::scalar);
  CHECK(n.f32 == F32Products::onednn);
  CHECK(n.int8 == Int8Products::onednn_7bit);
  CHECK(n.sparse_bytes == 0);
  CHECK_FALSE(n.amx_rows);
  // AVX2 without VNNI (a Zen 2 or 3, a Haswell): nmt's rows kernels.
  n = choose_numerics(features(Isa::avx2));
  CHECK(n.kernels == Isa::avx2);
  CHECK(n.f32 == F32Products::nmt_rows);
  CHECK(n.int8 == Int8Products::nmt_rows);
  CHECK(n.sparse_bytes == int64_t{4} << 20);
  // AVX2 with VNNI (Alder Lake): oneDNN's VNNI int8, nmt's f32 rows.
  n = choose_numerics(features(Isa::avx2, true));
  CHECK(n.f32 == F32Products::nmt_rows);
  CHECK(n.int8 == Int8Products::onednn_vnni);
  // AVX-512 with VNNI, BF16 and AMX (Sapphire Rapids): oneDNN throughout.
  n = choose_numerics(features(Isa::avx512, true, true, true));
  CHECK(n.kernels == Isa::avx512);
  CHECK(n.f32 == F32Products::onednn);
  CHECK(n.int8 == Int8Products::onednn_vnni);
  CHECK(n.sparse_bytes == int64_t{2} << 20);
  CHECK(n.amx_rows);
  CHECK(n.bf16);
  // AVX-512 without VNNI (Skylake-SP): nmt's int8 rows keep 8 bits.
  CHECK(choose_numerics(features(Isa::avx512)).int8 == Int8Products::nmt_rows);
  // The rule reads only what it is given: NMT_NUMERICS is numerics()'s to
  // apply, never choose_numerics's.
  const char* was = std::getenv("NMT_NUMERICS");
  const std::string saved = was ? was : "";
  setenv("NMT_NUMERICS", "sparse=0,f32=onednn", 1);
  n = choose_numerics(features(Isa::avx2));
  if (was)
    setenv("NMT_NUMERICS", saved.c_str(), 1);
  else
    unsetenv("NMT_NUMERICS");
  CHECK(n.sparse_bytes == int64_t{4} << 20);
  CHECK(n.f32 == F32Products::nmt_rows);
}

TEST_CASE("numerics: NMT_NUMERICS forces each choice, dependent defaults follow", "[numerics]") {
  const CpuFeatures zen4 = features(Isa::avx512, true, false, true);
  Numerics n = choose_numerics(zen4, "kernels=avx2");
  CHECK(n.kernels == Isa::avx2);
  CHECK(n.f32 == F32Products::nmt_rows);  // AVX2's rule, not AVX-512's
  CHECK(n.sparse_bytes == int64_t{4} << 20);
  n = choose_numerics(zen4, "kernels=scalar");
  CHECK(n.f32 == F32Products::onednn);
  CHECK(n.int8 == Int8Products::onednn_vnni);  // VNNI is oneDNN's, not nmt's kernels'
  CHECK(n.sparse_bytes == 0);
  n = choose_numerics(zen4, "f32=nmt,int8=onednn-7bit,sparse=512K");
  CHECK(n.f32 == F32Products::nmt_rows);
  CHECK(n.int8 == Int8Products::onednn_7bit);
  CHECK(n.sparse_bytes == 512 * 1024);
  CHECK(choose_numerics(zen4, "sparse=3M").sparse_bytes == 3 * 1024 * 1024);
  CHECK(choose_numerics(zen4, "sparse=1000,").sparse_bytes == 1000);
  CHECK(describe(choose_numerics(zen4, "sparse=0")).find("sparse ffn2: never") != std::string::npos);
}

TEST_CASE("numerics: a malformed or impossible NMT_NUMERICS is refused by name", "[numerics]") {
  const CpuFeatures zen3 = features(Isa::avx2);
  CHECK(refusal(zen3, "").empty());
  CHECK(refusal(zen3, "kernels=avx512").find("kernels=avx512: this CPU runs avx2 at most") !=
        std::string::npos);
  CHECK(refusal(zen3, "int8=onednn-vnni").find("this CPU has no VNNI") != std::string::npos);
  CHECK(refusal(zen3, "kernels=scalar,f32=nmt").find("f32=nmt needs kernels avx2") !=
        std::string::npos);
  CHECK(refusal(zen3, "kernels=scalar,int8=nmt").find("int8=nmt needs kernels avx2") !=
        std::string::npos);
  CHECK(refusal(zen3, "kernels=sse").find("kernels=sse is not a kernel class") != std::string::npos);
  CHECK(refusal(zen3, "f32=mkl").find("f32=mkl is not nmt or onednn") != std::string::npos);
  CHECK(refusal(zen3, "f32").find("\"f32\" is not key=value") != std::string::npos);
  CHECK(refusal(zen3, "blas=mkl").find("no key \"blas\"") != std::string::npos);
  CHECK(refusal(zen3, "f32=nmt,f32=onednn").find("f32 given twice") != std::string::npos);
  for (const char* size : {"sparse=", "sparse=-1", "sparse=1G", "sparse=1MB", "sparse=99999999999M"})
    CHECK(refusal(zen3, size).find("is not a size in bytes") != std::string::npos);
  // Every refusal names NMT_NUMERICS and lists what it takes.
  const std::string r = refusal(zen3, "f32=mkl");
  CHECK(r.rfind("NMT_NUMERICS: ", 0) == 0);
  CHECK(r.find(describe_keys()) != std::string::npos);
}
