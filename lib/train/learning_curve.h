// The learning curve written beside the model: training loss (left axis) and
// validation BLEU (right axis) against update steps, as a small hand-written
// SVG that any browser shows.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nmt {

struct CurveData {
  std::string title;
  std::vector<std::pair<double, double>> train_loss;  // (step, loss per token)
  std::vector<std::pair<double, double>> valid_loss;  // (step, loss per token)
  std::vector<std::pair<double, double>> valid_bleu;  // (step, BLEU)
};

std::string curve_svg(const CurveData& data);

}  // namespace nmt
