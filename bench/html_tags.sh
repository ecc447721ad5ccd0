#!/usr/bin/env bash
# HTML's inline tags carried across word alignments: in each of
# test_2016_flickr's 1000 sentences, the first of 60 common nouns (man, dog,
# street, ...) is put in <b>...</b>, and the file is translated with
# `--format html`. Reported: how many lines, stripped of their tags, equal
# the translation of the stripped line (`--split sentences`; the target is
# all of them); and, among the sentences whose translation holds one of the
# noun's German translations (a word starting with it: Mann, Hund,
# Stra\u00dfe, ...), how often the <b> ends around it, and how often around
# it alone. Then the sentences/s of both runs, alternated ROUNDS times
# (HTML also reads each sentence's attention for its alignment).
# Usage: bench/html_tags.sh NMT MODEL [ROUNDS] [extra translate options...]
set -eu
NMT=$1 MODEL=$2 ROUNDS=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
DATA=$(cd "$(dirname "$0")/../../shared/data" && pwd)
W=$(mktemp -d /tmp/nmt-bench-html.XXXXXX)
trap 'rm -rf "$W"' EXIT
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" >"$W/plain.en"
python3 - "$W" <<'EOF'
import html, json, re, sys
w = sys.argv[1]
nouns = {
    "man": "Mann", "men": "Männer", "woman": "Frau", "women": "Frauen", "boy": "Junge",
    "boys": "Jungen", "girl": "Mädchen", "girls": "Mädchen", "child": "Kind",
    "children": "Kinder", "people": "Menschen|Leute|Personen", "person": "Person",
    "dog": "Hund", "dogs": "Hunde", "shirt": "Hemd|T-Shirt|Shirt", "street": "Straße",
    "water": "Wasser", "ball": "Ball", "hat": "Hut|Mütze", "bike": "Fahrrad|Rad",
    "bicycle": "Fahrrad|Rad", "car": "Auto|Wagen", "crowd": "Menge|Menschenmenge|Publikum",
    "building": "Gebäude", "guitar": "Gitarre", "snow": "Schnee", "beach": "Strand",
    "grass": "Gras|Rasen|Wiese", "table": "Tisch", "group": "Gruppe", "jacket": "Jacke",
    "player": "Spieler", "players": "Spieler", "baby": "Baby|Kleinkind", "field": "Feld|Platz",
    "camera": "Kamera", "horse": "Pferd", "city": "Stadt", "stage": "Bühne", "rock": "Felsen|Fels",
    "ocean": "Ozean|Meer", "sidewalk": "Gehweg|Bürgersteig", "road": "Straße", "tree": "Baum",
    "wall": "Wand|Mauer", "pool": "Pool|Schwimmbecken", "dress": "Kleid", "bench": "Bank",
    "hair": "Haar", "team": "Mannschaft|Team", "game": "Spiel", "sand": "Sand", "boat": "Boot",
    "window": "Fenster", "mountain": "Berg", "park": "Park", "store": "Geschäft|Laden",
    "food": "Essen", "music": "Musik", "microphone": "Mikrofon",
}
with open(f"{w}/tagged.html", "w") as out, open(f"{w}/nouns.json", "w") as nj:
    picked = []
    for line in open(f"{w}/plain.en"):
        words = html.escape(line.strip(), quote=False).split(" ")
        k = next((i for i, x in enumerate(words) if re.sub(r"\W", "", x.lower()) in nouns), -1)
        if k >= 0:
            m = re.match(r"^(\w+)(.*)$", words[k])
            words[k] = f"<b>{m.group(1)}</b>{m.group(2)}" if m else f"<b>{words[k]}</b>"
            picked.append(nouns[re.sub(r"\W", "", words[k].replace("<b>", "").replace("</b>", "").lower())])
        else:
            picked.append(None)
        out.write(" ".join(words) + "\n")
    json.dump(picked, nj)
EOF
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
echo "model: $MODEL; options: $*"
n=$(wc -l <"$W/plain.en")
run() {  # run NAME args...: sentences/s of one translation of the file
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$NMT" translate -m "$MODEL" "$@" >"$W/$name.out" 2>"$W/$name.err"
  t1=$(date +%s.%N)
  python3 -c "print(f'{$n / ($t1 - $t0):.1f}')"
}
html_rates="" plain_rates=""
for r in $(seq "$ROUNDS"); do
  html_rates="$html_rates $(run html -i "$W/tagged.html" --format html "$@")"
  plain_rates="$plain_rates $(run plain -i "$W/plain.en" --split sentences "$@")"
done
echo "sentences/s, --format html:        $html_rates"
echo "sentences/s, --split sentences:    $plain_rates"
python3 - "$W" <<'EOF'
import html, json, re, sys
w = sys.argv[1]
got = [l.rstrip("\n") for l in open(f"{w}/html.out")]
plain = [l.rstrip("\n") for l in open(f"{w}/plain.out")]
picked = json.load(open(f"{w}/nouns.json"))
same = sum(html.unescape(re.sub(r"<[^>]*>", "", g)) == p for g, p in zip(got, plain))
print(f"stripped of tags, equal to the stripped line's translation: {same} of {len(plain)}")
def has(word, german):
    return any(word.lower().startswith(g.lower()) for g in german.split("|"))
eligible = around = alone = 0
for g, p, german in zip(got, plain, picked):
    if german is None or not any(has(x.strip(".,!?;:\"'"), german) for x in p.split()):
        continue
    eligible += 1
    m = re.search(r"<b>(.*?)</b>", g)
    inside = html.unescape(m.group(1)).split() if m else []
    around += any(has(x.strip(".,!?;:\"'"), german) for x in inside)
    alone += len(inside) == 1 and has(inside[0].strip(".,!?;:\"'"), german)
tagged = sum(x is not None for x in picked)
print(f"sentences with a tagged noun: {tagged}; whose translation holds its German: {eligible}")
print(f"<b> around the noun's translation: {around} of {eligible} ({100 * around / max(1, eligible):.1f}%); "
      f"around it alone: {alone} ({100 * alone / max(1, eligible):.1f}%)")
EOF
