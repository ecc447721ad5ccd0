#!/usr/bin/env bash
# The man pages and shell completions: written by the build (BUILD_DIR/docs)
# as the binary writes them now, one page per command with every option
# --help lists, pages man(1) renders without warnings, and completion
# scripts that complete commands, options, choices and files in bash and
# fish, and that zsh reads.
# Usage: cli_docs.sh NMT DATA_DIR WORK_DIR BUILD_DIR
set -u
NMT=$1 WORK=$3 BUILD=$4
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

# The build's pages and scripts are the binary's.
"$NMT" manual man1 || fail "nmt manual"
diff -r man1 "$BUILD/docs/man1" >/dev/null || fail "the build's man pages are not what nmt writes"
for shell in bash zsh fish; do
  "$NMT" completion $shell >"$shell.txt" || fail "nmt completion $shell"
done
cmp -s bash.txt "$BUILD/docs/completions/nmt" || fail "the build's bash completion is stale"
cmp -s zsh.txt "$BUILD/docs/completions/_nmt" || fail "the build's zsh completion is stale"
cmp -s fish.txt "$BUILD/docs/completions/nmt.fish" || fail "the build's fish completion is stale"
"$NMT" completion tcsh 2>err.txt && fail "nmt completion tcsh was accepted"
grep -q "tcsh" err.txt || fail "nmt completion tcsh: $(cat err.txt)"

# Every command --help lists has a page with every option its --help lists.
commands=$("$NMT" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
[ "$(echo "$commands" | wc -w)" -ge 10 ] || fail "nmt --help lists too few commands: $commands"
[ -f man1/nmt.1 ] || fail "no nmt.1"
for c in $commands; do
  page=man1/nmt-$c.1
  [ -f "$page" ] || fail "no man page for nmt $c"
  grep -q "nmt\\\\-$c" man1/nmt.1 || fail "nmt.1 does not list nmt-$c"
  for flag in $("$NMT" "$c" --help | grep -oE '^  (-[a-zA-Z], ?)?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+'); do
    grep -qF -- "$(echo "$flag" | sed 's/-/\\-/g')" "$page" || fail "nmt-$c.1 lacks $flag"
  done
  if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "groff warns on $page: $warnings"
  fi
done

# bash: what the script offers for a command line (the last word is being typed).
bash_complete() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nmt; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$WORK/bash.txt" "$@"
}
mkdir -p files && touch files/model.nmt files/other.txt
bash_complete nmt tr | sort | tr '\n' ' ' | grep -qx "train translate " ||
  fail "bash: nmt tr -> $(bash_complete nmt tr | tr '\n' ' ')"
bash_complete nmt translate --bat | grep -qx -- "--batching" || fail "bash: no --batching"
[ "$(bash_complete nmt translate --batching "" | sort | tr '\n' ' ')" = "continuous static " ] ||
  fail "bash: --batching's choices: $(bash_complete nmt translate --batching "")"
bash_complete nmt translate -m files/mo | grep -qx "files/model.nmt" || fail "bash: -m does not complete files"
[ -z "$(bash_complete nmt translate --beam "")" ] || fail "bash: --beam completes something"
bash_complete nmt score --met | grep -qx -- "--metrics" || fail "bash: nmt score --metrics"
bash_complete nmt train --train-src files/mo | grep -qx "files/model.nmt" || fail "bash: --train-src"
bash_complete nmt score --spm-model files/mo | grep -qx "files/model.nmt" || fail "bash: --spm-model"
[ "$(bash_complete nmt translate --output-dir fi)" = "files" ] ||
  fail "bash: --output-dir completes $(bash_complete nmt translate --output-dir fi)"
[ -z "$(bash_complete nmt translate --device "")" ] || fail "bash: --device completes files"

# zsh reads its script; fish completes with its own.
command -v zsh >/dev/null || { echo "cli_docs: skipped (no zsh: apt-get install zsh)"; exit 77; }
zsh -n zsh.txt || fail "zsh cannot read its completion"
command -v fish >/dev/null || { echo "cli_docs: skipped (no fish: apt-get install fish)"; exit 77; }
fish -n fish.txt || fail "fish cannot read its completion"
fish_complete() { fish -c "source $WORK/fish.txt; complete -C '$1'" | cut -f1; }
fish_complete "nmt tr" | grep -qx "translate" || fail "fish: nmt tr"
fish_complete "nmt translate --bat" | grep -qx -- "--batching" || fail "fish: --batching"
fish_complete "nmt translate --batching " | grep -qx "continuous" || fail "fish: --batching's choices"
echo "cli_docs: $(echo "$commands" | wc -w) commands' pages and completions checked"
