// The config reader on arbitrary text. A config it accepts must survive a
// round trip through config_to_json unchanged.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nmt::ModelConfig c = nmt::parse_config(text, "fuzz");
    const nlohmann::json j = nmt::config_to_json(c);
    const nmt::ModelConfig again = nmt::config_from_json(j, "round trip");
    if (nmt::config_to_json(again) != j) __builtin_trap();
  } catch (const nmt::Error&) {
  }
  return 0;
}
