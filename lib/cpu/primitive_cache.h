// The CPU backend's primitive cache, shared by its oneDNN files: one engine
// and stream per thread, and every primitive built once per key (the op and
// every number that shapes it) together with its memory objects, so a call
// in a hot loop only swaps data pointers and executes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"

namespace nmt::cpu {

// One engine and stream per thread, as oneDNN recommends for CPU.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
Context& ctx();

struct Key {
  static constexpr int kMax = 40;
  std::array<int64_t, kMax> v{};
  int n = 0;
  void add(int64_t x);
  template <size_t N>
  void add(const std::array<int64_t, N>& a) {
    for (int64_t x : a) add(x);
  }
  bool operator==(const Key& o) const {
    return n == o.n && std::memcmp(v.data(), o.v.data(), n * sizeof(int64_t)) == 0;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < k.n; ++i) h = (h ^ static_cast<uint64_t>(k.v[i])) * 1099511628211ull;
    return h;
  }
};

// A built primitive with its argument memories; calls swap the data handles.
struct Entry {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  void set(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
  void run() { prim.execute(ctx().stream, args); }
};

// key plus the calling thread's OpenMP thread count: oneDNN fixes a
// primitive's thread partitioning when it builds it, so a worker that
// changes its thread count (translator.cpp) needs other primitives, and
// timing decisions made for one count do not hold for another.
Key with_thread_count(const Key& key);

// The calling thread's entry for `key` (with_thread_count(key) inside), built by build(Entry&) on
// first use (counted in primitives_created). Least recently used entries go first when the cache is
// full.
Entry& lookup(const Key& key, const std::function<void(Entry&)>& build);

// A matmul's fused epilogue from attr: alpha as output scales (or, given
// `scales`, a per-column multiply by a runtime tensor instead: int8's
// scales change every call), then ReLU, then accumulation into dst.
dnnl::primitive_attr matmul_attr(const GemmAttr& attr, const dnnl::memory::desc* scales = nullptr);

// A memory object without data (bound per call).
inline dnnl::memory mem(const dnnl::memory::desc& d) {
  return dnnl::memory(d, ctx().engine, DNNL_MEMORY_NONE);
}

// A per-thread buffer that only grows: no allocation once warm.
template <typename T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

// Calls fn(row, rows) over pieces covering [0, M): `chunk` rows at a time,
// then what is left exactly if it is at most `exact` rows, else its multiple
// of `step` and the rest, so that pieces come in a bounded set of row counts
// whatever M is: each new count is a primitive to build (1-2 ms with AMX
// kernels), and real batches change their row count with every batch and
// decoding step. The cuts in use, with their reasons: prepared_weight.h
// (translation) and bf16_gemm.cpp (training).
struct Cut {
  int64_t chunk, exact, step;
};

template <typename Fn>
void for_each_piece(int64_t M, Cut cut, Fn&& fn) {
  int64_t row = 0;
  for (; M - row >= cut.chunk; row += cut.chunk) fn(row, cut.chunk);
  int64_t left = M - row;
  if (left > cut.exact) {
    const int64_t part = left / cut.step * cut.step;
    fn(row, part);
    row += part;
    left -= part;
  }
  if (left > 0) fn(row, left);
}

inline int64_t bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}

}  // namespace nmt::cpu
