#include "train/training_data.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <numeric>

#include "core/error.h"
#include "core/format.h"
#include "core/memory.h"
#include "io/text_file.h"
#include "model/vocab.h"

namespace nmt {

using json = nlohmann::json;

std::string train_files(const TrainOptions& opts) {
  std::string s;
  for (const std::string& f : opts.train_src) s += (s.empty() ? "" : ", ") + f;
  return s;
}

void TrainingData::read(const TrainOptions& opts, int64_t max_len, const Log& log) {
  // Lines longer than any pair the model can take are cut while read (and
  // then skipped as too long), so memory follows the work.
  io::TextChecks checks;
  checks.max_line_bytes = io::kMaxBytesPerSubword * static_cast<size_t>(max_len);
  checks.why_limit = "the model takes at most " + std::to_string(max_len) + " subwords";
  checks.warn = [&log](const std::string& w) { log("warning: " + w); };
  for (size_t k = 0; k < opts.train_src.size(); ++k) {
    std::vector<std::string> s, t;
    read_parallel(opts.train_src[k], opts.train_tgt[k], s, t, checks);
    record_digest("train_src", opts.train_src[k], s);
    record_digest("train_tgt", opts.train_tgt[k], t);
    file_starts_.push_back(static_cast<int64_t>(src.size()));
    if (src.empty()) {
      src = std::move(s);
      tgt = std::move(t);
    } else {  // the strings move, their text is not copied
      src.insert(src.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
      tgt.insert(tgt.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
    }
  }
  if (!opts.valid_src.empty()) {
    read_parallel(opts.valid_src, opts.valid_tgt, vsrc, vtgt, checks);
    record_digest("valid_src", opts.valid_src, vsrc);
    record_digest("valid_tgt", opts.valid_tgt, vtgt);
  }
  train_lines = static_cast<int64_t>(src.size());
}

void TrainingData::record_digest(const char* role, const std::string& file,
                                 const std::vector<std::string>& lines) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(lines_digest(lines)));
  digests.push_back({{"role", role}, {"file", file}, {"lines", lines.size()}, {"digest", hex}});
}

namespace {

// "a.en: no usable sentence pairs (3 longer than 255 subwords, 2 with an
// empty side)", with what an empty side is where the text was read.
InputError no_usable_pairs(const std::string& files, const char* what, int64_t too_long,
                           int64_t empty, int64_t max_len, const char* empty_means = "") {
  return InputError(files + ": no usable sentence pairs" + what + " (" + std::to_string(too_long) +
                    " longer than " + std::to_string(max_len) + " subwords, " +
                    std::to_string(empty) + " with an empty side" + empty_means + ")");
}

}  // namespace

void TrainingData::select(const TrainOptions& opts, int64_t max_len) {
  // A side with nothing SentencePiece keeps (spaces, control or zero-width
  // characters) is an empty side: refused now if nothing else is left, not
  // by SentencePiece ending the process, nor by a validation set that scores
  // every model alike.
  constexpr const char* kEmpty = ": blank, or only spaces, control or zero-width characters";
  usable_pairs = clear_unusable_pairs(src, tgt);
  if (usable_pairs == 0)
    throw no_usable_pairs(train_files(opts), "", 0, train_lines, max_len, kEmpty);
  if (!opts.valid_src.empty() && clear_unusable_pairs(vsrc, vtgt) == 0)
    throw no_usable_pairs(opts.valid_src, " in the validation set", 0,
                          static_cast<int64_t>(vsrc.size()), max_len, kEmpty);
  line_of_.resize(src.size());
  std::iota(line_of_.begin(), line_of_.end(), int64_t{0});
  if (opts.filter) {
    duplicates = drop_duplicate_pairs(src, tgt, line_of_);
    usable_pairs -= duplicates;
  }
}

void TrainingData::encode(const Vocab& vocab, const TrainOptions& opts, int64_t max_len,
                          const Log& log) {
  const bool has_valid = !opts.valid_src.empty();
  // Pairs too long for the model are skipped and counted.
  train = encode_corpus_releasing(vocab, src, tgt, max_len);
  for (int64_t& l : train.line) l = line_of_[static_cast<size_t>(l)];
  std::vector<int64_t>().swap(line_of_);
  if (opts.filter) ratio = filter_length_ratio(train);
  if (has_valid) valid = encode_corpus(vocab, vsrc, vtgt, max_len);
  if (train.size() == 0)
    throw no_usable_pairs(train_files(opts), "", train.skipped_long, train.skipped_empty, max_len);
  if (has_valid && valid.size() == 0)
    throw no_usable_pairs(opts.valid_src, " in the validation set", valid.skipped_long,
                          valid.skipped_empty, max_len);
  // A batch holds at least one pair; a budget below the widest pair would
  // silently give such pairs a batch of their own.
  int64_t widest_line = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    const int64_t w = static_cast<int64_t>(std::max(train.src[i].size(), train.tgt[i].size())) + 1;
    if (w > widest) widest = w, widest_line = train.line[i];
  }
  if (opts.batch_tokens < widest && (!opts.recipe || opts.was_given("batch_tokens")))
    throw OptionError("{batch_tokens} " + std::to_string(opts.batch_tokens) +
                      " is smaller than the widest sentence pair (" + std::to_string(widest) +
                      " subwords with </s>, " + where(widest_line, opts) +
                      "): a batch must hold at least one pair; use " + "{batch_tokens} " +
                      std::to_string(widest) + " or more");
  std::string filtered = "; {no_filter}: duplicates and length ratios kept";
  if (opts.filter)
    filtered = "; dropped " + std::to_string(duplicates) + " exact duplicate pairs and " +
               std::to_string(ratio.dropped) + " of implausible length ratio (target/source " +
               "subwords outside " + format_number("%.2f", ratio.lo) + "-" +
               format_number("%.2f", ratio.hi) + ", " + format_number("%g", ratio.factor) +
               "x off the median " + format_number("%.2f", ratio.median) + ", pairs of " +
               std::to_string(ratio.min_longer) + "+ subwords)";
  const uint64_t peak = peak_resident_bytes();
  log("training data: " + std::to_string(train.size()) + " of " + std::to_string(train_lines) +
      " pairs from " + std::to_string(opts.train_src.size()) + " corpus file pair(s), " +
      std::to_string(train.tgt_tokens()) + " target tokens; skipped " +
      std::to_string(train.skipped_long) + " longer than " + std::to_string(max_len) +
      " subwords and " + std::to_string(train.skipped_empty) + " with an empty side" + filtered +
      (peak ? "; peak memory " + format_number("%.0f", double(peak) / (1 << 20)) + " MiB" : ""));
  if (has_valid)
    log("validation data: " + std::to_string(valid.size()) + " of " + std::to_string(vsrc.size()) +
        " pairs; skipped " + std::to_string(valid.skipped_long) + " too long, " +
        std::to_string(valid.skipped_empty) + " empty");
}

std::string TrainingData::where(int64_t line, const TrainOptions& opts) const {
  size_t k = 0;
  while (k + 1 < file_starts_.size() && file_starts_[k + 1] <= line) ++k;
  const int64_t first = file_starts_.empty() ? 0 : file_starts_[k];
  return "line " + std::to_string(line - first + 1) + " of " +
         (opts.train_src.empty() ? std::string("?") : opts.train_src[k]);
}

json TrainingData::summary(const TrainOptions& opts, const ModelConfig& cfg, int vocab_size) const {
  json files = options_to_json(opts);
  return {{"train_src", files["train_src"]},
          {"train_tgt", files["train_tgt"]},
          {"train_lines", train_lines},
          {"train_pairs", train.size()},
          {"train_target_tokens", train.tgt_tokens()},
          {"skipped_long", train.skipped_long},
          {"skipped_empty", train.skipped_empty},
          {"max_subwords", cfg.max_positions - 1},
          {"valid_src", opts.valid_src},
          {"valid_tgt", opts.valid_tgt},
          {"valid_pairs", valid.size()},
          {"valid_skipped_long", valid.skipped_long},
          {"valid_skipped_empty", valid.skipped_empty},
          {"vocab_size", vocab_size},
          {"filtered", opts.filter},
          {"duplicates_dropped", duplicates},
          {"ratio_dropped", ratio.dropped},
          {"ratio_kept", json::array({ratio.lo, ratio.hi})}};
}

}  // namespace nmt
