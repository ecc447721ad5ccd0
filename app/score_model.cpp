// `nmt score -m`: teacher-forced log-probabilities of targets given sources.
#include "score_model.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/cpu_kernels.h"
#include "core/error.h"
#include "decode/scorer.h"
#include "io/text_file.h"
#include "model/loaded_model.h"

namespace nmt::app {

int run_model_score(const ModelScoreArgs& args) {
  cpu::set_num_threads(args.threads);
  LoadedModel m = load_model(args.model);
  std::vector<std::string> src, tgt;
  if (!args.tgt.empty()) {
    src = io::read_lines(args.src.empty() ? "-" : args.src);
    tgt = io::read_lines(args.tgt);
  } else {
    // Tab-separated pairs on stdin (or in --src).
    for (const auto& line : io::read_lines(args.src.empty() ? "-" : args.src)) {
      const auto tab = line.find('\t');
      if (tab == std::string::npos)
        throw InputError("line " + std::to_string(src.size() + 1) +
                         ": expected source<TAB>target (or give --src and --tgt)");
      src.push_back(line.substr(0, tab));
      tgt.push_back(line.substr(tab + 1));
    }
  }
  if (src.size() != tgt.size())
    throw InputError("source has " + std::to_string(src.size()) + " lines but target has " +
                     std::to_string(tgt.size()));
  const int64_t max_len = m.config.max_positions - 1;
  std::vector<std::vector<int32_t>> s(src.size()), t(tgt.size());
  for (size_t i = 0; i < src.size(); ++i) {
    s[i] = m.vocab.encode(io::sanitize_utf8(src[i]));
    t[i] = m.vocab.encode(io::sanitize_utf8(tgt[i]));
    if (static_cast<int64_t>(s[i].size()) > max_len ||
        static_cast<int64_t>(t[i].size()) > max_len) {
      std::cerr << "nmt: warning: line " << i + 1 << " is longer than " << max_len
                << " subwords; truncated\n";
      if (static_cast<int64_t>(s[i].size()) > max_len) s[i].resize(max_len);
      if (static_cast<int64_t>(t[i].size()) > max_len) t[i].resize(max_len);
    }
  }
  const auto scores = score_pairs(*m.net, s, t, args.batch_tokens);
  double total = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    total += scores[i].total();
    tokens += static_cast<int64_t>(scores[i].token_logprobs.size());
    if (args.summary) continue;
    std::printf("%.6f\t%.6f", scores[i].total(), scores[i].mean());
    if (args.word_scores) {
      auto pieces = m.vocab.pieces(t[i]);
      pieces.push_back("</s>");
      std::printf("\t");
      for (size_t k = 0; k < scores[i].token_logprobs.size(); ++k)
        std::printf("%s%s=%.4f", k ? " " : "", pieces[k].c_str(), scores[i].token_logprobs[k]);
    }
    std::printf("\n");
  }
  if (args.summary) {
    const double xent = tokens ? -total / tokens : 0.0;
    std::printf("sentences %zu tokens %lld log-prob %.4f cross-entropy %.4f nats perplexity %.4f\n",
                scores.size(), static_cast<long long>(tokens), total, xent, std::exp(xent));
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace nmt::app
