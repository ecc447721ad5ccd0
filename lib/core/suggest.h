// "Did you mean ...?": the closest of a set of known names to a mistyped
// one, for unknown config keys, options and subcommands.
#pragma once

#include <string>
#include <vector>

namespace nmt {

// Damerau-Levenshtein distance (adjacent transpositions count as one edit).
int edit_distance(const std::string& a, const std::string& b);

// The known name closest to `typed`, or "" when none is close enough to be
// a plausible typo (at most a third of the longer name's letters differ,
// or one is a prefix of the other).
std::string closest_name(const std::string& typed, const std::vector<std::string>& known);

// " (did you mean X?)" or "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& known);

}  // namespace nmt
