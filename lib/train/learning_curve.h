// The learning curve written beside the model (OUT.curve.svg): training and
// validation loss (left axis) and validation BLEU (right axis) against
// update steps, drawn by the plotting module that draws attention maps.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "plot/plot.h"

namespace nmt {

struct CurveData {
  std::string title;
  std::vector<std::pair<double, double>> train_loss;  // (step, loss per token)
  std::vector<std::pair<double, double>> valid_loss;  // (step, loss per token)
  std::vector<std::pair<double, double>> valid_bleu;  // (step, BLEU)
};

plot::LineChart learning_curve(const CurveData& data);

}  // namespace nmt
