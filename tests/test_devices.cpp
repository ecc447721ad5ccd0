// CPU against CUDA through the same op interface; skipped at run time where
// the build has no CUDA or the machine no GPU.
#include "core/device.h"
#include "core/error.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

TEST_CASE("matmul on the CPU matches the reference, every transpose", "[ops]") {
  Tensor a(Shape{5, 3}), b(Shape{3, 4}), c;
  fill_random(a, 1);
  fill_random(b, 2);
  matmul(a, false, b, false, c);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += a.data()[i * 3 + k] * b.data()[k * 4 + j];
      CHECK(c.data()[i * 4 + j] == Approx(s).margin(1e-5));
    }
  Tensor at(Shape{3, 5}), bt(Shape{4, 3}), c2;
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 3; ++k) at.data()[k * 5 + i] = a.data()[i * 3 + k];
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 4; ++j) bt.data()[j * 3 + k] = b.data()[k * 4 + j];
  matmul(at, true, bt, true, c2);
  for (int i = 0; i < 20; ++i) CHECK(c2.data()[i] == Approx(c.data()[i]).margin(1e-5));
}

TEST_CASE("CUDA matmul matches the CPU", "[ops][cuda]") {
  if (!cuda_available()) {
    CHECK_THROWS_AS(Tensor(Shape{2, 2}, Device::CUDA), Error);
    WARN("no CUDA device (or built without CUDA): GPU comparison skipped");
    return;
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t M = 67, N = 45, K = 33;
      Tensor a(ta ? Shape{K, M} : Shape{M, K}), b(tb ? Shape{N, K} : Shape{K, N}), c;
      fill_random(a, 3);
      fill_random(b, 4);
      matmul(a, ta, b, tb, c, 0.5f);
      Tensor ga = to_device(a, Device::CUDA), gb = to_device(b, Device::CUDA);
      Tensor gc(Shape{M, N}, Device::CUDA);
      matmul(ga, ta, gb, tb, gc, 0.5f);
      Tensor back = to_device(gc, Device::CPU);
      for (int64_t i = 0; i < c.numel(); ++i)
        REQUIRE(back.data()[i] == Approx(c.data()[i]).margin(1e-4));
    }
}
