// `nmt score -m`: teacher-forced log-probabilities of targets given sources.
#include "score_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "decode/ensemble.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "ops/ops.h"
#include "progress.h"

namespace nmt::app {

int run_model_score(const ModelScoreArgs& args) {
  ops::set_num_threads(args.threads);
  for (const auto& path : args.models) io::check_input_path(path, "-m");
  if (!args.src.empty()) io::check_input_path(args.src, "--src");
  if (!args.tgt.empty()) io::check_input_path(args.tgt, "--tgt");
  std::vector<LoadedModel> loaded;
  loaded.reserve(args.models.size());
  const Device device = open_device(args.device);
  for (const auto& path : args.models)
    loaded.push_back(load_model(path, args.compute, nullptr, device, ShortlistLoad::Skip,
                                WeightsUse::ProductsOnly));
  const LoadedModel& m = loaded[0];
  if (const std::string why = ensemble_mismatch(loaded, args.models); !why.empty())
    throw InputError("-m " + why);
  const std::vector<const Transformer*> nets = networks(loaded);
  const int64_t max_len = m.config.max_positions - 1;
  // Lines are cut while read (a 10 MB line costs a few times the model's
  // length, not 1.7 GB), then to the model's limit in subwords.
  io::TextChecks checks;
  checks.max_line_bytes = io::kMaxBytesPerSubword * static_cast<std::size_t>(max_len);
  checks.why_limit = "the model takes at most " + std::to_string(max_len) + " subwords";
  checks.warn = io::warn_on_stderr;
  std::vector<std::string> src, tgt;
  if (!args.tgt.empty()) {
    src = io::read_lines(args.src.empty() ? "-" : args.src, checks);
    tgt = io::read_lines(args.tgt, checks);
  } else {
    // Tab-separated pairs on stdin (or in --src).
    checks.max_line_bytes *= 2;
    for (const auto& line : io::read_lines(args.src.empty() ? "-" : args.src, checks)) {
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
  std::vector<std::vector<int32_t>> s(src.size()), t(tgt.size());
  // A source's framing (</s>, and <s> for some imported models) takes
  // positions too.
  const int64_t max_src = m.config.max_positions - m.config.source_tokens(0);
  for (size_t i = 0; i < src.size(); ++i) {
    s[i] = m.src_vocab().encode(src[i]);
    t[i] = m.tgt_vocab().encode(tgt[i]);
    if (static_cast<int64_t>(s[i].size()) > max_src ||
        static_cast<int64_t>(t[i].size()) > max_len) {
      std::cerr << "nmt: warning: line " << i + 1 << " is longer than " << max_len
                << " subwords; truncated\n";
      if (static_cast<int64_t>(s[i].size()) > max_src) s[i].resize(max_src);
      if (static_cast<int64_t>(t[i].size()) > max_len) t[i].resize(max_len);
    }
  }
  // --batch-tokens may be far more than the machine holds: a batch is refused
  // before any work when it could be as large as the pairs make it (all of
  // them, padded, at most) and would not fit.
  if (const uint64_t phys = physical_memory_bytes()) {
    int64_t padded = 0;
    for (size_t i = 0; i < s.size(); ++i)
      padded += static_cast<int64_t>(std::max(s[i].size(), t[i].size())) + 1;
    const int64_t tokens = std::min<int64_t>(args.batch_tokens, padded);
    const double need = double(nets.size()) * score_batch_memory(m.config, tokens);
    if (need > double(phys))
      throw UsageError("--batch-tokens " + std::to_string(args.batch_tokens) + ": a batch of " +
                       std::to_string(tokens) + " padded tokens would need at least " +
                       gigabytes(need) + " for its logits and activations (vocabulary " +
                       std::to_string(m.config.vocab_size) + ", d_model " +
                       std::to_string(m.config.d_model) + "), more than this machine's " +
                       gigabytes(double(phys)) + "; expected at most " +
                       std::to_string(static_cast<int64_t>(double(tokens) * double(phys) / need)));
  }
  // Every line is read before scoring starts: the share done is the pairs'.
  Progress progress("nmt score -m " + args.models[0], args.progress, /*sized=*/true,
                    /*to_stdout=*/true);
  const int64_t pairs = static_cast<int64_t>(s.size());
  auto on_batch = [&](int64_t done) {
    progress.update(done, pairs ? static_cast<double>(done) / static_cast<double>(pairs) : 1.0);
  };
  const auto scores = nets.size() == 1 ? score_pairs(*m.net, s, t, args.batch_tokens, on_batch)
                                       : score_pairs(nets, s, t, args.batch_tokens, on_batch);
  progress.finish();
  if (args.summary) {
    double total = 0;
    int64_t tokens = 0;
    for (const auto& sc : scores) {
      total += sc.total();
      tokens += static_cast<int64_t>(sc.token_logprobs.size());
    }
    const double xent = tokens ? -total / static_cast<double>(tokens) : 0.0;
    std::printf("sentences %zu tokens %lld log-prob %.4f cross-entropy %.4f nats perplexity %.4f\n",
                scores.size(), static_cast<long long>(tokens), total, xent, std::exp(xent));
    io::check_stdout(/*flush=*/true);
    return 0;
  }
  // The columns: the log-probability (natural log, </s> included), its
  // token count, their ratio, and the search's normalised score
  // logprob / ((5 + tokens) / 6)^alpha, which translate --scores prints.
  SearchOptions so;
  so.alpha = static_cast<float>(args.alpha);
  const bool jsonl = args.format == "jsonl";
  if (!jsonl && !args.no_header)
    std::printf("logprob\ttokens\tlogprob_per_token\tscore%s\n",
                args.word_scores ? "\tword_scores" : "");
  for (size_t i = 0; i < scores.size(); ++i) {
    const auto& lp = scores[i].token_logprobs;
    const int64_t n = static_cast<int64_t>(lp.size());
    const double norm = scores[i].total() / length_penalty(n, so);
    std::vector<std::string> pieces;
    if (args.word_scores) {
      pieces = m.tgt_vocab().pieces(t[i]);
      pieces.push_back("</s>");
    }
    if (jsonl) {
      nlohmann::json j = {{"line", i + 1}, {"logprob", scores[i].total()},
                          {"tokens", n},   {"logprob_per_token", scores[i].mean()},
                          {"score", norm}, {"alpha", args.alpha}};
      if (args.word_scores) {
        j["pieces"] = pieces;
        j["token_logprobs"] = lp;
      }
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      io::check_stdout();  // a full disk stops the run at the line it struck
      continue;
    }
    std::printf("%.6f\t%lld\t%.6f\t%.6f", scores[i].total(), static_cast<long long>(n),
                scores[i].mean(), norm);
    if (args.word_scores) {
      std::printf("\t");
      for (size_t k = 0; k < lp.size(); ++k)
        std::printf("%s%s=%.4f", k ? " " : "", pieces[k].c_str(), lp[k]);
    }
    std::printf("\n");
    io::check_stdout();
  }
  io::check_stdout(/*flush=*/true);
  return 0;
}

}  // namespace nmt::app
