#include "decode/int8_cost.h"

#include "core/error.h"
#include "core/format.h"
#include "metrics/chrf.h"

namespace nmt {

std::string Int8Cost::scores() const {
  return "chrF " + format_number("%.2f", chrf_int8) + " in int8 against " +
         format_number("%.2f", chrf_f32) + " in f32";
}

std::string Int8Cost::describe() const {
  return scores() + " (" + std::to_string(sentences) + " validation sentences, beam " +
         std::to_string(beam) + ")" +
         (acceptable() ? "" : ": more than " + format_number("%.1f", kMaxInt8ChrfCost) + " lost");
}

Int8Cost measure_int8_cost(
    const std::function<std::vector<std::string>(const std::string& compute)>& translate,
    const std::vector<std::string>& refs, int beam) {
  Int8Cost c;
  c.sentences = static_cast<int64_t>(refs.size());
  c.beam = beam;
  auto chrf_in = [&](const char* compute) {
    const std::vector<std::string> hyps = translate(compute);
    if (hyps.size() != refs.size())
      throw Error("measure_int8_cost: " + std::to_string(hyps.size()) + " translations of " +
                  std::to_string(refs.size()) + " sentences");
    return metrics::corpus_chrf(hyps, {refs}).score;
  };
  c.chrf_f32 = chrf_in("f32");
  c.chrf_int8 = chrf_in("int8");
  return c;
}

}  // namespace nmt
