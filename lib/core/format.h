// Numbers for people: counts and costs with a unit prefix (41.5K, 7.6M,
// 120 MFLOP), so that tiny and huge models both print something readable.
#pragma once

#include <string>

namespace nmt {

// 3 significant digits and K/M/G/T; a unit is separated by a space:
// human_number(52352) == "52.4K", human_number(1.2e8, "FLOP") == "120 MFLOP".
std::string human_number(double x, const char* unit = "");

}  // namespace nmt
