// The translation service: models loaded (one, or an ensemble), a
// Translator over them, and input lines turned into output lines in input
// order, window by window, in one process or shared over the ranks of a
// distributed run (Comm). `nmt translate` parses its options into
// TranslateOptions, makes one and hands it its inputs; any program that
// links the library can do the same.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/device.h"
#include "core/option_spec.h"
#include "decode/ensemble.h"
#include "decode/translator.h"
#include "io/text_file.h"
#include "service/html_document.h"
#include "service/requests.h"
#include "service/segments.h"

namespace nmt {

// How input lines become the segments the model translates.
enum class SplitMode {
  none,        // a line is a segment (cut into pieces only where the model cannot take it)
  sentences,   // a line's sentences are translated each on its own
  paragraphs,  // lines between blank lines are one paragraph, split into sentences
};

enum class ShortlistUse {
  automatic,  // where the model's training run turned it on
  on,         // required: a model without one is refused
  off,
};

struct TranslateOptions {
  std::vector<std::string> models;  // one, or an ensemble sharing a vocabulary
  std::string compute;              // empty: each model file's own
  Device device = Device::CPU;
  SearchOptions search;  // validated by the caller; its shortlist is the service's to set
  ShortlistUse shortlist = ShortlistUse::automatic;
  int64_t batch_tokens = 0;  // 0: auto_batch_tokens()
  int workers = 0, threads = 0;
  bool continuous = false;  // sentences join running batches
  int alignment_layer = 0;  // of alignments and attention, from 1 (0: the second-to-last)
  InputFormat input_format = InputFormat::text;
  ResultFormat output;
  int window = 1024;  // lines read ahead and sorted by length
  SplitMode split = SplitMode::none;
  // Whose sentence rules and abbreviations split sentences (BCP 47); empty:
  // English's.
  std::string source_language;
  // A multilingual model's languages, by its codes (eng_Latn, de, zho); a
  // jsonl line's "source_lang" and "target_lang" override them.
  std::string source_lang, target_lang;
  // The options the user gave, by key: a memory refusal then blames the
  // beam rather than the batch, and sampling refuses a beam given with it.
  std::set<std::string> given;
};

// Every option of translation that a user sets, in the order `nmt translate
// --help` lists them (core/option_spec.h): the search's and the service's.
const std::vector<OptionSpec<TranslateOptions>>& translate_options();

// Options by key from a JSON object ({"beam": 5, "format": "jsonl"}), each
// checked and marked given; an unknown key or a value out of range is an
// InputError about that key.
void apply_translate_json(const nlohmann::json& j, TranslateOptions& opts);
// Every option of translate_options() by key.
nlohmann::json translate_options_json(const TranslateOptions& opts);

// The combinations of options that mean nothing (sampling with a beam or a
// required shortlist, more hypotheses than the beam, n-best alignments as
// text, attention outside jsonl) and search values out of range, refused
// before a model is read (errors about the option's key). With sampling,
// search.beam becomes the rows a sentence holds: one per sample.
void check_options(TranslateOptions& opts);

// Where a stream's results go: its text, a window's lines at a time (to be
// written and flushed), and how far it is (lines done, the share of the
// input read, or -1).
// A text from another program (a service's request): lines of plain text,
// or HTML, and a multilingual model's languages (empty: the options').
struct TextRequest {
  std::string text;
  bool html = false;
  std::string source_lang, target_lang;
};

struct StreamSink {
  std::function<void(const std::string& text)> write;
  std::function<void(int64_t lines, double fraction)> progress;
};

class TranslationService {
 public:
  // Loads the models. warn: one-line warnings ("NAME line N: ...", NAME the
  // input being read). Refuses (InputError, with the option's key) an
  // ensemble whose members do not share a vocabulary, a required shortlist
  // the model lacks, and batches that could take more memory than the
  // machine has.
  TranslationService(TranslateOptions opts, std::function<void(const std::string&)> warn);
  ~TranslationService();
  TranslationService(const TranslationService&) = delete;
  TranslationService& operator=(const TranslationService&) = delete;

  // How it will translate, on lines of their own: models, compute type,
  // device, workers and threads, batches, search; the backend's numerics;
  // the prepared weights.
  std::string describe() const;
  // The (first) model's.
  const ModelConfig& model_config() const;
  // How an input file should be read: lines cut where the model could not
  // take more, jsonl records read whole.
  io::TextChecks text_checks() const;

  // One input, window by window, until it ends. With comm of more than one
  // rank, rank 0 reads and writes while every rank translates its share
  // (the other ranks call serve_windows).
  void translate(io::LineReader& in, const std::string& name, const StreamSink& sink,
                 Comm* comm = nullptr);
  // Lines held in memory, read as a file of them would be (cut where the
  // model could not take more, ill-formed UTF-8 replaced): what each line's
  // translation writes (its output lines, each ending in "\n"), in order.
  // A line may not hold "\n", except with HTML, where each is a fragment or
  // a document, written back whole.
  std::vector<std::string> translate(const std::vector<std::string>& lines);
  // Texts, each translated as a whole: a text's lines each on its own (and
  // split as the options say), HTML with its markup kept; whatever their
  // options' output format, results as the translator gives them (the
  // text, n-best, scores) with their lines joined. Ill-formed UTF-8 is
  // replaced, sentences the model cannot take are cut. segments: how many
  // the model translated. Threads may call it at once (their windows queue
  // in the translator's pool), but not beside the other translate calls.
  std::vector<TranslationResult> translate_texts(const std::vector<TextRequest>& texts,
                                                 size_t* segments = nullptr);
  // Blocks until a translator worker waits with nothing to start
  // (Translator::wait_for_idle_worker).
  void wait_for_idle_worker() const;
  // The translator's workers: how many windows can run at once.
  int workers() const;
  // Ranks other than 0: windows until rank 0 sends end_windows.
  void serve_windows(Comm& comm);
  static void end_windows(Comm& comm);

 private:
  std::vector<TranslationResult> translate_requests(std::vector<std::string>& lines,
                                                   int64_t first);
  // Requests parsed, each laid out as a line (html: as HTML).
  std::vector<TranslationResult> translate_parsed(std::vector<TranslationRequest> parsed,
                                                  const std::vector<char>& html, int64_t first,
                                                  size_t* segments);
  std::string translate_window(const std::string& packed);
  class Units;
  void translate_as_root(Units& in, const StreamSink& sink, Comm& comm);
  void check_memory() const;
  // The options' languages against the model's, before any input is read
  // (jsonl lines may still give theirs).
  void check_languages(const ModelConfig& c) const;
  // A warning about the input being read, prefixed with its name.
  void warn_input(const std::string& what) const;
  size_t text_cap() const;
  std::string why_limit() const;
  std::string model_limit() const;

  // A parsed line as the segments to translate (its requests appended to
  // `requests`), and their results joined back into the line's. A line of
  // text is one flow; HTML, its runs of text between blocks (or, not well
  // formed, its lines).
  struct Flow {
    size_t begin = 0, end = 0;  // its requests
    Segmented segments;
  };
  struct LineLayout {
    std::vector<Flow> flows;
    bool whole = true;  // one request, the line as it came
    std::optional<HtmlDocument> html;
  };
  LineLayout lay_out(TranslationRequest rq, bool html, std::vector<TranslationRequest>& requests);
  // A text's segments: its sentences (with a splitter), each cut into
  // pieces the model takes (with a warning naming the line).
  Segmented segments_of(const std::string& text, int64_t line) const;
  // A flow's requests appended, a prefix on its first.
  static Flow flow_of(Segmented segments, int64_t line, const std::string& prefix,
                      std::vector<TranslationRequest>& requests);
  TranslationResult join(const LineLayout& layout, const std::vector<TranslationRequest>& requests,
                         std::vector<TranslationResult>& results) const;
  TranslationResult join_flow(const Flow& flow, const std::vector<TranslationRequest>& requests,
                              std::vector<TranslationResult>& results, AlignedText* aligned) const;
  bool fits(const std::string& text) const;

  TranslateOptions opts_;
  std::function<void(const std::string&)> warn_;
  std::optional<SentenceSplitter> splitter_;
  static constexpr const char* kRequestName = "<request>";
  std::string input_name_;  // of the input being read, for warnings
  std::mutex prepare_mu_;   // laying requests out (the splitter)
  RequestFormat request_format_;
  std::vector<LoadedModel> models_;
  std::optional<Ensemble> ensemble_;
  std::unique_ptr<Translator> translator_;
};

}  // namespace nmt
