#!/usr/bin/env bash
# One command from a fresh machine to a trained model: installs what is
# missing, builds an optimised nmt, and runs the main job (train
# transformer-small on Multi30k En->De for a short budget, translate a few
# test sentences, print BLEU). Environment: see scripts/quickstart.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target nmt
scripts/quickstart.sh "$@"
