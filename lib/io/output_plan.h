// Where a command's outputs go, planned before any is written: one file (or
// standard output) for every input, or one file per input in a folder,
// named after the input. Every output is checked against every input and
// model (by device and inode), and two inputs may not write one output.
#pragma once

#include <string>
#include <vector>

namespace nmt::io {

struct OutputPlan {
  std::string output;         // a file; empty or "-": standard output
  bool output_given = false;  // an empty output is then an error, not stdout
  std::string output_dir;     // or a folder (created later) of one output per input
  std::string suffix;         // the outputs' extension in it; empty: ".hyp" appended
};

// test.en.gz -> test.en.hyp, or with suffix "de" -> test.de: ".gz" and the
// language extension give way to the suffix.
std::string output_name(const std::string& input, const std::string& suffix);

// One output path per input ("" for standard output). Errors name the
// options by key: {output}, {output_dir}, {suffix}, {model}, {input}.
std::vector<std::string> plan_outputs(const OutputPlan& plan,
                                      const std::vector<std::string>& inputs,
                                      const std::vector<std::string>& models);

}  // namespace nmt::io
