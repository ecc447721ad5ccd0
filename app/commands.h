// The subcommands. Each register_* adds one CLI11 subcommand whose callback
// parses its options, calls one library entry point and prints.
#pragma once

#include <CLI/CLI.hpp>

namespace nmt::app {

void register_summary(CLI::App& app);
void register_train(CLI::App& app);
void register_translate(CLI::App& app);
void register_all(CLI::App& app);

// Commands that finish with a non-zero status without an error set it here.
int& exit_code();

}  // namespace nmt::app
