// nmt convert: another toolkit's model as an ordinary .nmt file.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "convert/convert.h"
#include "io/output_file.h"
#include "io/text_file.h"

namespace nmt::app {

void register_convert(CLI::App& app) {
  struct Opts {
    std::string src, out;
    convert::ConvertOptions c;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "convert",
      "Convert a Transformer trained by another toolkit into an nmt model file: a Marian .npz "
      "(OPUS-MT's, with its vocab.yml and source.spm/target.spm) or a CTranslate2 model "
      "directory (model.bin, config.json, its vocabularies), or a Hugging Face MarianMT, M2M-100 "
      "or NLLB-200 directory (config.json, model.safetensors or pytorch_model.bin, tokeniser "
      "files). Every nmt command then uses it. A "
      "CTranslate2 model carries no tokeniser: without --spm, nmt translate then reads and "
      "writes space-separated tokens. Options the model has that nmt cannot run exactly are "
      "refused by name.");
  cmd->add_option("src", o->src,
                  "The model: a Marian .npz file or a directory holding one, or a "
                  "CTranslate2 model directory")
      ->type_name("PATH")
      ->required();
  cmd->add_option("-o,--out", o->out, "The .nmt file to write")->type_name("FILE")->required();
  cmd->add_option("--from", o->c.from, "What SRC is (default: detected)")
      ->check(CLI::IsMember({"marian", "ctranslate2", "hf"}));
  cmd->add_option("--spm", o->c.spm,
                  "SentencePiece model(s) that cut text into the vocabulary's pieces: one for "
                  "both sides, or the source's then the target's (Marian: default source.spm and "
                  "target.spm beside the model)")
      ->type_name("FILE")
      ->expected(1, 2);
  cmd->add_option("--vocab", o->c.vocab,
                  "Marian: the vocabulary (.yml, .json, .spm or one token per line): one for "
                  "both sides, or the source's then the target's (default: decoder.yml's, or "
                  "the *vocab.yml beside the model)")
      ->type_name("FILE")
      ->expected(1, 2);
  cmd->callback([o] {
    io::check_output_path(o->out, "-o");
    std::vector<io::NamedPath> inputs = {{"src", o->src}};
    for (const auto& s : o->c.spm) inputs.push_back({"--spm", s});
    for (const auto& v : o->c.vocab) inputs.push_back({"--vocab", v});
    io::check_not_an_input({"-o", o->out}, inputs);
    for (const auto& s : o->c.spm) io::check_input_path(s, "--spm", /*nonempty=*/true);
    for (const auto& v : o->c.vocab) io::check_input_path(v, "--vocab", /*nonempty=*/true);
    const std::string from = o->c.from.empty() ? convert::detect(o->src) : o->c.from;
    if ((from == "ctranslate2" || from == "hf") && !std::filesystem::is_directory(o->src))
      throw InputError(
          o->src +
          (from == "hf"
               ? ": a Hugging Face model is a directory (config.json, weights, tokeniser files)"
               : ": a CTranslate2 model is a directory (model.bin, config.json, "
                 "vocabularies)"));
    if (from == "hf" && (!o->c.vocab.empty() || !o->c.spm.empty()))
      throw UsageError("--spm, --vocab: a Hugging Face model directory holds its tokeniser");
    if (from == "ctranslate2" && !o->c.vocab.empty())
      throw UsageError("--vocab: a CTranslate2 model directory holds its vocabularies");
    convert::ConvertOptions c = o->c;
    c.from = from;
    const convert::Imported m = convert::import_model(o->src, c);
    // The files found beside the model (model.bin, source.spm, decoder.yml,
    // ...) are inputs too.
    std::vector<io::NamedPath> read;
    for (const auto& f : m.read_from) read.push_back({"converted model's", f});
    io::check_not_an_input({"-o", o->out}, read);
    for (const std::string& w : m.warnings) io::warn_on_stderr(w);
    convert::write_imported(m, o->out);
    std::fprintf(stderr, "nmt convert: wrote %s (%s; %s)\n", o->out.c_str(),
                 m.provenance.value("summary", std::string()).c_str(), m.config.name.c_str());
  });
}

}  // namespace nmt::app
