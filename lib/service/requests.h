// Requests in, results out: the line formats of a translation service.
// Input: plain text, tsv (source<TAB>prefix) or jsonl ({"text": ...,
// "prefix": ..., "constraints": [...]}); output: text (with scores or
// alignments, or Moses' n-best lines) or jsonl (scores, n-best,
// alignments, attention). `nmt translate` reads and writes these; so may
// any program that links the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "decode/translator.h"

namespace nmt {

enum class InputFormat { text, tsv, jsonl };
// html: the input is HTML too, translated with its markup kept
// (service/html_document.h).
enum class OutputFormat { text, jsonl, html };

// "text", "tsv", "jsonl", "html" (and back); an unknown name is an InputError
// naming the option key input_format or format.
InputFormat parse_input_format(const std::string& name);
OutputFormat parse_output_format(const std::string& name);
const char* format_name(InputFormat f);
const char* format_name(OutputFormat f);

// A warning about input line line_no (1-based), one line of text.
using LineWarning = std::function<void(int64_t line_no, const std::string& what)>;

// How a line becomes a request. A tsv or jsonl line is read whole (up to a
// much larger cap) and parsed before its fields are cut, as a text line is,
// at what the model could take (at a character's start), so that a long
// record is translated in part rather than broken into a parse error.
struct RequestFormat {
  InputFormat format = InputFormat::text;
  size_t max_text_bytes = 0;  // 0: fields are not cut (text: the reader cuts)
  std::string why_limit;      // said when a field is cut
};

// One input line as a request. A line that does not parse is warned about
// and skipped (an empty output line).
TranslationRequest parse_request(std::string line, const RequestFormat& f, int64_t line_no,
                                 const LineWarning& warn);

// What a result's line holds besides the translation.
struct ResultFormat {
  OutputFormat format = OutputFormat::text;
  bool scores = false;      // text: the search score first, a TAB after it
  bool alignments = false;  // text: " ||| 0-0 1-2 ..."; jsonl: "alignment"
  bool attention = false;   // jsonl: the cross-attention map and pieces
  int n_best = 1;           // text: Moses' n-best lines; jsonl: "n_best"
};

// The lines of results, first_line the 1-based number of the first.
std::string format_results(const std::vector<TranslationResult>& results, const ResultFormat& f,
                           int64_t first_line);

}  // namespace nmt
