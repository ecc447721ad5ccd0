// What every call of nmt's public API throws when it fails.
#pragma once

#include <stdexcept>
#include <string>

// The symbols a program may use from libnmt; everything else is hidden.
#define NMT_API __attribute__((visibility("default")))

namespace nmt::api {

// A one-line message that names the file, line or option at fault (options
// by their key, as in TranslateOptions: "beam 0: expected a number from 1
// to 1024, got 0"). The library never exits the process and never writes to
// it; what went wrong is this exception.
class NMT_API Error : public std::runtime_error {
 public:
  enum class Kind {
    usage,    // options that cannot mean anything together, or out of range
    input,    // a file or an input the caller can fix
    runtime,  // anything else (out of memory, a device that failed)
  };
  Error(Kind kind, std::string option, const std::string& what);
  Kind kind() const { return kind_; }
  // The option's key ("beam"), where one option is to blame; else empty.
  const std::string& option() const { return option_; }

 private:
  Kind kind_;
  std::string option_;
};

// nmt's version ("0.2.0").
NMT_API const char* version();

}  // namespace nmt::api
