#include "cpu/isa.h"

#include <dnnl.hpp>

#include "cpu/loops.h"

namespace nmt::cpu {

bool cpu_runs(Isa want) {
  switch (want) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return cpu_runs(Isa::avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

Isa isa() {
  static const Isa chosen = [] {
    // oneDNN's instruction sets are sets of bits, each holding those below.
    const auto has = [](dnnl::cpu_isa want) {
      const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
      return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
    };
    if (has(dnnl::cpu_isa::avx512_core) && cpu_runs(Isa::avx512)) return Isa::avx512;
    if (has(dnnl::cpu_isa::avx2) && cpu_runs(Isa::avx2)) return Isa::avx2;
    return Isa::scalar;
  }();
  return chosen;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

const Loops& loops_for(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return avx512::kLoops;
    case Isa::avx2:
      return avx2::kLoops;
    case Isa::scalar:
      break;
  }
  return scalar::kLoops;
}

const Loops& loops() {
  static const Loops& chosen = loops_for(isa());
  return chosen;
}

}  // namespace nmt::cpu
