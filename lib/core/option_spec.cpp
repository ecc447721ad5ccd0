#include "core/option_spec.h"

#include <algorithm>
#include <cmath>

#include "core/format.h"

namespace nmt {

using json = nlohmann::json;

namespace {

// 16777216 as such, 0.001 as such.
std::string number_text(double x) {
  return format_number(x == std::floor(x) && std::fabs(x) < 1e15 ? "%.0f" : "%g", x);
}

}  // namespace

std::string OptionInfo::expected() const {
  switch (type) {
    case kChoice: {
      std::string s = list ? "a list of " : choices.size() > 3 ? "one of " : "";
      for (size_t i = 0; i < choices.size(); ++i)
        s += choices.size() > 3 ? (i ? ", " : "") + choices[i]
                                : (i == 0                    ? ""
                                   : i + 1 == choices.size() ? " or "
                                                             : ", ") +
                                      json(choices[i]).dump();
      return s;
    }
    case kFlag:
      return "true or false";
    case kText:
      return "text";
    case kUnsigned:
      return "a whole number from 0 to 18446744073709551615";
    default:
      break;
  }
  const std::string lo = number_text(min.value_or(0));
  if (max) {
    const std::string hi = number_text(*max);
    return strict_min ? "a number in (" + lo + ", " + hi + "]"
                      : "a number from " + lo + " to " + hi;
  }
  return std::string(type == kInt ? "an integer " : "a number ") + (strict_min ? "> " : ">= ") + lo;
}

std::string OptionInfo::problem(const json& v) const {
  bool ok = false;
  switch (type) {
    case kChoice: {
      auto known = [this](const json& c) {
        return c.is_string() &&
               std::find(choices.begin(), choices.end(), c.get<std::string>()) != choices.end();
      };
      ok = list ? v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), known) : known(v);
      break;
    }
    case kFlag:
      ok = v.is_boolean();
      break;
    case kText:
      ok = v.is_string();
      break;
    case kUnsigned:
      ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
      break;
    case kInt:
    case kNumber:
      if (type == kInt ? v.is_number_integer() : v.is_number()) {
        const double x = v.get<double>();
        ok = std::isfinite(x) && (!min || (strict_min ? x > *min : x >= *min)) &&
             (!max || x <= *max) &&
             (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{1} << 62);
      }
      break;
  }
  if (ok) return "";
  // A number as a person writes it (0.6, not the float's 0.60000002384).
  const std::string got = v.is_number_float() ? format_number("%g", v.get<double>()) : v.dump();
  return "expected " + expected() + ", got " + got;
}

}  // namespace nmt
