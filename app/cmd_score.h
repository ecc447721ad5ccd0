// `nmt score`: BLEU / chrF of a hypothesis file against references (metric
// mode, sacreBLEU-compatible output), or model scores of a parallel corpus
// (-m, see score_model.h).
#pragma once

#include <CLI/CLI.hpp>

namespace nmt::app {

void register_score(CLI::App& app);

}  // namespace nmt::app
