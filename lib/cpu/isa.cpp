#include "cpu/isa.h"

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
