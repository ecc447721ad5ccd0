#include "nmt/error.h"

#include <utility>

namespace nmt::api {

Error::Error(Kind kind, std::string option, const std::string& what)
    : std::runtime_error(what), kind_(kind), option_(std::move(option)) {}

const char* version() { return NMT_VERSION; }

}  // namespace nmt::api
