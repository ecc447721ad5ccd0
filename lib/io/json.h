// JSON from outside the process (configs, model-file headers, the configs
// stored in model files, training logs) is parsed through here: nesting is
// limited, since nlohmann::json copies, compares and dumps recursively and a
// value nested a hundred thousand deep would overflow the stack, and a key
// given twice in one object is an error rather than a silent last-one-wins.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace nmt::io {

// Deep enough for any config or header nmt writes (they nest 3 levels).
inline constexpr int kMaxJsonDepth = 64;

// Throws nmt::InputError("WHAT: not valid JSON: ...", "WHAT: JSON nested
// deeper than N levels", "WHAT: key "K" appears twice").
nlohmann::json parse_json(std::string_view text, const std::string& what,
                          int max_depth = kMaxJsonDepth);

}  // namespace nmt::io
