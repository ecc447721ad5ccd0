// Translation, as `nmt translate` does it: one model or an ensemble loaded
// once, then lines in and output lines out, in order, batched and shared
// among workers, whatever the batching the same bytes `nmt translate`
// writes for the same options.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nmt/error.h"

namespace nmt::api {

enum class InputFormat {
  text,   // a line is a source text
  tsv,    // source<TAB>prefix: the translation starts with the prefix
  jsonl,  // {"text": ..., "prefix": ..., "constraints": [...]}
};
enum class OutputFormat {
  text,   // the translation (with scores, alignments or n-best as asked)
  jsonl,  // {"line", "translation", "score", "logprob", "tokens", ...}
  html,   // the input is HTML, written back with its text translated
};
enum class Shortlist {
  automatic,  // where the model's training run measured it to cost little
  on,         // required: a model without one is refused
  off,
};

// The options of `nmt translate`, by the same names (--n-best is n_best);
// constructed with its defaults.
struct NMT_API TranslateOptions {
  TranslateOptions();
  std::string compute_type;  // "f32", "bf16", "int8"; empty: the model's
  std::string device;        // "cpu", "cuda"
  int beam;
  double alpha;      // GNMT length penalty exponent
  bool length_norm;  // divide scores by length instead
  int n_best;
  std::string sampling;  // "topk:K", "topp:P", "full"; empty: search
  double sampling_temperature;
  uint64_t seed;        // of sampling
  double max_length_a;  // max output length = a * source length + b
  int max_length_b;
  Shortlist shortlist;
  int64_t batch_tokens;  // 0: chosen by the workers' threads
  bool continuous_batching;
  int window;   // lines read ahead and sorted by length
  int threads;  // of each worker; 0: the cores shared out
  int workers;  // 0: min(cores, 4)
  InputFormat input_format;
  // "none": a line is a segment; "sentences": its sentences are translated
  // each on its own and joined; "paragraphs": lines between blank lines are
  // one paragraph, one output each (see nmt translate --split); empty: the
  // format's own ("none" for text, "sentences" for HTML).
  std::string split;
  std::string source_language;  // its sentence rules ("de"); empty: English's
  OutputFormat format;
  bool scores, alignments, attention;
  int alignment_layer;  // from 1; 0: the second-to-last
};

// One source's translation as data (what translate_batch gives), whatever
// the output format asked of translate().
struct TranslationResult {
  // Best first: n_best of them (one without n-best); of an empty source,
  // one empty hypothesis scored 0.
  std::vector<std::string> hypotheses;
  std::vector<double> scores;  // each hypothesis's search score (as --scores writes it)
  double logprob = 0;          // the best's, natural log, </s> included
  int64_t tokens = 0;          // the best's subword tokens, </s> included
  // With alignments: the best's word alignment, (source word, target word)
  // pairs as text output writes them.
  std::vector<std::pair<int, int>> alignment;
  // With attention: the best's pieces (each ending in "</s>") and its
  // cross-attention, a row per target piece, a column per source piece
  // (no rows where the line was translated in pieces, as in jsonl).
  std::vector<std::string> source_pieces, target_pieces;
  std::vector<std::vector<float>> attention;
};

class NMT_API Translator {
 public:
  // Loads the models (several: an ensemble sharing one vocabulary) and
  // checks the options. warn: one-line warnings about the input (a line
  // cut, ill-formed UTF-8); none when empty.
  explicit Translator(const std::vector<std::string>& models, const TranslateOptions& options = {},
                      std::function<void(const std::string&)> warn = {});
  ~Translator();
  Translator(Translator&&) noexcept;
  Translator& operator=(Translator&&) noexcept;

  // Each line's output as `nmt translate` writes it, without its last line
  // break: the translation, or n lines with text n-best, or one JSON
  // object. A line may not hold a line break.
  std::vector<std::string> translate(const std::vector<std::string>& lines);
  // Sources as data: each a line of raw text (SentencePiece runs here), or
  // with the html format an HTML fragment or document, translated as
  // `nmt translate` translates it with these options. input_format does
  // not apply (a source is never a TSV or JSON record). Unlike the other
  // translate calls, several threads may call it at once: their batches
  // share the workers.
  std::vector<TranslationResult> translate_batch(const std::vector<std::string>& sources);
  // A stream to its end (plain or gzip), written as each window of lines is
  // translated.
  void translate(std::istream& in, std::ostream& out);
  // A file ("-": standard input), plain or gzip, read as `nmt translate -i`
  // reads it: a line typed into a pipe is answered at once.
  void translate_file(const std::string& path, std::ostream& out);
  // A file to a file, as `nmt translate -i input -o output` writes it (gzip
  // where the name ends in .gz; a replaced file appears whole, when done).
  // Returns the lines (units of the input) translated.
  int64_t translate_file(const std::string& input, const std::string& output);

  // How it translates: models, compute type, device, workers and threads,
  // batches, search and the backend's numerics, a line each.
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt::api
