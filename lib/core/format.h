// Numbers for people: counts and costs with a unit prefix (41.5K, 7.6M,
// 120 MFLOP), so that tiny and huge models both print something readable,
// and figures and lines in a printf format.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>

namespace nmt {

// 3 significant digits and K/M/G/T; a unit is separated by a space:
// human_number(52352) == "52.4K", human_number(1.2e8, "FLOP") == "120 MFLOP".
std::string human_number(double x, const char* unit = "");

// A count in two or three digits: 950, 52k, 1.2M (recipes' reasons).
std::string short_count(int64_t n);

// One number in a printf format ("%.2f", "%g"): for the logs' fixed-width
// figures.
std::string format_number(const char* printf_format, double x);

// A whole printf format's text, of any length.
[[gnu::format(printf, 1, 2)]] std::string printf_string(const char* format, ...);
std::string vprintf_string(const char* format, va_list args);

}  // namespace nmt
