#!/usr/bin/env python3
"""The Python module's speed against `nmt translate`'s, and its bytes.

Rounds alternate three runs, each a fresh process with the same model,
options and threads: `nmt translate -i IN -o OUT`, the module's
translate_file(IN, OUT), and its translate_batch on the whole file in one
call (its hypotheses written one a line). Each is timed from its start to
its end (the model's loading included); the Python runs also report the
time from before nmt.Translator() to the end, without the interpreter's
start and the import. Prints each round, the medians, sentences/s and the
ratios, and checks that all three outputs are byte-identical.

Usage: /usr/bin/python3 bench/python_speed.py NMT MODULE_DIR MODEL INPUT
       [--rounds N] [-- nmt translate's options...]
  e.g. bench/python_speed.py build/nmt build/python /tmp/main20/en-de.nmt \\
       ../shared/data/multi30k/test_2016_flickr.en.gz --rounds 5
Options after "--" go to both, by nmt translate's flags (--beam 4) and as
the Translator's keyword options (beam=4); only --key value pairs.
"""

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time

PY_RUN = r"""
import sys, time, json
start = time.perf_counter()
import nmt
mode, model, inp, out, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
loaded = time.perf_counter()
t = nmt.Translator(model, **opts)
if mode == "file":
    t.translate_file(inp, out)
else:
    import gzip
    opener = gzip.open if inp.endswith(".gz") else open
    with opener(inp, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    results = t.translate_batch(lines)
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(r.hypotheses[0] + "\n" for r in results))
print(time.perf_counter() - loaded)
"""


def value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def run_timed(cmd, env=None):
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True, text=True).stdout
    return time.perf_counter() - start, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nmt")
    ap.add_argument("module_dir")
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("--rounds", type=int, default=5)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    flags = argv[cut + 1:]
    if len(flags) % 2:
        sys.exit("options: --key value pairs")
    opts = {f[2:].replace("-", "_"): value(v) for f, v in zip(flags[::2], flags[1::2])}
    opener = gzip.open if a.input.endswith(".gz") else open
    with opener(a.input, "rb") as f:
        sentences = f.read().count(b"\n")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(a.module_dir))
    import json
    times = {"nmt translate": [], "translate_file": [], "translate_batch": []}
    inner = {"translate_file": [], "translate_batch": []}
    with tempfile.TemporaryDirectory() as tmp:
        outs = {k: os.path.join(tmp, k.replace(" ", "_") + ".txt") for k in times}
        for r in range(a.rounds):
            cmd = [a.nmt, "translate", "-m", a.model, "-i", a.input, "-o",
                   outs["nmt translate"]] + flags
            wall, _ = run_timed(cmd)
            times["nmt translate"].append(wall)
            for name, mode in (("translate_file", "file"), ("translate_batch", "batch")):
                wall, out = run_timed([sys.executable, "-c", PY_RUN, mode, a.model, a.input,
                                       outs[name], json.dumps(opts)], env)
                times[name].append(wall)
                inner[name].append(float(out.strip().splitlines()[-1]))
            print("round %d: " % (r + 1) + ", ".join(
                "%s %.3f s" % (k, v[-1]) for k, v in times.items()) + ", in-process " + ", ".join(
                "%s %.3f s" % (k, v[-1]) for k, v in inner.items()), flush=True)
        data = {k: open(p, "rb").read() for k, p in outs.items()}
    base = statistics.median(times["nmt translate"])
    print("\n%d sentences, %d rounds, medians (whole process):" % (sentences, a.rounds))
    for k, v in times.items():
        m = statistics.median(v)
        print("  %-16s %.3f s  %7.1f sentences/s  %6.1f%% of nmt translate" % (
            k, m, sentences / m, 100 * base / m))
    print("medians in-process (nmt.Translator() to the end, no interpreter start or import):")
    for k, v in inner.items():
        m = statistics.median(v)
        print("  %-16s %.3f s  %7.1f sentences/s  %6.1f%% of nmt translate's whole process" % (
            k, m, sentences / m, 100 * base / m))
    same = all(d == data["nmt translate"] for d in data.values())
    print("outputs byte-identical: %s" % ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
