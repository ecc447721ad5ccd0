#include "train/curve_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace nmt {

namespace {

constexpr double kW = 800, kH = 450, kLeft = 70, kRight = 70, kTop = 40, kBottom = 50;

std::string fmt(double v, const char* f = "%.1f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// Enough decimals to tell ticks `step` apart: 0.02 -> "0.04", 5 -> "15".
std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), v);
  return buf;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks.
double nice_step(double range, int n) {
  if (range <= 0) return 1;
  const double raw = range / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

struct Axis {
  double lo = 0, hi = 1;
  void fit(const std::vector<std::pair<double, double>>& pts, bool x) {
    bool any = false;
    for (const auto& p : pts) {
      const double v = x ? p.first : p.second;
      if (!std::isfinite(v)) continue;
      if (!any) lo = hi = v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      any = true;
    }
    if (!any) lo = 0, hi = 1;
  }
  void finish(bool from_zero) {
    if (from_zero) lo = std::min(lo, 0.0);
    if (hi - lo < 1e-9) hi = lo + 1;
  }
};

std::string polyline(const std::vector<std::pair<double, double>>& pts, const Axis& xa,
                     const Axis& ya, const char* color, double width, bool dots) {
  std::ostringstream o;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xa.lo) / (xa.hi - xa.lo) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - ya.lo) / (ya.hi - ya.lo) * ph; };
  if (pts.empty()) return "";
  o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width
    << "\" points=\"";
  for (const auto& p : pts)
    if (std::isfinite(p.second)) o << fmt(px(p.first)) << "," << fmt(py(p.second)) << " ";
  o << "\"/>\n";
  if (dots)
    for (const auto& p : pts)
      if (std::isfinite(p.second))
        o << "<circle cx=\"" << fmt(px(p.first)) << "\" cy=\"" << fmt(py(p.second))
          << "\" r=\"3\" fill=\"" << color << "\"/>\n";
  return o.str();
}

}  // namespace

std::string curve_svg(const CurveData& d) {
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  std::vector<std::pair<double, double>> all_x = d.train_loss;
  all_x.insert(all_x.end(), d.valid_bleu.begin(), d.valid_bleu.end());
  Axis xa, la, ba;
  xa.fit(all_x, true);
  xa.finish(true);
  std::vector<std::pair<double, double>> losses = d.train_loss;
  losses.insert(losses.end(), d.valid_loss.begin(), d.valid_loss.end());
  la.fit(losses, false);
  la.finish(true);
  ba.fit(d.valid_bleu, false);
  ba.finish(true);
  const double ls = nice_step(la.hi - la.lo, 5), bs = nice_step(ba.hi - ba.lo, 5),
               xs = nice_step(xa.hi - xa.lo, 8);
  la.hi = std::ceil(la.hi / ls) * ls;
  ba.hi = std::ceil(ba.hi / bs) * bs;
  xa.hi = std::ceil(xa.hi / xs) * xs;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" viewBox=\"0 0 " << kW << " " << kH
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << kW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << escape(d.title) << "</text>\n";
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  // Grid and ticks.
  for (double v = la.lo; v <= la.hi + 1e-9; v += ls) {
    const double y = kTop + ph - (v - la.lo) / (la.hi - la.lo) * ph;
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << fmt(y) << "\" y2=\""
      << fmt(y) << "\" stroke=\"#eee\"/>\n";
    o << "<text x=\"" << kLeft - 6 << "\" y=\"" << fmt(y + 4)
      << "\" text-anchor=\"end\" fill=\"#1f77b4\">" << tick_label(v, ls) << "</text>\n";
  }
  if (!d.valid_bleu.empty())
    for (double v = ba.lo; v <= ba.hi + 1e-9; v += bs) {
      const double y = kTop + ph - (v - ba.lo) / (ba.hi - ba.lo) * ph;
      o << "<text x=\"" << kLeft + pw + 6 << "\" y=\"" << fmt(y + 4) << "\" fill=\"#d62728\">"
        << tick_label(v, bs) << "</text>\n";
    }
  for (double v = xa.lo; v <= xa.hi + 1e-9; v += xs) {
    const double x = kLeft + (v - xa.lo) / (xa.hi - xa.lo) * pw;
    o << "<text x=\"" << fmt(x) << "\" y=\"" << kTop + ph + 18 << "\" text-anchor=\"middle\">"
      << fmt(v, "%.0f") << "</text>\n";
  }
  o << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kH - 10
    << "\" text-anchor=\"middle\">step</text>\n";
  o << "<text transform=\"translate(18," << kTop + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\" "
       "fill=\"#1f77b4\">loss per token</text>\n";
  o << "<text transform=\"translate(" << kW - 16 << "," << kTop + ph / 2
    << ") rotate(90)\" text-anchor=\"middle\" fill=\"#d62728\">validation BLEU</text>\n";
  o << polyline(d.train_loss, xa, la, "#1f77b4", 1.2, false);
  o << polyline(d.valid_loss, xa, la, "#2ca02c", 1.5, true);
  o << polyline(d.valid_bleu, xa, ba, "#d62728", 2, true);
  // Legend.
  const double lx = kLeft + 10, ly = kTop + 14;
  const char* names[] = {"training loss", "validation loss", "validation BLEU"};
  const char* colors[] = {"#1f77b4", "#2ca02c", "#d62728"};
  for (int i = 0; i < 3; ++i) {
    o << "<line x1=\"" << lx << "\" x2=\"" << lx + 20 << "\" y1=\"" << ly + 16 * i - 4 << "\" y2=\""
      << ly + 16 * i - 4 << "\" stroke=\"" << colors[i] << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << lx + 26 << "\" y=\"" << ly + 16 * i << "\">" << names[i] << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace nmt
