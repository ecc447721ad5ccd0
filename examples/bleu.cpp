// Corpus BLEU of a hypothesis file against reference files, as sacreBLEU
// (and `nmt score`) prints it:  bleu HYPS REF [REF ...]
#include <nmt/nmt.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

static std::vector<std::string> read_lines(const char* path) {
  std::ifstream in(path);
  if (!in)
    throw nmt::api::Error(nmt::api::Error::Kind::input, "", std::string("cannot open ") + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bleu HYPS REF [REF ...]\n";
    return 2;
  }
  try {
    std::vector<std::vector<std::string>> refs;
    for (int i = 2; i < argc; ++i) refs.push_back(read_lines(argv[i]));
    const nmt::api::MetricScore s =
        nmt::api::corpus_score(nmt::api::Metric::bleu, read_lines(argv[1]), refs);
    std::cout << s.line << "\n";
  } catch (const nmt::api::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
