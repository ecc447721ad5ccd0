#include "train/learning_curve.h"

namespace nmt {

plot::LineChart learning_curve(const CurveData& d) {
  plot::LineChart c;
  c.title = d.title;
  c.x_label = "step";
  c.left_label = "loss per token";
  c.right_label = "validation BLEU";
  const plot::Color blue{0.12, 0.47, 0.71}, green{0.17, 0.63, 0.17}, red{0.84, 0.15, 0.16};
  c.series.push_back({"training loss", d.train_loss, blue, 1.2, false, false});
  c.series.push_back({"validation loss", d.valid_loss, green, 1.5, true, false});
  if (!d.valid_bleu.empty())
    c.series.push_back({"validation BLEU", d.valid_bleu, red, 2.0, true, true});
  return c;
}

}  // namespace nmt
