// See report_table.h; the steps are tabulate's: type each column, format
// numbers with floatfmt, strip and align every line of a cell, widen to the
// header plus 2, pad by one, rule the grid, right-strip each line.
#include "metrics/report_table.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "metrics/ngrams.h"

namespace nmt::metrics {

namespace {

std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::size_t b = 0;
  while (b < s.size()) {
    std::size_t e = s.find('\n', b);
    if (e == std::string::npos) e = s.size();
    lines.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return lines;
}

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const std::size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// tabulate's _isint / _isnumber for the plain decimal strings sacreBLEU
// puts in cells.
bool parses(const std::string& s, bool integer) {
  const std::string t = strip(s);
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  if (integer)
    (void)std::strtoll(t.c_str(), &end, 10);
  else
    (void)std::strtod(t.c_str(), &end);
  return end && *end == '\0' && t.find_first_of("xXpP") == std::string::npos;
}

std::string pad_center(const std::string& s, std::size_t width) {
  const std::size_t w = code_points(s);
  if (w >= width) return s;
  const std::size_t left = (width - w) / 2;
  return std::string(left, ' ') + s + std::string(width - w - left, ' ');
}

std::string pad_left(const std::string& s, std::size_t width) {
  const std::size_t w = code_points(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}

std::string rule(const std::vector<std::size_t>& widths, const char* begin, const char* fill,
                 const char* sep, const char* end) {
  std::string line = begin;
  for (std::size_t c = 0; c < widths.size(); ++c) {
    if (c) line += sep;
    for (std::size_t i = 0; i < widths[c] + 2; ++i) line += fill;
  }
  return line + end;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string fancy_grid(const std::vector<std::string>& headers,
                       const std::vector<std::vector<std::string>>& columns, int float_decimals) {
  const std::size_t n_cols = columns.size();
  const std::size_t n_rows = n_cols ? columns[0].size() : 0;
  std::vector<std::vector<std::vector<std::string>>> cells(n_cols);  // [c][r] lines
  std::vector<std::size_t> widths(n_cols);
  for (std::size_t c = 0; c < n_cols; ++c) {
    const auto& col = columns[c];
    const bool ints =
        std::all_of(col.begin(), col.end(), [](const std::string& s) { return parses(s, true); });
    const bool nums = ints || std::all_of(col.begin(), col.end(),
                                          [](const std::string& s) { return parses(s, false); });
    widths[c] = code_points(headers[c]) + 2;  // tabulate's MIN_PADDING
    for (const std::string& raw : col) {
      std::string v = raw;
      if (nums && !ints) v = format_fixed(std::strtod(strip(raw).c_str(), nullptr), float_decimals);
      std::vector<std::string> lines = split_lines(strip(v));
      for (std::string& l : lines) widths[c] = std::max(widths[c], code_points(l));
      cells[c].push_back(std::move(lines));
    }
  }
  auto align = [](std::size_t c, const std::string& s, std::size_t w) {
    return c == 0 ? pad_left(s, w) : pad_center(s, w);
  };
  auto row_lines = [&](const std::vector<std::vector<std::string>>& row) {
    std::size_t height = 0;
    for (const auto& cell : row) height = std::max(height, cell.size());
    std::string out;
    for (std::size_t l = 0; l < height; ++l) {
      std::string line = "│";
      for (std::size_t c = 0; c < n_cols; ++c) {
        const std::string text =
            l < row[c].size() ? align(c, row[c][l], widths[c]) : std::string(widths[c], ' ');
        line += " " + text + " │";
      }
      out += rstrip(line) + "\n";
    }
    return out;
  };
  std::string out = rule(widths, "╒", "═", "╤", "╕") + "\n";
  std::vector<std::vector<std::string>> header_row;
  for (const std::string& h : headers) header_row.push_back({h});
  out += row_lines(header_row);
  out += rule(widths, "╞", "═", "╪", "╡") + "\n";
  for (std::size_t r = 0; r < n_rows; ++r) {
    if (r) out += rule(widths, "├", "─", "┼", "┤") + "\n";
    std::vector<std::vector<std::string>> row;
    for (std::size_t c = 0; c < n_cols; ++c) row.push_back(cells[c][r]);
    out += row_lines(row);
  }
  out += rule(widths, "╘", "═", "╧", "╛");
  return out;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";  // as json.dumps writes them
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // shortest round trip: "-d.ddde+XX"
  const std::size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + ebuf;
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  const auto int_len = static_cast<std::size_t>(exp + 1);
  if (digits.size() <= int_len)
    return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

void dump_python(const nlohmann::ordered_json& v, int indent, int depth, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent * (depth + 1)), ' ');
  const std::string close_pad(static_cast<std::size_t>(indent * depth), ' ');
  if (v.is_object()) {
    if (v.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ",\n";
      first = false;
      out += pad + nlohmann::ordered_json(it.key()).dump(-1, ' ', true) + ": ";
      dump_python(it.value(), indent, depth + 1, out);
    }
    out += "\n" + close_pad + "}";
  } else if (v.is_array()) {
    if (v.empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ",\n";
      out += pad;
      dump_python(v[i], indent, depth + 1, out);
    }
    out += "\n" + close_pad + "]";
  } else if (v.is_number_float()) {
    out += python_float_repr(v.get<double>());
  } else {
    out += v.dump(-1, ' ', true);  // strings (ensure_ascii), integers, true/false/null
  }
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  dump_python(value, indent, 0, out);
  return out;
}

}  // namespace nmt::metrics
