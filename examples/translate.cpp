// Translates standard input to standard output as `nmt translate` does:
//   translate MODEL [KEY=VALUE ...]
// with KEY one of beam, n_best, compute_type, format (text or jsonl),
// scores (0 or 1), and lines=1 to translate all the lines in one call
// instead of as a stream.
#include <nmt/nmt.h>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: translate MODEL [KEY=VALUE ...]\n";
    return 2;
  }
  try {
    nmt::api::TranslateOptions options;
    bool lines = false;
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto eq = arg.find('=');
      const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
      if (key == "beam") options.beam = std::stoi(value);
      else if (key == "n_best") options.n_best = std::stoi(value);
      else if (key == "compute_type") options.compute_type = value;
      else if (key == "scores") options.scores = value == "1";
      else if (key == "format")
        options.format = value == "jsonl" ? nmt::api::OutputFormat::jsonl : nmt::api::OutputFormat::text;
      else if (key == "lines") lines = value == "1";
      else {
        std::cerr << "translate: unknown option " << key << "\n";
        return 2;
      }
    }
    nmt::api::Translator translator({argv[1]}, options,
                                    [](const std::string& w) { std::cerr << "warning: " << w << "\n"; });
    if (!lines) {
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
