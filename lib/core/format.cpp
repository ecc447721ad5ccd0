#include "core/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace nmt {

std::string human_number(double x, const char* unit) {
  const char* prefix[] = {"", "K", "M", "G", "T"};
  int p = 0;
  while (std::fabs(x) >= 999.5 && p < 4) x /= 1000, ++p;
  const bool spaced = unit[0] != '\0';
  char buf[48];
  std::snprintf(buf, sizeof buf, p == 0 ? "%.0f%s%s%s" : "%.3g%s%s%s", x, spaced ? " " : "",
                prefix[p], unit);
  return buf;
}

std::string format_number(const char* printf_format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, x);
  return buf;
}

std::string short_count(int64_t n) {
  if (n >= 1000000) return format_number("%.1fM", double(n) / 1e6);
  if (n >= 10000) return format_number("%.0fk", double(n) / 1e3);
  return std::to_string(n);
}

std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string out = vprintf_string(format, args);
  va_end(args);
  return out;
}

std::string vprintf_string(const char* format, va_list args) {
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), format, again);
  va_end(again);
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

}  // namespace nmt
