// What int8 weights cost a model: a validation set translated in f32 and in
// int8, each scored with chrF. Where int8 is chosen by measurement (`nmt
// train --optimize speed`, `nmt distill`'s teacher) it is taken when it
// scores within kMaxInt8ChrfCost of f32; `nmt distill` records its student's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nmt {

// The least chrF difference that 500 validation pairs tell apart.
constexpr double kMaxInt8ChrfCost = 0.5;

struct Int8Cost {
  double chrf_f32 = 0, chrf_int8 = 0;
  int64_t sentences = 0;
  int beam = 0;

  bool acceptable() const { return chrf_int8 >= chrf_f32 - kMaxInt8ChrfCost; }
  // "chrF 58.29 in int8 against 58.20 in f32".
  std::string scores() const;
  // scores(), then " (500 validation sentences, beam 4)", and ": more than
  // 0.5 lost" where int8 is not acceptable.
  std::string describe() const;
};

// translate(compute) gives the validation sources translated with the
// model's weights in `compute` ("f32" or "int8") at `beam`, in order.
Int8Cost measure_int8_cost(
    const std::function<std::vector<std::string>(const std::string& compute)>& translate,
    const std::vector<std::string>& refs, int beam);

}  // namespace nmt
