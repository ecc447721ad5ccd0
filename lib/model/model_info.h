// What `nmt info` says of a model file, as JSON: the file (bytes, CRC-32,
// format), the weights' type, config, parameters, memory once loaded, the
// vocabularies with a sample of pieces, what it was imported from or how it
// was trained (options, data, recipe, checkpoint state), its shortlist and
// this machine's numerics. Loading it makes every check a translation
// would.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace nmt {

nlohmann::ordered_json model_info(const std::string& path);
// The same as lines of text ("config       ..."), options named {key}.
std::string model_info_text(const nlohmann::ordered_json& info);

}  // namespace nmt
