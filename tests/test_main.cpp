// The unit tests' entry point: Catch2's, after "--needs CT", which exits 77
// (ctest: skipped) where the CPU cannot compute in CT (see capability.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "capability.h"

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  if (const int rc = nmt::test::take_needs(args, nmt::Device::CPU)) return rc;
  return Catch::Session().run(static_cast<int>(args.size()), args.data());
}
