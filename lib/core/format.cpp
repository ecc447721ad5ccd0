#include "core/format.h"

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

}  // namespace nmt
