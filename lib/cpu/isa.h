// The instruction-set classes nmt's own CPU kernels are compiled for. Every
// build holds all three side by side (lib/cpu/loops.cpp is compiled once
// per class) and picks one when the process starts, so one portable binary
// runs on any x86-64 CPU at the speed of its widest registers.
#pragma once

namespace nmt::cpu {

enum class Isa { scalar, avx2, avx512 };

// The class this process runs (numerics().kernels, numerics.h): the widest
// the CPU has (AVX-512 means F, BW, DQ and VL; AVX2 means AVX2 and FMA),
// capped as oneDNN's own instruction set is (ONEDNN_MAX_CPU_ISA=AVX2 or
// SSE41), or as NMT_NUMERICS=kernels=... says. Fixed for the process.
Isa isa();
const char* isa_name(Isa isa);
// Whether this CPU can run class `want` (a cap aside).
bool cpu_runs(Isa want);

}  // namespace nmt::cpu
