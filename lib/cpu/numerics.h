// The arithmetic the CPU backend runs, chosen once per process by fixed
// rules from the instruction-set class and the shapes: never by a clock, a
// cache size or a memory layout, so that one binary and one model take the
// same paths on every machine of one class. (What oneDNN decides inside a
// primitive is its own: its kernels may still differ between CPUs of one
// class, by cache sizes and core counts, where nmt runs products on it.)
//
// nmt --version, nmt info, nmt translate --verbose and the training log
// print it. NMT_NUMERICS forces any part of it, to debug or compare, as
// comma-separated key=value pairs (describe_keys() lists them), e.g.
//   NMT_NUMERICS=kernels=scalar,f32=onednn,int8=onednn-7bit,sparse=0
// A forced choice the CPU cannot run (kernels wider than it has, VNNI
// where it has none) is refused.
#pragma once

#include <cstdint>
#include <string>

#include "cpu/isa.h"

namespace nmt::cpu {

// Who multiplies activations by a frozen model's weights.
enum class F32Products { nmt_rows, onednn };
// nmt_rows: 16-bit activations times 8-bit weights, sums exact; onednn_vnni:
// oneDNN's VNNI kernels, 8-bit by 8-bit, sums exact; onednn_7bit: oneDNN
// without VNNI, whose pairwise 16-bit sums would saturate, on weights
// rounded again to 7 bits.
enum class Int8Products { nmt_rows, onednn_vnni, onednn_7bit };

struct Numerics {
  Isa kernels = Isa::scalar;  // nmt's own loops (lib/cpu/loops.cpp's variant)
  F32Products f32 = F32Products::onednn;
  Int8Products int8 = Int8Products::onednn_7bit;
  // The FFN's second product (its inputs mostly zero after ReLU) reads only
  // the non-zero inputs where its f32 weights take at most this many bytes;
  // 0: never. From kSparseTable (numerics.cpp), made by bench_gemm.
  int64_t sparse_bytes = 0;
  // int8 products cut their rows in AMX's tiles of 16.
  bool amx_rows = false;
  // The CPU multiplies bf16 in hardware (AVX512-BF16 or AMX): bf16
  // translation and training are available. (Whether training with a
  // budget of time uses them is the recipe's choice, by a measured update:
  // the instruction set does not tell, see train/recipe.h; the log and nmt
  // info show it with its timings.)
  bool bf16 = false;
};

// What the CPU offers, as the rule reads it.
struct CpuFeatures {
  Isa widest = Isa::scalar;  // the widest class both the CPU and oneDNN's cap allow
  bool vnni = false, amx = false, bf16 = false;
};

// The rule: the numerics for `cpu`, then `forced` (NMT_NUMERICS's syntax)
// applied. Throws InputError naming the key or value for anything malformed
// or anything the CPU cannot run.
Numerics choose_numerics(const CpuFeatures& cpu, const std::string& forced = "");

// This process's numerics: choose_numerics for this CPU and NMT_NUMERICS,
// made at the first call. Throws InputError (at every call) while
// NMT_NUMERICS is malformed.
const Numerics& numerics();

// One line, e.g. "kernels avx2; f32 products: nmt rows; int8 products: nmt
// rows (16-bit x 8-bit, exact sums); sparse ffn2: weights up to 2 MiB; ...".
std::string describe(const Numerics& n);
// The keys and values NMT_NUMERICS takes, for error messages and the README.
std::string describe_keys();

}  // namespace nmt::cpu
