// nmt: train, translate and score Transformer translation models.
// Each subcommand lives in its own file; this one only wires them up and
// turns library exceptions into one-line messages and exit codes.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  // A closed stdout (`nmt translate ... | head`) must end quietly: writes
  // then fail with EPIPE, which the commands treat as "stop".
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"nmt: Transformer neural machine translation (train, translate, score)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nmt 0.1.0");
  nmt::app::register_all(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const nmt::Error& e) {
    std::cerr << "nmt: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "nmt: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "nmt: error: " << e.what() << "\n";
    return 1;
  }
  return nmt::app::exit_code();
}
