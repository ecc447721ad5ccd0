// Pictures for users: line charts (the learning curve) and heat maps
// (attention), drawn with cairo, which writes PNG, SVG and PDF from one
// drawing. This is the only place that includes cairo.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nmt::plot {

enum class Format { PNG, SVG, PDF };

// By the file's extension (.png, .svg, .pdf, any case); InputError otherwise.
Format format_of(const std::string& path);

struct Color {
  double r = 0, g = 0, b = 0;
};

// Axis ticks at a "nice" step (1, 2 or 5 times a power of ten), about `n`
// of them from lo up to the first tick at or above hi, labelled with enough
// decimals to tell them apart (0.02 -> "0.04", 5 -> "15").
struct Ticks {
  std::vector<double> values;
  std::vector<std::string> labels;
};
Ticks ticks(double lo, double hi, int n);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // non-finite y values are skipped
  Color color;
  double width = 1.5;
  bool dots = false;
  bool right_axis = false;  // against the right-hand axis
};

struct LineChart {
  std::string title, x_label, left_label, right_label;
  std::vector<Series> series;
  double width = 800, height = 450;
};

// A matrix of weights in [0, 1] (rows x cols, row-major), coloured from
// white to dark blue relative to its largest weight, with a label per row
// (left) and per column (top, upright), as the paper's attention figures.
struct HeatMap {
  std::string title, row_axis, col_axis;
  std::vector<std::string> row_labels, col_labels;
  std::vector<float> weights;
};

// The picture as the bytes of a file of that format.
std::string render(const LineChart& chart, Format format);
std::string render(const HeatMap& map, Format format);

// render() written atomically to path, its format from its extension.
void write(const LineChart& chart, const std::string& path);
void write(const HeatMap& map, const std::string& path);

}  // namespace nmt::plot
