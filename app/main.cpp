// nmt: train, translate and score Transformer translation models.
// Each subcommand lives in its own file; this one wires them up and turns
// what goes wrong into one line on stderr and an exit status: 2 for a
// command line that cannot be understood (with the closest spelling nmt
// knows), 1 for an error in the input or the run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "core/backend.h"
#include "core/comm.h"
#include "core/error.h"
#include "core/suggest.h"
#include "io/output_file.h"
#include "io/std_streams.h"

namespace {

using nmt::app::UsageError;

// sacrebleu's multi-letter short options, which CLI11 (rightly) cannot
// parse as such, spelt the nmt way; the ones nmt has no equivalent for say so.
std::vector<std::string> sacrebleu_aliases(std::vector<std::string> args) {
  static const std::map<std::string, std::string> alias = {
      {"-tok", "--tokenize"},    {"-lc", "--lowercase"},       {"-sl", "--sentence-level"},
      {"-sv", "--smooth-value"}, {"-cc", "--chrf-char-order"}, {"-cw", "--chrf-word-order"},
      {"-nc", "--no-color"},     {"-ci", "--confidence"},      {"-cin", "--confidence-n"},
      {"-pbs", "--paired-bs"},   {"-par", "--paired-ar"},      {"-pbsn", "--paired-bs-n"},
      {"-parn", "--paired-ar-n"}};
  static const std::map<std::string, std::string> unsupported = {
      {"-t", "test sets are not downloaded: give the reference files as arguments"},
      {"-l", "test sets are not downloaded: give the reference files as arguments"},
      {"-nr", "tab-separated references are not read: give each reference as its own file"},
      {"-sh", "short signatures are not printed"},
      {"-d", "--detail is not supported"},
      {"-e", "input is always read as UTF-8"}};
  for (std::string& a : args) {
    // Issue 20 and older notes spell case-sensitive TER -ti; sacreBLEU 2.6.0
    // has no such option (its argparse reads "-t i", a test set).
    if (a == "-ti")
      throw UsageError(
          "score: sacreBLEU 2.6.0 has no -ti (it would read -t i); case-sensitive TER is "
          "--ter-case-sensitive");
    if (auto it = alias.find(a); it != alias.end()) a = it->second;
    if (auto it = unsupported.find(a); it != unsupported.end())
      throw UsageError("score: sacrebleu's " + a + " has no nmt equivalent: " + it->second);
  }
  return args;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// The commands --help lists, as a sentence: "a, b and c".
std::string listed(const CLI::App& app) {
  const std::vector<const CLI::App*> commands = nmt::app::visible_commands(app);
  std::string s;
  for (size_t i = 0; i < commands.size(); ++i)
    s += (i == 0 ? "" : i + 1 == commands.size() ? " and " : ", ") + commands[i]->get_name();
  return s;
}

std::vector<std::string> option_names(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// "unexpected arguments: a b (did you mean --beam?)", in the order given.
std::string extras_message(const CLI::App& app, const CLI::App* cmd,
                           const std::vector<std::string>& argv) {
  std::vector<std::string> extras = app.remaining(true);
  std::stable_sort(extras.begin(), extras.end(), [&](const std::string& a, const std::string& b) {
    return std::find(argv.begin(), argv.end(), a) < std::find(argv.begin(), argv.end(), b);
  });
  std::string list, hint;
  for (const std::string& e : extras) {
    list += (list.empty() ? "" : " ") + e;
    if (hint.empty() && e.size() > 1 && e[0] == '-') {
      const std::string flag = e.substr(0, e.find('='));
      hint = nmt::did_you_mean(flag, option_names(cmd ? cmd : &app));
    }
  }
  const std::string what =
      extras.size() == 1 && extras[0][0] == '-' ? "unknown option " : "unexpected arguments: ";
  return what + list + hint;
}

// The library names an option by its key (InputError::option): here it is
// written as the command line's flag, before the message.
std::string message_of(const nmt::Error& e) {
  return nmt::message_naming(e, nmt::app::option_name);
}
// After --help or --version: the text must have reached stdout.
int finish_stdout(const std::string& prefix) {
  try {
    nmt::io::check_stdout(/*flush=*/true);
  } catch (const nmt::io::StdoutClosed&) {
  } catch (const nmt::Error& e) {
    std::cerr << prefix << ": error: " << message_of(e) << "\n";
    return 1;
  }
  return 0;
}


int usage_error(const std::string& prefix, const std::string& msg) {
  std::cerr << prefix << ": error: " << msg << " (see " << prefix << " --help)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout (`nmt translate ... | head`) must end quietly: writes
  // then fail with EPIPE, which the commands treat as "stop". A file-size
  // limit must fail a write (and say so) rather than kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  nmt::io::protect_standard_descriptors();
  // A stop signal removes the hidden temporary files of unfinished outputs
  // (train installs its own "stop after this step" handler over it).
  nmt::io::install_signal_cleanup();
  CLI::App app{"nmt: Transformer neural machine translation (train, translate, score)", "nmt"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return nmt::app::version_text(); });
  app.option_defaults()->always_capture_default();
  nmt::app::register_all(app);

  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cout << app.help();
    return finish_stdout("nmt");
  }
  const std::vector<std::string> commands = command_names(app);
  std::string prefix = "nmt";
  try {
    if (args[0][0] != '-' && std::find(commands.begin(), commands.end(), args[0]) == commands.end())
      throw UsageError("'" + args[0] + "' is not an nmt command" +
                       nmt::did_you_mean(args[0], commands) + "; the commands are " + listed(app));
    if (args[0][0] != '-') prefix = "nmt " + args[0];
    // Several ranks of another command would each write the same outputs.
    if (args[0][0] != '-' && args[0] != "train" && args[0] != "translate" &&
        nmt::launched_distributed())
      throw UsageError(
          "started as one of several ranks (mpirun, srun), but only train and translate run "
          "distributed; run this command as one process");
    if (args[0] == "score") args = sacrebleu_aliases(args);
    // A malformed NMT_NUMERICS (cpu/numerics.h) is refused before any
    // command reads or writes a file, not at its first product.
    nmt::backend(nmt::Device::CPU).numerics();
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
    app.parse(reversed);
    nmt::io::check_stdout(/*flush=*/true);  // every command that prints, alike
  } catch (const nmt::io::StdoutClosed&) {
    return nmt::app::exit_code();  // the reader has all it wanted
  } catch (const nmt::RankStopped& e) {
    return e.code;  // rank 0 said why
  } catch (const CLI::ExtrasError&) {
    const auto used = app.get_subcommands();
    return usage_error(prefix, extras_message(app, used.empty() ? nullptr : used[0], args));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      const int rc = app.exit(e);
      return rc ? rc : finish_stdout(prefix);
    }
    return usage_error(prefix, e.what());
  } catch (const UsageError& e) {
    // A refusal one rank alone made (its node's memory) would leave the
    // others waiting: end them too.
    const int rc = usage_error(prefix, message_of(e));
    nmt::abort_if_distributed(rc);
    return rc;
  } catch (const nmt::Error& e) {
    std::cerr << "nmt: error: " << message_of(e) << "\n";
    nmt::abort_if_distributed(1);
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "nmt: error: out of memory\n";
    nmt::abort_if_distributed(1);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "nmt: error: " << nmt::printable(e.what()) << "\n";
    nmt::abort_if_distributed(1);
    return 1;
  }
  return nmt::app::exit_code();
}
