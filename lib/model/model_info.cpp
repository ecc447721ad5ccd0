#include "model/model_info.h"

#include <cstdarg>
#include <cstdio>

#include "core/backend.h"
#include "core/device.h"
#include "core/format.h"
#include "core/memory.h"
#include "io/json.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/shortlist.h"
#include "model/transformer.h"
#include "model/vocab.h"

namespace nmt {

// A short, stable sample of the vocabulary: pieces spread over the id range.
namespace {

nlohmann::json sample_pieces(const Vocab& v, int n) {
  nlohmann::json out = nlohmann::json::array();
  const int size = v.size();
  for (int k = 0; k < n && size > 4; ++k) {
    const int32_t id = 4 + static_cast<int32_t>((int64_t(size - 4) * k) / n);
    out.push_back(v.pieces({id})[0]);
  }
  return out;
}

}  // namespace

nlohmann::ordered_json model_info(const std::string& path) {
  io::check_input_path(path, "model");
  FileChecksum sum;
  const uint64_t before = anonymous_resident_bytes();
  LoadedModel m = load_model(path, "", &sum, Device::CPU,
                             ShortlistLoad::Read);  // every check a translation would make
  const uint64_t after = anonymous_resident_bytes();
  nlohmann::ordered_json j;
  j["file"] = path;
  j["bytes"] = sum.bytes;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", sum.crc32);
  j["crc32"] = hex;
  j["format"] = "safetensors, nmt format " + m.metadata.at("format_version");
  j["weights"] = compute_type_name(m.compute);
  j["config"] = config_to_json(m.config);
  j["parameters"] = m.net->parameter_count();
  // What the model holds once loaded, as this process saw its anonymous
  // resident memory grow: the weights as read (int8 rows, or floats),
  // vocabulary and shortlist; not the program's and libraries' pages, which
  // every model shares, nor the packed copies that products make later.
  if (before > 0 && after >= before) j["loaded_bytes"] = after - before;
  auto vocab_json = [](const Vocab& v) {
    return nlohmann::ordered_json{
        {"pieces", v.size()},
        {"kind", !v.imported()       ? "sentencepiece"
                 : v.bytes().empty() ? "tokens (tokenised text, split at spaces)"
                                     : "tokens, cut by a SentencePiece model"},
        {"sample", sample_pieces(v, 12)}};
  };
  j["vocabulary"] = vocab_json(m.tgt_vocab());
  if (m.source_vocab) j["source_vocabulary"] = vocab_json(*m.source_vocab);
  if (auto it = m.metadata.find("imported_from"); it != m.metadata.end())
    j["imported_from"] = io::parse_json(it->second, path + " (imported_from)");
  auto meta_json = [&](const char* key) -> nlohmann::json {
    auto it = m.metadata.find(key);
    if (it == m.metadata.end()) return nullptr;
    return io::parse_json(it->second, path + " (" + key + ")");
  };
  // open_model has checked that it is a number.
  if (auto it = m.metadata.find("step"); it != m.metadata.end()) j["step"] = std::stoll(it->second);
  if (auto o = meta_json("training_options"); !o.is_null()) j["training_options"] = o;
  if (auto d = meta_json("training_data"); !d.is_null()) j["training_data"] = d;
  if (auto s = meta_json("training_state"); !s.is_null()) j["checkpoint"] = s;
  if (auto r = meta_json("recipe"); !r.is_null()) j["recipe"] = r;
  if (auto d = meta_json("distillation"); !d.is_null()) j["distilled_from"] = d;
  if (m.shortlist) {
    nlohmann::json sl = meta_json("shortlist");
    if (!sl.is_object()) sl = nlohmann::json::object();
    sl["entries"] = m.shortlist->entries();
    sl["default"] = shortlist_on_by_default(m.metadata);
    j["shortlist"] = sl;
  }
  // How this machine computes with it (every model there alike).
  j["numerics"] = backend(Device::CPU).numerics();
  return j;
}

namespace {

// printf onto the end of out.
[[gnu::format(printf, 2, 3)]] void print(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  out += vprintf_string(format, args);
  va_end(args);
}

// The config's line, and one of what an imported model has differently.
void print_config(std::string& out, const nlohmann::ordered_json& c) {
  const bool tied = c["tie_embeddings"].get<bool>(), tied_out = c["tie_output"].get<bool>();
  print(out,
        "config       %s: %d+%d layers, d_model %d, d_ff %d (%s), %d heads, %s-LN%s, %s positions "
        "(max %d), %s embeddings\n",
        c["name"].get<std::string>().c_str(), c["encoder_layers"].get<int>(),
        c["decoder_layers"].get<int>(), c["d_model"].get<int>(), c["d_ff"].get<int>(),
        c["activation"].get<std::string>().c_str(), c["heads"].get<int>(),
        c["norm"].get<std::string>().c_str(),
        c["norm"] == "pre" && !c["final_norm"].get<bool>() ? " without final norms" : "",
        c["positional"].get<std::string>().c_str(), c["max_positions"].get<int>(),
        tied       ? "tied"
        : tied_out ? "separate source, tied target and output"
                   : "separate");
  // What only an imported model has differently from the paper's.
  std::string extra;
  auto add = [&](const std::string& s) { extra += (extra.empty() ? "" : ", ") + s; };
  if (c["src_vocab_size"].get<int>())
    add("source vocabulary " + std::to_string(c["src_vocab_size"].get<int>()) + ", target " +
        std::to_string(c["vocab_size"].get<int>()));
  if (c["output_bias"].get<bool>()) add("output bias");
  if (!c["scale_embeddings"].get<bool>()) add("unscaled embeddings");
  if (c["decoder_start"] == "zero") add("decoder starts from a zero embedding");
  if (!c["output_unk"].get<bool>()) add("never outputs <unk>");
  if (c["source_bos"].get<bool>() || !c["source_eos"].get<bool>())
    add(std::string("sources framed as ") + (c["source_bos"].get<bool>() ? "<s> " : "") + "text" +
        (c["source_eos"].get<bool>() ? " </s>" : ""));
  const int ids[] = {c["pad_id"].get<int>(), c["unk_id"].get<int>(), c["bos_id"].get<int>(),
                     c["eos_id"].get<int>()};
  if (ids[0] != 0 || ids[1] != 1 || ids[2] != 2 || ids[3] != 3) {
    const char* names[] = {"pad", "unk", "bos", "eos"};
    std::string t;
    for (int i = 0; i < 4; ++i)
      t += std::string(i ? " " : "") + names[i] + " " +
           (ids[i] < 0 ? "none" : std::to_string(ids[i]));
    add("token ids " + t);
  }
  if (!extra.empty()) print(out, "             %s\n", extra.c_str());
  if (c.contains("src_lang") && c["src_lang"].is_string() && c.contains("tgt_lang") &&
      c["tgt_lang"].is_string())
    print(out, "pair         %s -> %s\n", c["src_lang"].get<std::string>().c_str(),
          c["tgt_lang"].get<std::string>().c_str());
  if (c.contains("languages") && c["languages"].is_object()) {
    std::string codes;
    for (const auto& [code, id] : c["languages"].items()) codes += " " + code;
    const std::string src = c.value("source_language", std::string("none")),
                      tgt = c.value("target_language", std::string("forced"));
    print(out, "languages    %zu (source: %s; target: %s):%s\n", c["languages"].size(),
          src == "none"     ? "not used"
          : src == "before" ? "token before the source"
                            : "token after the source",
          tgt == "forced" ? "first output token" : "token before the source", codes.c_str());
  }
}

// How the model was trained: data, options, checkpoint, shortlist, recipe.
void print_training(std::string& out, const nlohmann::ordered_json& j) {
  if (j.contains("training_data")) {
    const auto& d = j["training_data"];
    // One file (a string) or several corpora (a list).
    auto files = [&](const char* key) {
      const auto it = d.find(key);
      if (it == d.end()) return std::string("?");
      if (it->is_string()) return it->get<std::string>();
      std::string s;
      if (it->is_array())
        for (const auto& f : *it)
          if (f.is_string()) s += (s.empty() ? "" : ", ") + f.get<std::string>();
      return s.empty() ? std::string("?") : s;
    };
    print(out, "trained on   %s | %s: %lld of %lld pairs, %s target tokens\n",
          files("train_src").c_str(), files("train_tgt").c_str(), d.value("train_pairs", 0LL),
          d.value("train_lines", 0LL), human_number(d.value("train_target_tokens", 0.0)).c_str());
  }
  if (j.contains("training_options"))
    print(out, "options      %s\n", j["training_options"].dump().c_str());
  if (j.contains("checkpoint")) print(out, "checkpoint   %s\n", j["checkpoint"].dump().c_str());
  if (j.contains("shortlist")) {
    const auto& sl = j["shortlist"];
    std::string line = std::to_string(sl.value("entries", 0LL)) + " entries (the " +
                       std::to_string(sl.value("per_source", 0)) +
                       " likeliest of each source piece, " +
                       std::to_string(sl.value("frequent", 0)) + " frequent pieces), from " +
                       sl.value("built_from", std::string("?"));
    if (sl.contains("measured_on") && sl["measured_on"].is_object()) {
      const auto& m = sl["measured_on"];
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "; BLEU %.2f with it, %.2f without, on %lld sentences at beam %d",
                    m.value("bleu_shortlist", 0.0), m.value("bleu", 0.0), m.value("sentences", 0LL),
                    m.value("beam", 0));
      line += buf;
    }
    line += sl.value("default", false) ? "; on by default" : "; used only with {shortlist} on";
    print(out, "shortlist    %s\n", line.c_str());
  }
  if (j.contains("recipe") && j["recipe"].is_array())
    for (const auto& c : j["recipe"]) {
      if (!c.is_object()) continue;
      const auto& v = c.value("value", nlohmann::json());
      const std::string value = v.is_string() ? v.get<std::string>() : v.dump();
      print(out, "recipe       %s %s: %s\n", c.value("key", std::string("?")).c_str(),
            value.c_str(), c.value("reason", std::string()).c_str());
    }
}

}  // namespace

std::string model_info_text(const nlohmann::ordered_json& j) {
  std::string out;
  print(out, "file         %s\n", j["file"].get<std::string>().c_str());
  print(out, "format       %s, %s weights, %s, crc32 %s\n", j["format"].get<std::string>().c_str(),
        j["weights"].get<std::string>().c_str(),
        human_number(j["bytes"].get<double>(), "B").c_str(), j["crc32"].get<std::string>().c_str());
  print_config(out, j["config"]);
  print(out, "parameters   %s (%lld)\n", human_number(j["parameters"].get<double>()).c_str(),
        j["parameters"].get<long long>());
  if (j.contains("loaded_bytes"))
    print(out, "memory       %s once loaded (weights as read, vocabulary%s)\n",
          human_number(j["loaded_bytes"].get<double>(), "B").c_str(),
          j.contains("shortlist") ? ", shortlist" : "");
  auto print_vocab = [&out](const char* label, const nlohmann::ordered_json& v) {
    std::string sample;
    for (const auto& p : v["sample"]) sample += (sample.empty() ? "" : " ") + p.get<std::string>();
    const std::string kind = v["kind"].get<std::string>();
    print(out, "%s %d %s, e.g. %s\n", label, v["pieces"].get<int>(),
          kind == "sentencepiece" ? "SentencePiece pieces" : kind.c_str(), sample.c_str());
  };
  print_vocab(j.contains("source_vocabulary") ? "target vocab" : "vocabulary  ", j["vocabulary"]);
  if (j.contains("source_vocabulary")) print_vocab("source vocab", j["source_vocabulary"]);
  if (j.contains("imported_from"))
    print(out, "imported     %s\n", j["imported_from"].value("summary", std::string()).c_str());
  if (j.contains("distilled_from") && j["distilled_from"].is_object())
    print(out, "distilled    %s\n", j["distilled_from"].value("summary", std::string()).c_str());
  if (j.contains("step")) print(out, "step         %lld\n", j["step"].get<long long>());
  print_training(out, j);
  print(out, "numerics     %s (on this machine)\n", j["numerics"].get<std::string>().c_str());
  return out;
}

}  // namespace nmt
