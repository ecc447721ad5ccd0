// Translates standard input to standard output as `nmt translate` does:
//   translate MODEL [KEY=VALUE ...]
// with KEY one of beam, n_best, compute_type, format (text or jsonl),
// scores (0 or 1), and lines=1 to translate all the lines in one call
// instead of as a stream.
#include <nmt/nmt.h>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int number(const std::string& key, const std::string& value) {
  size_t used = 0;
  try {
    const int n = std::stoi(value, &used);
    if (used == value.size()) return n;
  } catch (const std::logic_error&) {
  }
  throw std::invalid_argument(key + "=" + value + ": expected a number");
}

// KEY=VALUE into the options; false where it says to translate lines.
bool set_option(const std::string& arg, nmt::api::TranslateOptions& options) {
  const auto eq = arg.find('=');
  const std::string key = arg.substr(0, eq),
                    value = eq == std::string::npos ? "" : arg.substr(eq + 1);
  if (key == "beam")
    options.beam = number(key, value);
  else if (key == "n_best")
    options.n_best = number(key, value);
  else if (key == "compute_type")
    options.compute_type = value;
  else if (key == "scores")
    options.scores = value == "1";
  else if (key == "format")
    options.format =
        value == "jsonl" ? nmt::api::OutputFormat::jsonl : nmt::api::OutputFormat::text;
  else if (key == "lines")
    return value != "1";
  else
    throw std::invalid_argument("unknown option " + key);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: translate MODEL [KEY=VALUE ...]\n";
    return 2;
  }
  nmt::api::TranslateOptions options;
  bool stream = true;
  try {
    for (int i = 2; i < argc; ++i) stream = set_option(argv[i], options) && stream;
  } catch (const std::invalid_argument& e) {
    std::cerr << "translate: " << e.what() << "\n";
    return 2;
  }
  try {
    nmt::api::Translator translator({argv[1]}, options, [](const std::string& warning) {
      std::cerr << "warning: " << warning << "\n";
    });
    if (stream) {
      translator.translate(std::cin, std::cout);
      return 0;
    }
    std::vector<std::string> input;
    for (std::string line; std::getline(std::cin, line);) input.push_back(line);
    for (const std::string& output : translator.translate(input)) std::cout << output << "\n";
  } catch (const nmt::api::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.kind() == nmt::api::Error::Kind::usage ? 2 : 1;
  }
  return 0;
}
