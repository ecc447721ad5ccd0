// The subcommands. Each register_* adds one CLI11 subcommand whose callback
// parses its options, calls one library entry point and prints. Shared here:
// the usage error (exit 2), and option helpers that every subcommand uses
// the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <set>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "core/option_spec.h"

namespace nmt {
struct TrainProgress;
}

namespace nmt::app {

void register_summary(CLI::App& app);
void register_info(CLI::App& app);
void register_quantize(CLI::App& app);
void register_train(CLI::App& app);
void register_distill(CLI::App& app);
void register_translate(CLI::App& app);
void register_score(CLI::App& app);
void register_attention(CLI::App& app);
void register_convert(CLI::App& app);
void register_shortlist(CLI::App& app);
void register_serve(CLI::App& app);
void register_docs(CLI::App& app);
void register_all(CLI::App& app);
// The commands --help lists (not the build's hidden `manual`), in order.
std::vector<const CLI::App*> visible_commands(const CLI::App& app);

// A training update as `nmt train` prints it (epoch, step, loss, ppl, lr,
// tokens/s, elapsed, ETA); `nmt distill` prints its trainings' the same way.
std::string train_progress_line(const TrainProgress& p);

// Commands that finish with a non-zero status without an error set it here.
int& exit_code();

// Ends the process with exit_code() once a command's outputs are complete
// and committed, without tearing down what it built: standard output is
// flushed first (a closed one throws io::StdoutClosed, as in main). Taking
// a translator's model, workers and oneDNN kernels apart took 34-44 ms of a
// 1-2 s translation of test_2016_flickr, most of it munmap flushing the TLB
// of every core (an interrupt each in a paravirtualised guest); the system
// frees a whole process at once. Not for a rank of several: those end
// together in main.
[[noreturn]] void exit_without_teardown();

// Usage errors (exit 2) are nmt::UsageError, from core/error.h.
using nmt::UsageError;

// Like CLI::Range for floating-point options, but NaN is refused too.
CLI::Validator finite_range(double lo, double hi);
// A whole number from 0 to 2^64 - 1, for an unsigned option: CLI11 reads
// one with strtoull, which takes "-1" as 2^64 - 1.
CLI::Validator unsigned_integer();
// A table's option (core/option_spec.h) as the flag flag_of(o.key) (or
// CLI11's `names`: "-f,--format", "--x,!--no-x"): its help with every {key}
// named as a flag, its range or choices checked by CLI11 (a usage error
// naming the flag as typed, exit 2), `shown` as its default (none when
// empty), and set() given the value typed, as JSON of the option's type.
CLI::Option* add_table_option(CLI::App* cmd, const OptionInfo& o, const std::string& shown,
                              std::function<void(const nlohmann::json&)> set,
                              const std::string& names = "");
// translate_options() (service/translation_service.h) as flags, in its
// order, but the keys in `skip`: before(key) runs before each is added (to
// put other flags among them), set(key, value) when one is given.
void add_translate_table(CLI::App* cmd, const std::set<std::string>& skip,
                         const std::function<void(const std::string&)>& before,
                         std::function<void(const std::string&, const nlohmann::json&)> set);
// --threads N (0: all cores), range-checked, default shown.
CLI::Option* add_threads_option(CLI::App* cmd, int& threads);
// --compute-type for translation and scoring: f32, bf16 or int8 (and their
// long names); empty keeps the model file's.
CLI::Option* add_compute_type_option(CLI::App* cmd, std::string& compute, const std::string& help);

// --device cpu|cuda[:N] (default cpu), for the commands that run a model;
// core/device.h's open_device makes it ready to use.
CLI::Option* add_device_option(CLI::App* cmd, std::string& device);

// The command line's flag of an option's key (beam -> --beam, model -> -m):
// how app/ writes the options the library names by key.
std::string flag_of(const std::string& key);
// The same for a key that names an option of some command; any other
// "{word}" in a text (a path's, a JSON example's) stays as it is.
std::string option_name(const std::string& key);

// "nmt 0.2.0 (commit ..., Release)" and the backends compiled in.
std::string version_text();

}  // namespace nmt::app
