// nmt shortlist: parses its options and calls add_shortlist
// (service/shortlist_service.h), printing its lines on stderr.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "decode/shortlist_cost.h"
#include "io/text_file.h"
#include "metrics/tokenizers.h"
#include "ops/ops.h"
#include "service/shortlist_service.h"

namespace nmt::app {

namespace {

struct Opts {
  ShortlistJob job;
  int threads = 0;
};

void run(const Opts& o) {
  ops::set_num_threads(o.threads);
  add_shortlist(
      o.job,
      [](const std::string& line) {
        std::fprintf(stderr, "nmt shortlist: %s\n", name_options(line, option_name).c_str());
      },
      [](const std::string& w) { io::warn_on_stderr(name_options(w, option_name)); });
}

}  // namespace

void register_shortlist(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "shortlist",
      "Build a vocabulary shortlist for a model from parallel text and write the model with it: "
      "for each source piece, the target pieces it is translated to (from co-occurrence), plus "
      "the most frequent, so that translation computes only those columns of the output. With "
      "a validation set, its BLEU cost is measured, and translation uses it by default if that "
      "is at most " +
          shortlist_cost_limit() + " BLEU");
  cmd->add_option("-m,--model", o->job.model, "The model file")->type_name("FILE")->required();
  cmd->add_option("--src", o->job.src,
                  "Source side of the parallel text (plain or .gz; several: "
                  "several corpora)")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--tgt", o->job.tgt, "Target side, one file per --src file")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--valid-src", o->job.valid_src,
                  "Source side of a set to measure the BLEU cost on")
      ->type_name("FILE");
  cmd->add_option("--valid-tgt", o->job.valid_tgt, "Its references")->type_name("FILE");
  // As nmt train's: the SentencePiece tokenisers need a model file that
  // only nmt score takes.
  cmd->add_option("--valid-tokenize", o->job.valid_tokenize,
                  "sacreBLEU tokeniser for that BLEU: 13a, intl, char, zh, ja-mecab, none")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(metrics::kValidationTokenizerNames),
                                                     std::end(metrics::kValidationTokenizerNames))))
      ->capture_default_str();
  cmd->add_option("--beam", o->job.beam, "Beam size of the measurement")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--per-source", o->job.table.per_source,
                  "Likeliest target pieces kept per source piece (more are added where a "
                  "training pair would otherwise lose a piece)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--frequent", o->job.table.frequent,
                  "Most frequent target pieces, allowed for every sentence")
      ->check(CLI::Range(0, 10000000))
      ->default_str("an eighth of the target vocabulary");
  cmd->add_option("-o,--out", o->job.out, "The model file to write, with the shortlist")
      ->type_name("FILE")
      ->required();
  add_threads_option(cmd, o->threads);
  cmd->callback([o] { run(*o); });
}

}  // namespace nmt::app
