#include "plot/plot.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "core/dynlib.h"
#include "core/error.h"
#include "io/output_file.h"

namespace nmt::plot {

namespace {

// The cairo functions this file calls, from libcairo.so.2 on the first picture
// (core/dynlib.h: a run that draws nothing maps none of cairo's libraries).
#define NMT_CAIRO_FUNCTIONS(X)           \
  X(cairo_arc)                           \
  X(cairo_clip)                          \
  X(cairo_create)                        \
  X(cairo_destroy)                       \
  X(cairo_fill)                          \
  X(cairo_image_surface_create)          \
  X(cairo_line_to)                       \
  X(cairo_move_to)                       \
  X(cairo_paint)                         \
  X(cairo_pdf_surface_create_for_stream) \
  X(cairo_rectangle)                     \
  X(cairo_restore)                       \
  X(cairo_rotate)                        \
  X(cairo_save)                          \
  X(cairo_select_font_face)              \
  X(cairo_set_font_size)                 \
  X(cairo_set_line_width)                \
  X(cairo_set_source_rgb)                \
  X(cairo_show_text)                     \
  X(cairo_status)                        \
  X(cairo_status_to_string)              \
  X(cairo_stroke)                        \
  X(cairo_surface_destroy)               \
  X(cairo_surface_finish)                \
  X(cairo_surface_status)                \
  X(cairo_surface_write_to_png_stream)   \
  X(cairo_svg_surface_create_for_stream) \
  X(cairo_text_extents)                  \
  X(cairo_translate)
NMT_DYNLIB_TABLE(CairoApi, NMT_CAIRO_FUNCTIONS);

const CairoApi& cx() {
  return open_library<CairoApi>(NMT_CAIRO_SONAME, "pictures (PNG, SVG, PDF)", "libcairo2");
}

constexpr const char* kFont = "sans-serif";

cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

// Draws one picture of w x h points onto a surface of the format and
// returns the file's bytes.
std::string draw_to(Format format, double w, double h, const std::function<void(cairo_t*)>& draw) {
  std::string out;
  cairo_surface_t* s = nullptr;
  switch (format) {
    case Format::PNG:
      s = cx().cairo_image_surface_create(CAIRO_FORMAT_ARGB32, static_cast<int>(std::ceil(w)),
                                          static_cast<int>(std::ceil(h)));
      break;
    case Format::SVG:
      s = cx().cairo_svg_surface_create_for_stream(append, &out, w, h);
      break;
    case Format::PDF:
      s = cx().cairo_pdf_surface_create_for_stream(append, &out, w, h);
      break;
  }
  std::unique_ptr<cairo_surface_t, decltype(cx().cairo_surface_destroy)> surface(
      s, cx().cairo_surface_destroy);
  if (cx().cairo_surface_status(s) != CAIRO_STATUS_SUCCESS)
    throw Error(std::string("cairo: ") + cx().cairo_status_to_string(cx().cairo_surface_status(s)));
  cairo_t* cr = cx().cairo_create(s);
  cx().cairo_set_source_rgb(cr, 1, 1, 1);
  cx().cairo_paint(cr);
  cx().cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  draw(cr);
  const cairo_status_t st = cx().cairo_status(cr);
  cx().cairo_destroy(cr);
  if (st != CAIRO_STATUS_SUCCESS)
    throw Error(std::string("cairo: ") + cx().cairo_status_to_string(st));
  if (format == Format::PNG) {
    if (cx().cairo_surface_write_to_png_stream(s, append, &out) != CAIRO_STATUS_SUCCESS)
      throw Error("cairo: cannot encode the PNG");
  } else {
    cx().cairo_surface_finish(s);  // flushes the vector file into `out`
  }
  return out;
}

void color(cairo_t* cr, const Color& c) { cx().cairo_set_source_rgb(cr, c.r, c.g, c.b); }

double text_width(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cx().cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

enum class Align { Left, Center, Right };

// Text with its baseline at y, rotated by `angle` radians about (x, y).
void text(cairo_t* cr, const std::string& s, double x, double y, Align align, double angle = 0) {
  cx().cairo_save(cr);
  cx().cairo_translate(cr, x, y);
  cx().cairo_rotate(cr, angle);
  const double w = text_width(cr, s);
  cx().cairo_move_to(cr, align == Align::Left ? 0 : align == Align::Center ? -w / 2 : -w, 0);
  cx().cairo_show_text(cr, s.c_str());
  cx().cairo_restore(cr);
}

// A throwaway context for measuring text before the picture's size is known.
struct Measure {
  cairo_surface_t* s = cx().cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t* cr = cx().cairo_create(s);
  explicit Measure(double size) {
    cx().cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cx().cairo_set_font_size(cr, size);
  }
  ~Measure() {
    cx().cairo_destroy(cr);
    cx().cairo_surface_destroy(s);
  }
  double widest(const std::vector<std::string>& labels) const {
    double w = 0;
    for (const auto& l : labels) w = std::max(w, text_width(cr, l));
    return w;
  }
};

struct Range {
  double lo = 0, hi = 1;
  bool any = false;
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
};

}  // namespace

Format format_of(const std::string& path) {
  const auto dot = path.find_last_of('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == "png") return Format::PNG;
  if (ext == "svg") return Format::SVG;
  if (ext == "pdf") return Format::PDF;
  throw InputError(path + ": the picture's format comes from its extension: .png, .svg or .pdf");
}

Ticks ticks(double lo, double hi, int n) {
  Ticks t;
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(n, 1), p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  const double first = std::floor(lo / step + 1e-9) * step;
  for (int i = 0;; ++i) {
    const double v = first + i * step;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), std::abs(v) < step / 2 ? 0 : v);
    t.values.push_back(v);
    t.labels.push_back(buf);
    if (v >= hi - step * 1e-9) break;
  }
  return t;
}

namespace {

// A line chart's plot area within the picture, its ticks, and where a
// point lands.
struct ChartFrame {
  double W, H, left = 70, top = 40, pw, ph;
  Ticks xt, lt, rt;  // x, left and right axes
  bool has_right;
  Color left_color, right_color;

  explicit ChartFrame(const LineChart& c) : W(c.width), H(c.height) {
    pw = W - left - 70, ph = H - top - 50;
    Range xr, lr, rr;
    xr.add(0), lr.add(0), rr.add(0);  // axes start at zero
    for (const Series& s : c.series)
      for (const auto& [x, y] : s.points) xr.add(x), (s.right_axis ? rr : lr).add(y);
    xt = ticks(xr.lo, xr.hi, 8), lt = ticks(lr.lo, lr.hi, 5), rt = ticks(rr.lo, rr.hi, 5);
    has_right = std::any_of(c.series.begin(), c.series.end(), [](const Series& s) {
      return s.right_axis && !s.points.empty();
    });
    left_color = c.series.empty() ? Color{0, 0, 0} : c.series.front().color;
    right_color = Color{0, 0, 0};
    for (const Series& s : c.series)
      if (s.right_axis) right_color = s.color;
  }
  double px(double x) const {
    return left + (x - xt.values.front()) / (xt.values.back() - xt.values.front()) * pw;
  }
  double py(const Ticks& t, double y) const {
    return top + ph - (y - t.values.front()) / (t.values.back() - t.values.front()) * ph;
  }
};

const Color kBlack{0, 0, 0};

// Grid lines, tick labels, the frame, axis labels and the title.
void draw_axes(cairo_t* cr, const LineChart& c, const ChartFrame& f) {
  cx().cairo_set_line_width(cr, 1);
  for (size_t i = 0; i < f.lt.values.size(); ++i) {
    const double y = f.py(f.lt, f.lt.values[i]);
    color(cr, Color{0.93, 0.93, 0.93});
    cx().cairo_move_to(cr, f.left, y), cx().cairo_line_to(cr, f.left + f.pw, y),
        cx().cairo_stroke(cr);
    color(cr, f.left_color);
    cx().cairo_set_font_size(cr, 12);
    text(cr, f.lt.labels[i], f.left - 6, y + 4, Align::Right);
  }
  if (f.has_right)
    for (size_t i = 0; i < f.rt.values.size(); ++i) {
      color(cr, f.right_color);
      text(cr, f.rt.labels[i], f.left + f.pw + 6, f.py(f.rt, f.rt.values[i]) + 4, Align::Left);
    }
  color(cr, kBlack);
  for (size_t i = 0; i < f.xt.values.size(); ++i)
    text(cr, f.xt.labels[i], f.px(f.xt.values[i]), f.top + f.ph + 18, Align::Center);
  color(cr, Color{0.53, 0.53, 0.53});
  cx().cairo_rectangle(cr, f.left, f.top, f.pw, f.ph), cx().cairo_stroke(cr);
  color(cr, kBlack);
  text(cr, c.x_label, f.left + f.pw / 2, f.H - 10, Align::Center);
  color(cr, f.left_color);
  text(cr, c.left_label, 18, f.top + f.ph / 2, Align::Center, -M_PI / 2);
  if (f.has_right) {
    color(cr, f.right_color);
    text(cr, c.right_label, f.W - 16, f.top + f.ph / 2, Align::Center, M_PI / 2);
  }
  color(cr, kBlack);
  cx().cairo_set_font_size(cr, 15);
  text(cr, c.title, f.W / 2, 22, Align::Center);
  cx().cairo_set_font_size(cr, 12);
}

// Each series' line (and dots), clipped to the plot area; non-finite
// points are skipped.
void draw_series(cairo_t* cr, const LineChart& c, const ChartFrame& f) {
  cx().cairo_rectangle(cr, f.left, f.top, f.pw, f.ph);
  cx().cairo_save(cr);
  cx().cairo_clip(cr);
  for (const Series& s : c.series) {
    const Ticks& yt = s.right_axis ? f.rt : f.lt;
    color(cr, s.color);
    cx().cairo_set_line_width(cr, s.width);
    bool started = false;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      if (started)
        cx().cairo_line_to(cr, f.px(x), f.py(yt, y));
      else
        cx().cairo_move_to(cr, f.px(x), f.py(yt, y));
      started = true;
    }
    cx().cairo_stroke(cr);
    if (s.dots)
      for (const auto& [x, y] : s.points)
        if (std::isfinite(y))
          cx().cairo_arc(cr, f.px(x), f.py(yt, y), 3, 0, 2 * M_PI), cx().cairo_fill(cr);
  }
  cx().cairo_restore(cr);
}

void draw_legend(cairo_t* cr, const LineChart& c, const ChartFrame& f) {
  for (size_t i = 0; i < c.series.size(); ++i) {
    const double y = f.top + 14 + 16 * static_cast<double>(i);
    color(cr, c.series[i].color);
    cx().cairo_set_line_width(cr, 2);
    cx().cairo_move_to(cr, f.left + 10, y - 4), cx().cairo_line_to(cr, f.left + 30, y - 4),
        cx().cairo_stroke(cr);
    color(cr, kBlack);
    text(cr, c.series[i].name, f.left + 36, y, Align::Left);
  }
}

}  // namespace

std::string render(const LineChart& c, Format format) {
  const ChartFrame f(c);
  return draw_to(format, f.W, f.H, [&](cairo_t* cr) {
    draw_axes(cr, c, f);
    draw_series(cr, c, f);
    draw_legend(cr, c, f);
  });
}

std::string render(const HeatMap& m, Format format) {
  const size_t R = m.row_labels.size(), C = m.col_labels.size();
  if (m.weights.size() != R * C) throw Error("heat map: one weight per row and column expected");
  const double cell = 26, font = 12, pad = 12;
  const Measure measure(font);
  const double row_w = measure.widest(m.row_labels), col_h = measure.widest(m.col_labels);
  const double title_h = m.title.empty() ? 0 : 28, bar_w = 70;
  const double left = pad + font + 8 + row_w + 6, top = title_h + pad + font + 8 + col_h + 6;
  const double W = left + cell * static_cast<double>(C) + pad + bar_w;
  const double H = top + cell * static_cast<double>(R) + pad;
  float mx = 0;
  for (float w : m.weights) mx = std::isfinite(w) ? std::max(mx, w) : mx;
  if (mx <= 0) mx = 1;
  // White to dark blue (matplotlib's "Blues" end points).
  auto shade = [](double v) {
    v = std::clamp(v, 0.0, 1.0);
    return Color{1 - v * (1 - 0.03), 1 - v * (1 - 0.19), 1 - v * (1 - 0.42)};
  };
  return draw_to(format, W, H, [&](cairo_t* cr) {
    cx().cairo_set_font_size(cr, font);
    for (size_t r = 0; r < R; ++r)
      for (size_t c = 0; c < C; ++c) {
        const float w = m.weights[r * C + c];
        color(cr, shade(std::isfinite(w) ? w / mx : 0));
        cx().cairo_rectangle(cr, left + cell * c, top + cell * r, cell, cell);
        cx().cairo_fill(cr);
      }
    color(cr, Color{0.6, 0.6, 0.6});
    cx().cairo_set_line_width(cr, 0.5);
    cx().cairo_rectangle(cr, left, top, cell * C, cell * R);
    cx().cairo_stroke(cr);
    color(cr, Color{});
    for (size_t r = 0; r < R; ++r)
      text(cr, m.row_labels[r], left - 6, top + cell * (r + 0.5) + font / 3, Align::Right);
    for (size_t c = 0; c < C; ++c)
      text(cr, m.col_labels[c], left + cell * (c + 0.5) + font / 3, top - 6, Align::Left,
           -M_PI / 2);
    text(cr, m.row_axis, pad + font, top + cell * R / 2, Align::Center, -M_PI / 2);
    text(cr, m.col_axis, left + cell * C / 2, title_h + pad + font, Align::Center);
    if (!m.title.empty()) {
      cx().cairo_set_font_size(cr, 15);
      text(cr, m.title, W / 2, pad + 12, Align::Center);
      cx().cairo_set_font_size(cr, font);
    }
    // Colour bar: 0 at the bottom, the largest weight at the top.
    const double bx = left + cell * C + pad, bh = std::max(cell * R, 60.0), by = top;
    for (int i = 0; i < 64; ++i) {
      color(cr, shade(1 - i / 63.0));
      cx().cairo_rectangle(cr, bx, by + bh * i / 64, 12, bh / 64 + 0.5);
      cx().cairo_fill(cr);
    }
    color(cr, Color{});
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", mx);
    text(cr, buf, bx + 16, by + font, Align::Left);
    text(cr, "0", bx + 16, by + bh, Align::Left);
  });
}

void write(const LineChart& chart, const std::string& path) {
  io::write_file(path, render(chart, format_of(path)));
}

void write(const HeatMap& map, const std::string& path) {
  io::write_file(path, render(map, format_of(path)));
}

}  // namespace nmt::plot
