// The functions the CPU code and the CUDA kernels both call (the dropout
// hash, the activations, the kernels tier's row and decoding arithmetic):
// one definition for every backend.
#pragma once

#if defined(__CUDACC__)
#define NMT_HOST_DEVICE __host__ __device__
#else
#define NMT_HOST_DEVICE
#endif

// A shared function at namespace scope. lib/cpu/loops.cpp is compiled once
// per instruction-set class (cpu/isa.h, NMT_CPU_VARIANT); there each copy
// of a shared function is its class's own (internal linkage), so the linker
// never keeps the AVX-512 copy for the whole program.
#if defined(NMT_CPU_VARIANT)
#define NMT_KERNEL static inline
#else
#define NMT_KERNEL NMT_HOST_DEVICE inline
#endif

// Loops of the shared functions that the CPU vectorises: sums over a row
// split across a vector's lanes (a fixed order for one instruction-set
// class), and exp_approx as a vector function. A GPU thread runs the loop
// as written.
#define NMT_PRAGMA(x) _Pragma(#x)
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#define NMT_SIMD_SUM(...) NMT_PRAGMA(omp simd reduction(+ : __VA_ARGS__))
#define NMT_SIMD NMT_PRAGMA(omp simd)
#define NMT_SIMD_FUNCTION NMT_PRAGMA(omp declare simd notinbranch)
#else
#define NMT_SIMD_SUM(...)
#define NMT_SIMD
#define NMT_SIMD_FUNCTION
#endif
