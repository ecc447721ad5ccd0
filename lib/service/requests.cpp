#include "service/requests.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json.h"

namespace nmt {

InputFormat parse_input_format(const std::string& name) {
  if (name == "text") return InputFormat::text;
  if (name == "tsv") return InputFormat::tsv;
  if (name == "jsonl") return InputFormat::jsonl;
  throw about_option<InputError>("input_format", name + " is not text, tsv or jsonl");
}

OutputFormat parse_output_format(const std::string& name) {
  if (name == "text") return OutputFormat::text;
  if (name == "jsonl") return OutputFormat::jsonl;
  if (name == "html") return OutputFormat::html;
  throw about_option<InputError>("format", name + " is not text, jsonl or html");
}

const char* format_name(InputFormat f) {
  return f == InputFormat::tsv ? "tsv" : f == InputFormat::jsonl ? "jsonl" : "text";
}

const char* format_name(OutputFormat f) {
  return f == OutputFormat::jsonl ? "jsonl" : f == OutputFormat::html ? "html" : "text";
}

namespace {

void cut_field(std::string& field, const char* what, const RequestFormat& f, int64_t line_no,
               const LineWarning& warn) {
  if (f.max_text_bytes == 0 || field.size() <= f.max_text_bytes) return;
  size_t n = f.max_text_bytes;
  while (n > 0 && (static_cast<unsigned char>(field[n]) & 0xC0) == 0x80) --n;
  warn(line_no, std::string(what) + " is " + std::to_string(field.size()) +
                    " bytes; only the first " + std::to_string(n) + " are read (" + f.why_limit +
                    ")");
  field.resize(n);
}

// {"text": ..., "prefix": ..., "constraints": [...]} into rq; the reason it
// does not parse, or "".
std::string read_json_request(const std::string& line, TranslationRequest& rq) {
  nlohmann::json j;
  try {
    j = io::parse_json(line, "the line");
  } catch (const InputError& e) {
    return e.what();
  }
  if (!j.is_object()) return "expected a JSON object like {\"text\": \"...\"}";
  for (const auto& [key, value] : j.items()) {
    if (key == "text" && value.is_string()) {
      rq.source = value.get<std::string>();
    } else if (key == "prefix" && value.is_string()) {
      rq.prefix = value.get<std::string>();
    } else if (key == "constraints" && value.is_array()) {
      for (const auto& c : value) {
        if (!c.is_string()) return "\"constraints\" must be a list of strings";
        rq.constraints.push_back(c.get<std::string>());
      }
    } else if ((key == "source_lang" || key == "target_lang") && value.is_string()) {
      (key == "source_lang" ? rq.source_lang : rq.target_lang) = value.get<std::string>();
    } else if (key == "text" || key == "prefix" || key == "constraints" || key == "source_lang" ||
               key == "target_lang") {
      return "\"" + key + "\" must be a " + (key == "constraints" ? "list of strings" : "string");
    } else {
      return "unknown key \"" + key +
             "\" (expected text, prefix, constraints, source_lang, target_lang)";
    }
  }
  return j.contains("text") ? "" : "no \"text\"";
}

}  // namespace

TranslationRequest parse_request(std::string line, const RequestFormat& f, int64_t line_no,
                                 const LineWarning& warn) {
  TranslationRequest rq;
  auto skip = [&](const std::string& why) {
    // One write, so that ranks' warnings do not interleave mid-line.
    warn(line_no, why + "; an empty line is written instead");
    TranslationRequest skipped;
    skipped.skip = true;
    return skipped;
  };
  if (f.format == InputFormat::text) {
    rq.source = std::move(line);
    return rq;
  }
  if (f.format == InputFormat::tsv) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) return skip("no TAB (tsv input is source<TAB>prefix)");
    rq.source = line.substr(0, tab);
    rq.prefix = line.substr(tab + 1);
    cut_field(rq.source, "the source", f, line_no, warn);
    cut_field(rq.prefix, "the prefix", f, line_no, warn);
  } else {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return rq;  // empty in, empty out
    if (const std::string why = read_json_request(line, rq); !why.empty()) return skip(why);
    cut_field(rq.source, "\"text\"", f, line_no, warn);
    cut_field(rq.prefix, "\"prefix\"", f, line_no, warn);
  }
  // An empty source translates to an empty line; a prefix or constraints
  // given with it would be dropped without a word.
  if (rq.source.find_first_not_of(" \t\r") != std::string::npos ||
      (rq.prefix.empty() && rq.constraints.empty()))
    return rq;
  return skip(std::string("the source is empty, so its ") +
              (rq.prefix.empty() ? "constraints are" : "prefix is") + " not used");
}

namespace {

nlohmann::json attention_json(const TranslationResult& r) {
  auto with_end = [](std::vector<std::string> pieces) {
    pieces.push_back("</s>");
    return pieces;
  };
  nlohmann::json weights = nlohmann::json::array();
  for (int64_t t = 0; t < r.attention.rows; ++t) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t s = 0; s < r.attention.cols; ++s)
      row.push_back(std::round(static_cast<double>(r.attention.at(t, s)) * 1e4) / 1e4);
    weights.push_back(row);
  }
  return {
      {"source", with_end(r.src_pieces)}, {"target", with_end(r.out_pieces)}, {"weights", weights}};
}

// A translation as a field of a line whose fields ' ||| ' separates (Moses'
// n-best, alignments): its "|||" is written "&#124;&#124;&#124;", Moses'
// escape for '|', so that the line splits where it should.
std::string moses_field(const std::string& text) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t bars = text.find("|||", at);
    out.append(text, at, bars == std::string::npos ? std::string::npos : bars - at);
    if (bars == std::string::npos) return out;
    out += "&#124;&#124;&#124;";
    at = bars + 3;
  }
}

std::string jsonl_result(const TranslationResult& r, const ResultFormat& f, int64_t line_no) {
  nlohmann::json j = {{"line", line_no},
                      {"translation", r.text},
                      {"score", r.score},
                      {"logprob", r.logprob},
                      {"tokens", r.tokens}};
  if (!r.constraints_met) j["constraints_met"] = false;
  if (f.alignments) j["alignment"] = format_alignment(r.alignment);
  if (!r.parts.empty()) {
    nlohmann::json parts = nlohmann::json::array();
    for (const TranslationResult::Part& p : r.parts)
      parts.push_back({{"source", p.source},
                       {"translation", p.translation},
                       {"score", p.score},
                       {"confidence", p.confidence}});
    j["sentences"] = std::move(parts);
  }
  if (f.attention) j["attention"] = r.text.empty() ? nlohmann::json() : attention_json(r);
  if (f.n_best > 1) {
    nlohmann::json nb = nlohmann::json::array();
    for (const auto& [text, score] : r.n_best)
      nb.push_back({{"translation", text}, {"score", score}});
    j["n_best"] = nb;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string format_result(const TranslationResult& r, const ResultFormat& f, int64_t line_no) {
  if (f.format == OutputFormat::jsonl) return jsonl_result(r, f, line_no);
  if (f.n_best > 1) {
    // Moses-style n-best: line ||| translation ||| score, best first; lines
    // count from 1 here as in every other format.
    std::string out;
    for (const auto& [text, score] : r.n_best)
      out += std::to_string(line_no) + " ||| " + moses_field(text) + " ||| " +
             std::to_string(score) + "\n";
    if (r.n_best.empty()) out += std::to_string(line_no) + " ||| ||| 0\n";
    return out;
  }
  return (f.scores ? std::to_string(r.score) + "\t" : "") +
         (f.alignments ? moses_field(r.text) + " ||| " + format_alignment(r.alignment) : r.text) +
         "\n";
}

}  // namespace

std::string format_results(const std::vector<TranslationResult>& results, const ResultFormat& f,
                           int64_t first_line) {
  std::string text;
  for (size_t i = 0; i < results.size(); ++i)
    text += format_result(results[i], f, first_line + static_cast<int64_t>(i));
  return text;
}

}  // namespace nmt
