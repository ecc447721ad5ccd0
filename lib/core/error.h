// Library errors. The library never exits the process: it throws nmt::Error
// with a one-line message that names the file, key or line at fault, and only
// app/ turns that into a message on stderr and a non-zero exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace nmt {

// Visible by default, so that their type information is one across the CUDA
// library (lib/cuda, opened with dlopen, built with hidden visibility) and
// the binary: an Error thrown there is caught here by type.
#define NMT_ERROR_VISIBLE __attribute__((visibility("default")))

class NMT_ERROR_VISIBLE Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown for input the user can fix (bad option, bad file); same handling.
class NMT_ERROR_VISIBLE InputError : public Error {
 public:
  using Error::Error;
};

// A command line that cannot mean anything (an output that is an input or a
// directory, options that contradict each other): exits 2, as argparse and
// most Unix tools do, where errors in the input itself exit 1.
class NMT_ERROR_VISIBLE UsageError : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace nmt
