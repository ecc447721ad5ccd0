#!/usr/bin/env bash
# The Python module's tests (tests/python/test_*.py) under Debian's pytest,
# with a toy model trained here: skipped (77, with the reason) where the
# module was not built or pytest is missing, never passed without running.
# Usage: run.sh NMT DATA_DIR WORK_DIR MODULE_DIR BUILD_DIR SOURCE_DIR
set -u
NMT=$1 DATA=$2 WORK=$3 MODULE=$4 BUILD=$5 SRC=$6
PY=${NMT_PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ -z "$MODULE" ] || [ ! -f "$MODULE/nmt/__init__.py" ]; then
  echo "python_module: skipped (the module was not built: install pybind11-dev and python3-dev)"
  exit 77
fi
if ! "$PY" -c "import pytest" 2>/dev/null; then
  echo "python_module: skipped (no pytest for $PY: install python3-pytest)"
  exit 77
fi
if ldd "$NMT" 2>/dev/null | grep -q asan; then
  echo "python_module: skipped (an AddressSanitizer build: Python would need its runtime loaded first)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
. "$SRC/tests/cli_common.sh"
train_toy_model "$NMT" "$DATA"
export NMT_BIN=$NMT NMT_DATA=$DATA NMT_TEST_MODEL=$WORK/m.nmt NMT_BUILD_DIR=$BUILD NMT_SOURCE_DIR=$SRC
export PYTHONPATH=$MODULE PYTHONDONTWRITEBYTECODE=1
"$PY" -m pytest -q -p no:cacheprovider "$SRC/tests/python"
