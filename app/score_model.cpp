// `nmt score -m`: teacher-forced log-probabilities of targets given sources,
// computed and written by the library's ScoringService.
#include "score_model.h"

#include <cstdio>

#include "commands.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "ops/ops.h"
#include "progress.h"
#include "service/scoring_service.h"

namespace nmt::app {

void run_model_score(const ModelScoreArgs& args) {
  ops::set_num_threads(args.threads);
  for (const auto& path : args.models) io::check_input_path(path, "-m");
  if (!args.src.empty()) io::check_input_path(args.src, "--src");
  if (!args.tgt.empty()) io::check_input_path(args.tgt, "--tgt");
  ScoreOptions o;
  o.models = args.models;
  o.compute = args.compute;
  o.device = open_device(args.device);
  o.batch_tokens = args.batch_tokens;
  o.alpha = args.alpha;
  o.format = args.format == "jsonl" ? ScoreFormat::jsonl : ScoreFormat::text;
  o.header = !args.no_header;
  o.word_scores = args.word_scores;
  o.summary = args.summary;
  const ScoringService service(std::move(o), io::warn_on_stderr);
  std::vector<std::string> src, tgt;
  const std::string src_path = args.src.empty() ? "-" : args.src;
  if (!args.tgt.empty()) {
    src = io::read_lines(src_path, service.text_checks(false));
    tgt = io::read_lines(args.tgt, service.text_checks(false));
  } else {  // tab-separated pairs on stdin (or in --src)
    ScoringService::split_pairs(io::read_lines(src_path, service.text_checks(true)), src, tgt);
  }
  // Every line is read before scoring starts: the share done is the pairs'.
  Progress progress("nmt score -m " + args.models[0], args.progress, /*sized=*/true,
                    /*to_stdout=*/true);
  const ScoringService::Scored scored = service.score(src, tgt, [&](int64_t done, int64_t all) {
    progress.update(done, all ? static_cast<double>(done) / static_cast<double>(all) : 1.0);
  });
  progress.finish();
  service.write(scored, [](const std::string& line) {
    std::fputs(line.c_str(), stdout);
    io::check_stdout();  // a full disk stops the run at the line it struck
  });
  io::check_stdout(/*flush=*/true);
}

}  // namespace nmt::app
