// The search's options, declared once (core/option_spec.h): what `nmt
// translate` offers of them, their ranges, which validate() checks, and
// their help.
#include <stdexcept>

#include "core/error.h"
#include "core/format.h"
#include "decode/search.h"

namespace nmt {

using json = nlohmann::json;

namespace {

using Spec = OptionSpec<SearchOptions>;

Spec with_sampling(Spec o) {
  o.needs = "sampling";
  return o;
}

Spec sampling_option() {
  Spec o;
  o.key = "sampling";
  o.type = OptionInfo::kText;
  o.help =
      "Sample instead of searching (back-translation): topk:K from the K most probable tokens, "
      "topp:P from the fewest reaching probability P (nucleus), or full; with {beam} 1. A line's "
      "samples depend only on {seed}, its line number and its text";
  o.get = [](const SearchOptions& s) { return json(sampling_spec(s)); };
  o.set = [](SearchOptions& s, const json& v) {
    if (v.get<std::string>().empty())
      s.sampling.clear();
    else
      parse_sampling(v.get<std::string>(), s);
  };
  return o;
}

std::vector<Spec> make_table() {
  using S = SearchOptions;
  constexpr auto kInt = OptionInfo::kInt, kNumber = OptionInfo::kNumber;
  return {
      with_range(member_option("beam", kInt, &S::beam, "Beam size (1: greedy)"), 1, 1024),
      with_range(member_option("alpha", kNumber, &S::alpha, "GNMT length penalty exponent"), 0, 10),
      member_option("length_norm", OptionInfo::kFlag, &S::length_norm,
                    "Divide scores by length instead of the GNMT penalty"),
      with_range(member_option(
                     "n_best", kInt, &S::n_best,
                     "Print this many hypotheses per input (<= beam); with {sampling}, this many "
                     "independent samples"),
                 1, 1024),
      sampling_option(),
      with_sampling(
          with_range(member_option("sampling_temperature", kNumber, &S::temperature,
                                   "Divide the logits by this before sampling (below 1: sharper)"),
                     0, 100, /*strict_min=*/true)),
      with_sampling(member_option("seed", OptionInfo::kUnsigned, &S::seed, "Seed of {sampling}")),
      with_range(member_option("max_length_a", kNumber, &S::max_len_a,
                               "Max output length = a * source length + b"),
                 0, 100),
      with_range(member_option("max_length_b", kInt, &S::max_len_b, "See {max_length_a}"), 0,
                 100000),
  };
}

}  // namespace

const std::vector<OptionSpec<SearchOptions>>& search_options() {
  static const std::vector<Spec> table = make_table();
  return table;
}

std::string sampling_spec(const SearchOptions& s) {
  if (s.sampling == "topk") return "topk:" + std::to_string(s.sampling_k);
  if (s.sampling == "topp") return "topp:" + format_number("%g", s.sampling_p);
  return s.sampling;
}

void validate(const SearchOptions& o) {
  for (const Spec& spec : search_options())
    if (spec.type != OptionInfo::kText)
      if (const std::string why = spec.problem(spec.get(o)); !why.empty())
        throw about_option<UsageError>(spec.key, ": " + why);
  if (o.sampling.empty()) return;
  auto in = [](double x, double lo, double hi) { return x >= lo && x <= hi; };  // false for NaN
  // The part of the option at fault ("topk:K"), then what of it.
  auto fail = [](const char* part, const std::string& range, double x) {
    throw about_option<UsageError>(
        "sampling", std::string(part) + ": expected " + range + ", got " + format_number("%g", x));
  };
  if (o.sampling != "topk" && o.sampling != "topp" && o.sampling != "full")
    throw about_option<UsageError>("sampling",
                                   ": expected topk:K, topp:P or full, got \"" + o.sampling + "\"");
  if (o.sampling == "topk" && !in(o.sampling_k, 1, 1000000))
    fail("topk:K", "K from 1 to 1000000", o.sampling_k);
  if (o.sampling == "topp" && !(o.sampling_p > 0 && o.sampling_p <= 1))
    fail("topp:P", "P in (0, 1]", o.sampling_p);
}

void parse_sampling(const std::string& spec, SearchOptions& o) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon),
                    arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto bad = [&] {
    return about_option<UsageError>(
        "sampling", spec + ": expected topk:K (K from 1 to 1000000), topp:P (P in (0, 1]) or full");
  };
  o.sampling = kind;
  try {
    size_t used = 0;
    if (kind == "topk" && !arg.empty()) {
      const long k = std::stol(arg, &used);
      if (used != arg.size() || k < 1 || k > 1000000) throw bad();
      o.sampling_k = static_cast<int>(k);
    } else if (kind == "topp" && !arg.empty()) {
      const double p = std::stod(arg, &used);
      if (used != arg.size() || !(p > 0 && p <= 1)) throw bad();
      o.sampling_p = static_cast<float>(p);
    } else if (!(kind == "full" && arg.empty())) {
      throw bad();
    }
  } catch (const std::logic_error&) {
    throw bad();
  }
}

}  // namespace nmt
