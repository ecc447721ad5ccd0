// Tests that need what not every machine has (bf16 products need
// AVX512-BF16 or AMX; the CUDA backend computes in f32 only) must show as
// skipped there, never as passed. Catch2 v2 has no SKIP, so such a
// TEST_CASE carries the compute type as a tag ("[bf16]", "[int8]"), is left
// out of the tests catch_discover_tests registers, and runs in a ctest entry
// of its own:
//
//   nmt_tests --needs bf16 "[bf16]"
//
// which exits 77 (SKIP_RETURN_CODE: ctest prints "Skipped") where the device
// cannot compute in that type, and runs the tagged cases where it can. Inside
// a case, require_compute() fails the case rather than returning early, so a
// tagged case run by hand on a machine without the capability fails loudly.
//
// The check is the library's own (Backend::unsupported), so the way to see
// the skips on a machine that has the capability is to lower what oneDNN may
// use: ONEDNN_MAX_CPU_ISA=AVX2 (a Zen 3's ISA) or AVX512_CORE_VNNI.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/device.h"

namespace nmt::test {

// The system's transparent huge page mode: "always", "madvise", "never", or
// "" where it cannot be read.
inline std::string thp_mode() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return "";
  char buf[128] = {};
  const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!got) return "";
  const char* open = std::strchr(buf, '[');
  const char* close = open ? std::strchr(open, ']') : nullptr;
  return close ? std::string(open + 1, close) : "";
}

// Why `d` cannot compute in `ct` here, or "" when it can.
inline std::string unsupported_here(Device d, ComputeType ct) {
  if (d == Device::CUDA && !cuda_available()) return "no CUDA device, or built without CUDA";
  return backend(d).unsupported(Op::Gemm, ct);
}

// Fails the running test case unless `d` computes in `ct` here.
inline void require_compute(Device d, ComputeType ct) {
  const std::string why = unsupported_here(d, ct);
  INFO(compute_type_name(ct) << " on " << device_name(d) << ": " << why
                             << " (run this case through its ctest entry, which skips it)");
  REQUIRE(why.empty());
}

// Takes "--needs CT" (CT: f32, bf16 or int8, gpu: a CUDA device, or thp:
// the CPU with transparent huge pages in madvise mode; repeatable) out of
// argv.
// Returns 77 after printing why when `d` lacks one of them, else 0 with
// argv holding the remaining arguments for Catch.
inline int take_needs(std::vector<char*>& args, Device d) {
  std::vector<char*> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::strcmp(args[i], "--needs") != 0) {
      rest.push_back(args[i]);
      continue;
    }
    if (i + 1 == args.size()) {
      std::cerr << "--needs: expected f32, bf16, int8 or gpu\n";
      return 2;
    }
    if (std::strcmp(args[i + 1], "thp") == 0) {  // --needs thp: huge pages on request
      ++i;
      if (d != Device::CPU || thp_mode() != "madvise") {
        std::cout << "skipped: needs the CPU device and transparent huge pages in madvise mode "
                     "(here: \""
                  << thp_mode() << "\")\n";
        return 77;
      }
      continue;
    }
    if (std::strcmp(args[i + 1], "gpu") == 0) {  // --needs gpu: a CUDA device
      ++i;
      if (!cuda_available()) {
        std::cout << "skipped: no CUDA device, or built without CUDA\n";
        return 77;
      }
      continue;
    }
    ComputeType ct;
    try {
      ct = parse_compute_type(args[++i]);
    } catch (const std::exception& e) {
      std::cerr << "--needs: " << e.what() << "\n";
      return 2;
    }
    const std::string why = unsupported_here(d, ct);
    if (!why.empty()) {
      std::cout << "skipped: " << compute_type_name(ct) << " on " << device_name(d) << ": " << why
                << "\n";
      return 77;
    }
  }
  args.swap(rest);
  return 0;
}

}  // namespace nmt::test
