#include "io/json.h"

#include <set>
#include <vector>

#include "core/error.h"

namespace nmt::io {

namespace {

struct Refused {
  std::string why;
};

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& what, int max_depth) {
  using json = nlohmann::json;
  int depth = 0;
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto check = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (++depth > max_depth)
          throw Refused{"JSON nested deeper than " + std::to_string(max_depth) + " levels"};
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        --depth;
        break;
      case json::parse_event_t::array_end:
        --depth;
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
          throw Refused{"key \"" + parsed.get<std::string>() + "\" appears twice in one object"};
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const Refused& r) {
    throw InputError(what + ": " + r.why);
  } catch (const json::exception& e) {
    throw InputError(what + ": not valid JSON: " + e.what());
  }
}

}  // namespace nmt::io
