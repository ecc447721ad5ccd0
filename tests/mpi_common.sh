# Sourced by the MPI tests after NMT and WORK are set: skips (exit 77, ctest's
# skip) without mpirun or without MPI in the build, starts in a clean WORK,
# and lets mpirun run as root and put more ranks than cores on this machine.
if ! command -v mpirun >/dev/null; then echo "skipped: no mpirun"; exit 77; fi
if "$NMT" --version | grep -q "mpi: not built"; then echo "skipped: nmt built without MPI"; exit 77; fi
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
