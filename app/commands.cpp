// Subcommand registry, the option helpers every subcommand shares, and the
// two commands that describe a model: `nmt summary` (size and forward-pass
// cost of a config or model) and `nmt info` (what is inside a model file).
#include "commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/backend.h"
#include "core/device.h"
#include "core/format.h"
#include "core/memory.h"
#include "decode/shortlist_cost.h"
#include "io/json.h"
#include "io/output_file.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "model/config.h"
#include "model/forward_timing.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/model_info.h"
#include "model/transformer.h"
#include "nmt_build_info.h"
#include "ops/ops.h"
#include "serve/http_server.h"
#include "service/translation_service.h"
#include "train/options.h"

namespace nmt::app {

int& exit_code() {
  static int code = 0;
  return code;
}

void exit_without_teardown() {
  io::check_stdout(/*flush=*/true);
  std::cerr.flush();
  std::_Exit(exit_code());
}

CLI::Validator finite_range(double lo, double hi) {
  const std::string range =
      "[" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(s, x)) return "Value " + s + " is not a number";
        if (!(x >= lo && x <= hi)) return "Value " + s + " not in range " + range;  // NaN too
        return "";
      },
      "FLOAT in " + range);
}

namespace {

// The check of a table's option: CLI11's own where it has one (the range
// shown as "INT in [1 - 1024]"), else the option's, naming the value as typed.
CLI::Validator table_check(const OptionInfo& o) {
  using T = OptionInfo;
  if (o.type == T::kChoice) return CLI::IsMember(o.choices);
  if (o.type == T::kUnsigned) return unsigned_integer();
  if (o.max && !o.strict_min)
    return o.type == T::kInt ? CLI::Validator(CLI::Range(static_cast<int64_t>(*o.min),
                                                         static_cast<int64_t>(*o.max)))
                             : finite_range(*o.min, *o.max);
  const bool integer = o.type == T::kInt;
  std::ostringstream desc;
  desc << (integer ? "INT " : "FLOAT ");
  if (o.max)
    desc << "in (" << *o.min << " - " << *o.max << "]";
  else
    desc << (o.strict_min ? "> " : ">= ") << o.min.value_or(0);
  return CLI::Validator(
      [&o, integer](std::string& s) -> std::string {
        nlohmann::json v;
        int64_t i = 0;
        double x = 0;
        if (integer && CLI::detail::lexical_cast(s, i))
          v = i;
        else if (CLI::detail::lexical_cast(s, x) && std::isfinite(x))
          v = x;
        else
          v = s;
        return o.problem(v).empty() ? "" : "expected " + o.expected() + ", got " + s;
      },
      desc.str());
}

}  // namespace

CLI::Option* add_table_option(CLI::App* cmd, const OptionInfo& o, const std::string& shown,
                              std::function<void(const nlohmann::json&)> set,
                              const std::string& names) {
  using T = OptionInfo;
  const std::string flag = names.empty() ? flag_of(o.key) : names,
                    help = name_options(o.help, flag_of);
  CLI::Option* opt = nullptr;
  switch (o.type) {
    case T::kFlag:
      if (flag.find('!') != std::string::npos)  // --x,!--no-x: the last one named wins
        return cmd->add_flag_function(
            flag, [set](int64_t n) { set(n > 0); }, help);
      return cmd->add_flag_callback(
          flag, [set] { set(true); }, help);
    case T::kInt:
      opt = cmd->add_option_function<int64_t>(flag, set, help);
      break;
    case T::kUnsigned:
      opt = cmd->add_option_function<uint64_t>(flag, set, help);
      break;
    case T::kNumber:
      opt = cmd->add_option_function<double>(flag, set, help);
      break;
    case T::kChoice:
      if (o.list) {
        opt = cmd->add_option_function<std::vector<std::string>>(
                     flag, [set](const std::vector<std::string>& v) { set(v); }, help)
                  ->expected(1, static_cast<int>(o.choices.size()));
        break;
      }
      [[fallthrough]];
    case T::kText:
      opt = cmd->add_option_function<std::string>(flag, set, help);
      break;
  }
  const bool unbounded = (o.type == T::kInt || o.type == T::kNumber) && !o.min && !o.max;
  if (o.type != T::kText && !unbounded) opt->check(table_check(o));
  if (o.path) opt->type_name("FILE");
  if (!shown.empty()) opt->default_str(shown);
  if (!o.needs.empty()) opt->needs(cmd->get_option(flag_of(o.needs)));
  return opt;
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const size_t b = s.find_first_not_of(" \t");
        if (b == std::string::npos || s.find_first_not_of("0123456789", b) != std::string::npos ||
            s.size() - b > 20 || (s.size() - b == 20 && s.compare(b, 20, "18446744073709551615") > 0))
          return "Value " + s + " is not a whole number from 0 to 18446744073709551615";
        return "";
      },
      "UINT");
}

CLI::Option* add_threads_option(CLI::App* cmd, int& threads) {
  return cmd->add_option("--threads", threads, "CPU threads (0: all cores)")
      ->check(CLI::Range(0, 1024));
}

CLI::Option* add_compute_type_option(CLI::App* cmd, std::string& compute, const std::string& help) {
  return cmd->add_option("--compute-type", compute, help)
      ->check(CLI::IsMember({"f32", "float32", "bf16", "bfloat16", "int8"}));
}

void add_translate_table(CLI::App* cmd, const std::set<std::string>& skip,
                         const std::function<void(const std::string&)>& before,
                         std::function<void(const std::string&, const nlohmann::json&)> set) {
  const TranslateOptions defaults;
  for (const OptionSpec<TranslateOptions>& spec : translate_options()) {
    if (skip.count(spec.key)) continue;
    if (before) before(spec.key);
    const nlohmann::json d = spec.get(defaults);
    const std::string shown = d.is_string()         ? d.get<std::string>()
                              : d.is_number_float() ? CLI::detail::to_string(d.get<float>())
                              : d.is_boolean()      ? ""
                                                    : d.dump();
    add_table_option(cmd, spec, shown,
                     [set, key = spec.key](const nlohmann::json& v) { set(key, v); });
  }
}

CLI::Option* add_device_option(CLI::App* cmd, std::string& device) {
  return cmd
      ->add_option("--device", device,
                   "cpu, or cuda[:N]: the weights, activations and (training) gradients and "
                   "optimiser state on that GPU; model files are the same either way")
      ->capture_default_str();
}

std::string flag_of(const std::string& key) {
  if (key == "model") return "-m";
  if (key == "input") return "-i";
  if (key == "output") return "-o";
  if (key == "warmup_steps") return "--warmup";  // the one option named unlike its key
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string version_text() {
  return std::string("nmt ") + NMT_VERSION + " (commit " + NMT_GIT_COMMIT + ", " + NMT_BUILD_TYPE +
         " build)\nbackends: " + backends_info() + "\nserve: " + http_build_info() +
         "\nnumerics: " + backend(Device::CPU).numerics();
}

namespace {

std::string human(double x, const char* unit = "") { return human_number(x, unit); }

// A model file starts with its header's length, 8 bytes little-endian whose
// high bytes are zeros, then '{'; a config is text, which holds no zero
// byte. So a truncated model is still read as a model and refused as one
// ("file is only 5 bytes"), not as JSON; anything else is a config, which
// the config parser judges (a BOM, an array, bad JSON) as train -c does.
bool is_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(9, '\0');
  in.read(head.data(), 9);
  head.resize(static_cast<size_t>(in.gcount()));
  return (head.size() == 9 && head[8] == '{') || head.find('\0') != std::string::npos;
}

void register_summary_impl(CLI::App& app) {
  struct Opts {
    std::string config = "transformer-base";
    int batch = 32, length = 30, threads = 0;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "summary", "Size and forward-pass cost of a config or model file, and a timed pass");
  cmd->add_option("-c,--config", opts->config, "Config file, name in models/, or model file")
      ->type_name("FILE");
  cmd->add_option("--batch", opts->batch, "Sentences in the batch")->check(CLI::Range(1, 4096));
  cmd->add_option("--length", opts->length, "Tokens per sentence")->check(CLI::Range(1, 1024));
  add_threads_option(cmd, opts->threads);
  cmd->callback([opts] {
    ops::set_num_threads(opts->threads);
    const std::string path = find_config(opts->config);
    io::check_input_path(path, "-c", /*nonempty=*/true);
    ModelConfig cfg;
    std::unique_ptr<Transformer> model;
    if (!is_model_file(path)) {
      TrainOptions unused;  // read as nmt train -c reads it, its training keys checked
      cfg = read_training_config(path, false, "-c", unused);
      model = std::make_unique<Transformer>(cfg);
      model->init(1);
    } else {
      LoadedModel m = load_model(path);
      cfg = m.config;
      model = std::move(m.net);
    }
    const ForwardTiming t = time_forward_pass(*model, opts->batch, opts->length);
    std::printf("model        %s (%s)\n", cfg.name.c_str(), path.c_str());
    std::printf("layers       %d encoder + %d decoder, d_model %d, d_ff %d, heads %d, %s-LN\n",
                cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.d_ff, cfg.heads,
                cfg.norm.c_str());
    std::printf("parameters   %s (%lld)\n", human(double(model->parameter_count())).c_str(),
                static_cast<long long>(model->parameter_count()));
    std::printf("forward      %s per target token (source and target length %lld)\n",
                human(t.flops_per_token, "FLOP").c_str(), static_cast<long long>(t.length));
    std::printf(
        "forward pass %d sentences x %d tokens on %d threads: %.3g ms, %s target "
        "tokens/s, %s/s\n",
        opts->batch, opts->length, ops::num_threads(), t.seconds * 1e3,
        human(double(t.target_tokens) / t.seconds).c_str(),
        human(t.flops_per_token * double(t.target_tokens) / t.seconds, "FLOP").c_str());
  });
}

void register_info_impl(CLI::App& app) {
  struct Opts {
    std::string model, format = "text";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("info",
                                 "What is inside a model file: config, size, vocabulary, "
                                 "how it was trained, checksum");
  cmd->add_option("model", o->model, "Model or checkpoint file")->type_name("FILE")->required();
  cmd->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([o] {
    const auto j = model_info(o->model);
    if (o->format == "json")
      std::printf("%s\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else
      std::fputs(name_options(model_info_text(j), option_name).c_str(), stdout);
  });
}

void register_quantize_impl(CLI::App& app) {
  struct Opts {
    std::string model, out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "quantize",
      "Write an int8 copy of a model: every weight matrix as s8 rows with a scale each, about "
      "a quarter of the size; nmt translate then computes in int8 by default");
  cmd->add_option("model", o->model, "Model file written by nmt train")
      ->type_name("FILE")
      ->required();
  cmd->add_option("-o,--out", o->out, "The int8 model file to write")
      ->type_name("FILE")
      ->required();
  cmd->callback([o] {
    io::check_output_path(o->out, "-o");
    io::check_not_an_input({"-o", o->out}, {{"model", o->model}});
    io::check_input_path(o->model, "model");
    write_model_copy(o->model, o->out, /*int8=*/true);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(o->out, ec);  // a device has none
    std::fprintf(stderr, "nmt: wrote %s (int8%s)\n", o->out.c_str(),
                 ec ? "" : (", " + human(double(bytes), "B")).c_str());
  });
}

}  // namespace

void register_summary(CLI::App& app) { register_summary_impl(app); }
void register_quantize(CLI::App& app) { register_quantize_impl(app); }
void register_info(CLI::App& app) { register_info_impl(app); }

namespace {

// The keys of every command's options (--valid-src: valid_src).
std::set<std::string>& option_keys() {
  static std::set<std::string> keys;
  return keys;
}

}  // namespace

std::string option_name(const std::string& key) {
  return option_keys().count(key) ? flag_of(key) : "{" + key + "}";
}

std::vector<const CLI::App*> visible_commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* c) { return !c->get_group().empty(); });
}

void register_all(CLI::App& app) {
  register_train(app);
  register_distill(app);
  register_translate(app);
  register_score(app);
  register_attention(app);
  register_info(app);
  register_quantize(app);
  register_convert(app);
  register_shortlist(app);
  register_serve(app);
  register_summary(app);
  register_docs(app);
  for (const CLI::App* cmd : app.get_subcommands([](const CLI::App*) { return true; }))
    for (const CLI::Option* o : cmd->get_options())
      for (std::string name : o->get_lnames()) {
        std::replace(name.begin(), name.end(), '-', '_');
        option_keys().insert(name);
      }
  option_keys().insert("warmup_steps");  // --warmup
}

}  // namespace nmt::app
