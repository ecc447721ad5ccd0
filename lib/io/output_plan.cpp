#include "io/output_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "io/output_file.h"

namespace nmt::io {

namespace fs = std::filesystem;

std::string output_name(const std::string& input, const std::string& suffix) {
  std::string b = fs::path(input).filename().string();
  if (b.size() > 3 && b.compare(b.size() - 3, 3, ".gz") == 0) b.resize(b.size() - 3);
  if (suffix.empty()) return b + ".hyp";
  const auto dot = b.find_last_of('.');
  if (dot != std::string::npos && dot > 0) b.resize(dot);
  return b + (suffix[0] == '.' ? "" : ".") + suffix;
}

std::vector<std::string> plan_outputs(const OutputPlan& p, const std::vector<std::string>& inputs,
                                      const std::vector<std::string>& models) {
  std::vector<std::string> outs;
  if (p.suffix.find('/') != std::string::npos)
    throw UsageError("{suffix} " + p.suffix + " holds a '/'; it names files inside {output_dir}");
  struct stat st;
  if (!p.output_dir.empty()) {
    if (::stat(p.output_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw InputError("{output_dir} " + p.output_dir + " exists and is not a directory");
    for (const auto& in : inputs)
      outs.push_back(
          (fs::path(p.output_dir) / output_name(in == "-" ? "stdin" : in, p.suffix)).string());
  } else {
    if (p.output_given && p.output.empty()) check_output_path(p.output, "{output}");
    outs.assign(inputs.size(), "");
    if (!p.output.empty() && p.output != "-") outs.assign(1, p.output);
  }
  std::vector<NamedPath> read;
  for (const auto& m : models) read.push_back({"{model}", m});
  for (const auto& in : inputs) read.push_back({"{input}", in});
  if (std::find(outs.begin(), outs.end(), "") != outs.end()) check_stdout_not_an_input(read);
  // The folder's names too, where it exists already: a name that is a
  // directory is refused before the first input is translated.
  const bool check_paths = p.output_dir.empty() || ::stat(p.output_dir.c_str(), &st) == 0;
  const std::string option = p.output_dir.empty() ? "{output}" : "{output_dir}";
  std::map<std::string, std::string> claimed;  // normalised output -> its input
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].empty()) continue;
    if (check_paths) check_output_path(outs[i], option, Content::Text);
    std::error_code ec;
    std::string key = fs::weakly_canonical(fs::absolute(outs[i]), ec).string();
    if (ec) key = outs[i];
    const std::string& input = inputs[std::min(i, inputs.size() - 1)];
    if (auto it = claimed.find(key); it != claimed.end())
      throw UsageError("inputs " + it->second + " and " + input + " would both be written to " +
                       outs[i] + "; give them different names or use {suffix}");
    claimed[key] = input;
    check_not_an_input({option, outs[i]}, read);
  }
  return outs;
}

}  // namespace nmt::io
