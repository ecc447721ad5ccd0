#!/usr/bin/env bash
# The backend seam holds: no file outside lib/cpu and lib/cuda includes a
# backend's headers (oneDNN, CUDA and its libraries, or the backends' own),
# but for a test of one backend's own rules (tests/test_cpu_*.cpp), which
# reads them without a machine that runs them.
# Usage: seam_check.sh SOURCE_DIR
cd "$1" || exit 1
leaks=$(grep -rnE '#include [<"](oneapi/dnnl|dnnl|cuda|cublas|cudnn|nccl|cpu/|cuda/)' \
  lib app tests bench fuzz | grep -v '^lib/cpu/\|^lib/cuda/\|^tests/test_cpu_')
if [ -n "$leaks" ]; then
  echo "FAIL: backend headers included outside the backends:" >&2
  echo "$leaks" >&2
  exit 1
fi
echo "seam check: no backend header outside lib/cpu and lib/cuda"
