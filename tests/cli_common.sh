# Sourced by the CLI tests that share them (after they define fail and cd
# into their work folder): the toy model every such test translates with,
# and the check of a command's exit status and one-line message.

# train_toy_model NMT DATA_DIR: m.nmt, 10 steps of transformer-tiny on
# joeynmt-toy (a few seconds), its log in train.err.
train_toy_model() {
  "$1" train -c transformer-tiny --train-src "$2/joeynmt-toy/train.en" \
    --train-tgt "$2/joeynmt-toy/train.de" --out m.nmt --vocab-size 300 --max-steps 10 \
    --batch-tokens 1024 --seed 1 2>train.err || { cat train.err; fail "train"; }
}

# expect STATUS PATTERN command...: exit status, one line on stderr matching.
expect() {
  local want=$1 pat=$2; shift 2
  "$@" </dev/null >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$*: exit $rc, expected $want ($(cat err.txt))"
  [ "$(wc -l <err.txt)" -eq 1 ] || fail "$*: expected one line on stderr, got: $(cat err.txt)"
  grep -q -- "$pat" err.txt || fail "$*: expected '$pat', got: $(cat err.txt)"
}

# peak_kb OUT command...: the command's peak resident memory in KB (its
# stdout in OUT), -1 if it failed.
peak_kb() {
  python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else -1)' "$@"
}

# asan_build NMT: whether NMT is an AddressSanitizer build (NMT_SANITIZE=ON),
# whose reserved address space fits no ulimit -v and whose peak memory says
# nothing of nmt's.
asan_build() { ldd "$1" 2>/dev/null | grep -q asan; }
