#!/usr/bin/env bash
# nmt serve's page (GET /) in a real browser, Debian's headless Chromium:
# it lists the server's languages, translates the text it is given (as a
# person's typed text, through the same function) and shows exactly what
# /translate answers; with API keys it shows where to give one and the
# server's refusal. Skipped (77) where Chromium is missing.
# Usage: serve_page.sh NMT DATA_DIR WORK_DIR
set -u
NMT=$1 DATA=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
CHROMIUM=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$CHROMIUM" ] || { echo "SKIP: no Chromium (apt-get install chromium)"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
PID=""
fail() { echo "FAIL: $*" >&2; [ -n "$PID" ] && kill -9 "$PID"; exit 1; }
. "$HERE/cli_common.sh"
train_toy_model "$NMT" "$DATA"

start() {
  "$NMT" serve -m m.nmt --port 0 --threads 1 "$@" 2>serve.err &
  PID=$!
  for _ in $(seq 1 300); do
    PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' serve.err | grep -o '[0-9]*$')
    [ -n "$PORT" ] && return 0
    sleep 0.1
  done
  fail "nmt serve did not start: $(cat serve.err)"
}
# dom URL: the page's DOM once its scripts have run.
dom() {
  timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 \
    --user-data-dir="$WORK/profile" --dump-dom "$1" 2>chromium.err
}

start
TEXT="A little girl climbs into a wooden playhouse."
WANT=$(curl -s "http://127.0.0.1:$PORT/translate" -H 'Content-Type: application/json' \
  -d "{\"q\": \"$TEXT\", \"source\": \"en\", \"target\": \"de\"}" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["translatedText"])')
[ -n "$WANT" ] || fail "/translate gave nothing"
dom "http://127.0.0.1:$PORT/?source=en&target=de&q=$(python3 -c 'import urllib.parse, sys; print(urllib.parse.quote(sys.argv[1]))' "$TEXT")" >page.html ||
  fail "chromium: $(tail -3 chromium.err)"
python3 - "$WANT" <<'PY' || fail "the page"
import html, re, sys
page = open("page.html").read()
want = sys.argv[1]
out = re.search(r'<output id="output"[^>]*>(.*?)</output>', page, re.S)
assert out, "no output element"
assert html.unescape(out.group(1)) == want, (out.group(1), want)
assert '<option value="en">English (en)</option>' in page, "source languages not listed"
assert re.search(r'<select id="target"><option value="de">[^<]*German', page), "targets"
status = re.search(r'<p id="status">(.*?)</p>', page, re.S).group(1)
assert status == "", status
PY
kill -TERM "$PID"; wait "$PID"

printf 'page-key\n' >keys.txt
start --api-keys keys.txt
dom "http://127.0.0.1:$PORT/?source=en&target=de&q=A%20dog." >page.html ||
  fail "chromium: $(tail -3 chromium.err)"
python3 - <<'PY' || fail "the page with API keys"
import re
page = open("page.html").read()
assert re.search(r'<span id="key-row" style="display: inline;">', page), "no key field shown"
status = re.search(r'<p id="status">(.*?)</p>', page, re.S).group(1)
assert "API key" in status, status
PY
kill -TERM "$PID"; wait "$PID"
echo "serve_page: the page works in $("$CHROMIUM" --version 2>/dev/null)"
