#!/usr/bin/env bash
# nmt translate --format html on real text: Multi30k sentences with inline
# tags around their words translate, tags stripped, exactly as the
# stripped text does; snippets with nested inline tags, entities, code,
# scripts, comments and void elements keep their markup well formed and
# what is not translated byte for byte; a document over many lines is one
# fragment; HTML that is not well formed is translated as text, with a
# warning, and nothing of it is lost.
# Usage: cli_html.sh NMT DATA_DIR WORK_DIR
set -u
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/cli_common.sh"
train_toy_model "$NMT" "$DATA"
T="--threads 1 --beam 2"

# 1. Tags around single words (and nested, and over two words) of 200
# test_2016_flickr sentences: stripped of its tags, each output line is the
# translation of the stripped line.
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" | head -200 >plain.en
python3 - <<'PY'
import html
out = open("tagged.html", "w")
for i, line in enumerate(open("plain.en")):
    w = html.escape(line.strip(), quote=False).split(" ")
    k = i % len(w)
    if i % 3 == 0:
        w[k] = f"<b>{w[k]}</b>"
    elif i % 3 == 1:
        w[k] = f'<a href="p{i}.html"><i>{w[k]}</i></a>'
    else:
        j = min(k + 1, len(w) - 1)
        w[k] = "<em>" + w[k]
        w[j] = w[j] + "</em>"
    out.write(" ".join(w) + "\n")
PY
"$NMT" translate -m m.nmt -i tagged.html --format html $T >tagged.out 2>err.txt ||
  fail "--format html: $(cat err.txt)"
# (The toy model takes 63 subwords: a long sentence is cut into pieces.)
! grep -v "pieces cut at clause boundaries" err.txt || fail "--format html warned"
"$NMT" translate -m m.nmt -i plain.en --split sentences $T >plain.out 2>err.txt ||
  fail "the stripped text: $(cat err.txt)"
python3 - <<'PY' || fail "tags stripped from the output are not the translation"
import html, re
got = [html.unescape(re.sub(r"<[^>]*>", "", l.rstrip("\n"))) for l in open("tagged.out")]
want = [l.rstrip("\n") for l in open("plain.out")]
assert len(got) == len(want) == 200, (len(got), len(want))
bad = [(g, w) for g, w in zip(got, want) if g != w]
assert not bad, bad[:3]
tags = [re.findall(r"<[^>]*>", l) for l in open("tagged.html")]
out_tags = [re.findall(r"<[^>]*>", l) for l in open("tagged.out")]
assert all(sorted(a) == sorted(b) for a, b in zip(tags, out_tags)), "tags lost or added"
PY
# The same from a pipe, with two workers.
"$NMT" translate -m m.nmt --format html --workers 2 --threads 1 --beam 2 <tagged.html \
  >pipe.out 2>err.txt || fail "--format html from a pipe: $(cat err.txt)"
cmp -s pipe.out tagged.out || fail "--format html from a pipe with two workers differs"

# 2. Snippets: markup well formed, tags and attributes kept, what is not
# translated kept byte for byte.
cat >snippets.html <<'HTML'
<p>A <b>man</b> in an <i>orange <u>hat</u></i> &amp; a <a href="dog.html" title="A &quot;dog&quot;">brown dog</a>.</p>
<ul><li>Two <strong>children</strong> play.<li>A woman&nbsp;sings &lt;loudly&gt;.</ul>
<div>Run <code>make &amp;&amp; make install</code> to build it.<br>A <img src="girl.png" alt="girl"> girl runs.<hr></div>
<script>document.write("<b>Not translated</b>");</script><style>p { color: red }</style>
<p>People <!-- a comment --> sit on a bench. <span translate="no">Multi30k</span> is a corpus.</p>
<pre>  A man
  sleeps.</pre>
<table><tr><td>A dog<td>A cat</tr></table>
HTML
"$NMT" translate -m m.nmt -i snippets.html --format html $T >snippets.out 2>err.txt ||
  fail "snippets: $(cat err.txt)"
! grep -v "pieces cut at clause boundaries" err.txt || fail "snippets warned"
python3 - <<'PY' || fail "snippets: $(cat snippets.out)"
from html.parser import HTMLParser
VOID = {"br", "img", "hr", "meta", "link", "input", "wbr"}
OPTIONAL = {"li", "td", "tr", "p"}
class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.starts = [], []
    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, attrs))
        if tag in VOID: return
        if self.stack and self.stack[-1] == tag and tag in OPTIONAL: self.stack.pop()
        self.stack.append(tag)
    def handle_endtag(self, tag):
        while self.stack and self.stack[-1] != tag and self.stack[-1] in OPTIONAL: self.stack.pop()
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()
src, out = open("snippets.html").read(), open("snippets.out").read()
assert out.count("\n") == src.count("\n"), "lines lost"
for text, name in ((src, "input"), (out, "output")):
    c = Check(); c.feed(text); c.close()
    assert not [t for t in c.stack if t not in OPTIONAL], f"{name} leaves {c.stack} open"
    if name == "input": want = sorted(map(str, c.starts))
    else: assert sorted(map(str, c.starts)) == want, "start tags or attributes changed"
for kept in ['<code>make &amp;&amp; make install</code>',
             '<script>document.write("<b>Not translated</b>");</script>',
             '<style>p { color: red }</style>', '<!-- a comment -->',
             '<span translate="no">Multi30k</span>', '<pre>  A man\n  sleeps.</pre>',
             '<img src="girl.png" alt="girl">', '<a href="dog.html" title="A &quot;dog&quot;">']:
    assert kept in out, f"{kept} not kept"
PY

# 3. A document over many lines is one fragment; a line outside any
# element is one on its own.
{ echo '<!DOCTYPE html>'; echo '<html>'; echo '<head><title>A dog runs.</title></head>'
  echo '<body>'; head -3 plain.en | sed 's/^/<p>/; s/$/<\/p>/'; echo '</body>'; echo '</html>'
  echo 'A man sleeps.'; } >doc.html
"$NMT" translate -m m.nmt -i doc.html --format html $T >doc.out 2>err.txt ||
  fail "a document: $(cat err.txt)"
[ "$(wc -l <doc.out)" -eq "$(wc -l <doc.html)" ] || fail "a document: $(cat doc.out)"
[ "$(grep -c '^<p>.*</p>$' doc.out)" -eq 3 ] || fail "a document's paragraphs: $(cat doc.out)"
[ "$(tail -1 doc.out)" = "$("$NMT" translate -m m.nmt --split sentences $T <<<'A man sleeps.')" ] ||
  fail "the line after a document: $(cat doc.out)"

# 4. Not well formed: translated as text, line for line, with a warning.
printf '<div>A <b>man</div>\n<p>A dog.</p>\n' >bad.html
"$NMT" translate -m m.nmt -i bad.html --format html $T >bad.out 2>err.txt ||
  fail "bad HTML: $(cat err.txt)"
grep -q "bad.html line 1: not well-formed HTML (</div> at byte 14 does not close <b>); translated as text" err.txt ||
  fail "bad HTML: no warning: $(cat err.txt)"
[ "$(wc -l <bad.out)" -eq 2 ] || fail "bad HTML: lines lost: $(cat bad.out)"
[ "$(head -1 bad.out)" = "$("$NMT" translate -m m.nmt --split sentences $T <<<'<div>A <b>man</div>')" ] ||
  fail "bad HTML is not translated as text: $(cat bad.out)"
grep -q '^<p>.*</p>$' bad.out || fail "the well-formed line after bad HTML: $(cat bad.out)"

# 5. Options that belong to lines of text are refused with HTML.
expect 2 "scores belongs to lines of text" "$NMT" translate -m m.nmt --format html --scores
expect 2 "split belongs to lines of text" \
  "$NMT" translate -m m.nmt --format html --split paragraphs
expect 2 "input-format belongs to lines of text" \
  "$NMT" translate -m m.nmt --format html --input-format jsonl
echo "cli_html: ok"
