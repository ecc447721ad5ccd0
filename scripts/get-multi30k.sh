#!/usr/bin/env bash
# Downloads Multi30k (task 1, En/De: train, val, test_2016_flickr) from
# github.com/multi30k/dataset into a directory (default: data/multi30k).
# Usage: scripts/get-multi30k.sh [DIR]
set -euo pipefail
dir=${1:-data/multi30k}
base=https://github.com/multi30k/dataset/raw/master/data/task1/raw
mkdir -p "$dir"
fetch() {
  local url=$1 out=$2
  if command -v curl >/dev/null; then curl -fsSL --retry 2 -o "$out.part" "$url"
  elif command -v wget >/dev/null; then wget -q -O "$out.part" "$url"
  else echo "get-multi30k: need curl or wget" >&2; return 1; fi
  mv "$out.part" "$out"
}
for split in train val test_2016_flickr; do
  for lang in en de; do
    f="$dir/$split.$lang.gz"
    [ -s "$f" ] && continue
    echo "get-multi30k: $f" >&2
    fetch "$base/$split.$lang.gz" "$f"
  done
done
echo "get-multi30k: done ($dir)" >&2
