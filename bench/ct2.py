#!/usr/bin/env python3
"""nmt against CTranslate2 at its best, side by side in one run, on one
trained nmt model: the model is converted with CTranslate2's own spec classes
(bench/nmt2ct2.py), CTranslate2's thread and batch settings are swept and the
best kept, and both are printed beside each other with BLEU, f32 and int8,
engine only and whole process.

  bench/ct2.py MODEL.nmt [--src F] [--ref F] [--tokenize 13a] [--rounds 2]
                         [--alternate 3] [--latency N]

- nmt engine: bench_translate --real (the translate pipeline in-process:
  SentencePiece in and out, its batching and workers), sentences/s of the
  best warm pass; nmt process: `nmt translate`, whole process, best of ROUNDS.
- CTranslate2 engine: Translator.translate_batch on the SentencePiece pieces
  (no tokenisation, no load), best of ROUNDS after a warm-up pass, for every
  setting of the sweep (inter_threads x intra_threads, and batches of
  sentences or tokens); CTranslate2 process: spm_encode | python3 (load and
  translate at the best engine setting) | spm_decode.
- With a shortlist in the model, each side also runs with it: nmt
  --shortlist on, CTranslate2 with the same table as its vocabulary map
  (nmt2ct2.py --vmap, use_vmap) at the best of its three best settings
  without it.
- The same search on both sides: beam 4, no length normalisation (nmt
  --alpha 0, CTranslate2 length_penalty 0, which lets it stop early), at most
  255 target pieces.
- Then, against the drift of a shared machine's speed (10-20% within the
  hour, and not the same for both tools), each pair is measured again
  ALTERNATE times turn about: `nmt translate` whole process, then
  CTranslate2's engine at its best setting (a warm pass after a warm-up),
  and the ratio of each turn is printed, median and range.
- --latency N: interactive use instead, batch 1 and beam 4: both translate
  N sentences of the source (from its 11th) one call each, after one
  untimed call on each of the first 10 of them, and the table gives the
  latency's p50 and p90 per compute type: nmt's engine (bench_translate
  --latency, its defaults: the one busy worker gets every core) against
  CTranslate2's engine at its best p50 of 1 and of all cores
  (intra_threads).
Without an importable CTranslate2 with its compiled extension (PYTHONPATH:
CTranslate2's python/ directory after its build, with libctranslate2.so on
LD_LIBRARY_PATH), it says so and prints nmt's rows alone. CTranslate2 is
built outside this repository (tests/fixtures/peers/README.md).
Environment: NMT (build/nmt), BENCH (build/bench/bench_translate), DATA.
"""
import argparse
import gzip
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "bench"))
from nmt_file import ModelFile  # noqa: E402
BEAM, MAX_LEN = 4, 255


def ct2_translate_stdin(model_dir, inter, intra, batch, batch_type, vmap=False):
    """Worker: pieces on stdin, pieces on stdout (the process rows)."""
    import ctranslate2
    tr = ctranslate2.Translator(model_dir, device="cpu", inter_threads=inter, intra_threads=intra)
    src = [l.split() for l in sys.stdin.read().splitlines()]
    out = tr.translate_batch(src, max_batch_size=batch, batch_type=batch_type, beam_size=BEAM,
                             length_penalty=0, max_decoding_length=MAX_LEN + 1, use_vmap=vmap)
    sys.stdout.write("".join(" ".join(r.hypotheses[0]) + "\n" for r in out))


def ct2_engine(model_dir, pieces_file, inter, intra, batch, batch_type, rounds, out_file,
               vmap=False):
    """Worker: one setting's best sentences/s over `rounds` warm passes; its
    output pieces to out_file; peak memory of this process."""
    import ctranslate2
    tr = ctranslate2.Translator(model_dir, device="cpu", inter_threads=inter, intra_threads=intra)
    src = [l.split() for l in open(pieces_file, encoding="utf-8").read().splitlines()]
    kw = dict(max_batch_size=batch, batch_type=batch_type, beam_size=BEAM, length_penalty=0,
              max_decoding_length=MAX_LEN + 1, use_vmap=vmap)
    tr.translate_batch(src, **kw)  # warm-up: every shape once
    best, out = 0.0, None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = tr.translate_batch(src, **kw)
        best = max(best, len(src) / (time.perf_counter() - t0))
    with open(out_file, "w", encoding="utf-8") as f:
        f.writelines(" ".join(r.hypotheses[0]) + "\n" for r in out)
    print(json.dumps({"sent_s": best,
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def nmt_cannot(nmt, model, t):
    """Why nmt cannot translate with compute type t here ('' when it can)."""
    p = subprocess.run([nmt, "translate", "-m", model, "--compute-type", t], input="a\n",
                       capture_output=True, text=True)
    return p.stderr.strip().splitlines()[0] if p.returncode != 0 else ""


def to_ct2(model, d, q, vmap=False):
    """The nmt model written as CTranslate2's model directory d, in f32 or int8."""
    check([sys.executable, os.path.join(root, "bench", "nmt2ct2.py"), model, d] +
          (["--quantization", "int8"] if q == "int8" else []) + (["--vmap"] if vmap else []))


def ct2_latency(model_dir, pieces_file, intra, n):
    """Worker: batch-1 latencies (ms) of the first n sentences, one call
    each, after 10 warm-up calls: p50 and p90."""
    import ctranslate2
    tr = ctranslate2.Translator(model_dir, device="cpu", inter_threads=1, intra_threads=intra)
    src = [l.split() for l in open(pieces_file, encoding="utf-8").read().splitlines()]
    kw = dict(beam_size=BEAM, length_penalty=0, max_decoding_length=MAX_LEN + 1)
    for x in src[:10]:
        tr.translate_batch([x], **kw)
    ms = []
    for x in src[:n]:
        t0 = time.perf_counter()
        tr.translate_batch([x], **kw)
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    print(json.dumps({"p50": ms[len(ms) // 2], "p90": ms[len(ms) * 9 // 10]}))


def latency(a, nmt, bench, tmp, spm, src):
    """The --latency table: batch 1, beam 4, per compute type."""
    rows = []  # (run, p50, p90, setting)
    for t in a.types.split(","):
        why = nmt_cannot(nmt, a.model, t)
        if why:
            print(f"nmt {t}: skipped: {why}", file=sys.stderr)
            continue
        e = check([bench, "--real", a.model, "--src", a.src, "--ref", a.ref, "--compute-type", t,
                   "--warmup-lines", "10", "--repeat", "0", "--latency", str(a.latency),
                   "--beam", str(BEAM), "--alpha", "0", "--max-length-a", "0",
                   "--max-length-b", str(MAX_LEN)])
        p50, p90 = map(float, re.search(r"p50 ([\d.]+) ms, p90 ([\d.]+) ms", e).groups())
        rows.append((f"nmt {t}", p50, p90, "defaults"))
    why = ct2_status()
    if not why:
        import ctranslate2
        pieces = os.path.join(tmp, "src.pieces")
        # The same sentences as nmt's timed ones (it warms up on the first 10).
        check(["bash", "-c", f"tail -n +11 {src} | spm_encode --model {spm} >{pieces}"])
        for q in [t for t in a.types.split(",") if t in ("f32", "int8")]:
            d = os.path.join(tmp, f"ct2-{q}")
            to_ct2(a.model, d, q)
            best = None
            for intra in sorted({1, a.threads}):
                r = json.loads(check([sys.executable, __file__, "--latency-worker", d, pieces, str(intra),
                                      str(a.latency)]).splitlines()[-1])
                if best is None or r["p50"] < best[0]:
                    best = (r["p50"], r["p90"], intra)
            rows.append((f"ct2 {q}", best[0], best[1], f"best p50 of intra_threads 1 and "
                         f"{a.threads}: {best[2]} thread(s)"))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"latency: the first {a.latency} sentences after 10 of {a.src}, one call each (batch 1), "
          f"beam {BEAM}, {a.threads} cores ({cpu}); "
          + (f"CTranslate2 not measured: {why}" if why else f"CTranslate2 {ctranslate2.__version__}"))
    print(f"{'run':<10} {'p50 ms':>8} {'p90 ms':>8}  setting")
    for r, p50, p90, setting in rows:
        print(f"{r:<10} {p50:>8.2f} {p90:>8.2f}  {setting}")
    by = {r[0]: r for r in rows}
    for q in ("f32", "int8"):
        if f"nmt {q}" in by and f"ct2 {q}" in by:
            print(f"{q}: ct2 p50 / nmt p50 {by[f'ct2 {q}'][1] / by[f'nmt {q}'][1]:.2f}x")


def ct2_status():
    """'' when CTranslate2 can translate here, else why not."""
    try:
        import ctranslate2
    except ImportError as e:
        return f"no CTranslate2 Python package ({e})"
    if not hasattr(ctranslate2, "Translator"):
        return (f"CTranslate2 {ctranslate2.__version__}'s Python package has no compiled "
                "extension (build it: tests/fixtures/peers/README.md)")
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    data = os.environ.get("DATA", os.path.join(root, "..", "shared", "data"))
    ap.add_argument("--src", default=os.path.join(data, "multi30k", "test_2016_flickr.en.gz"))
    ap.add_argument("--ref", default=os.path.join(data, "multi30k", "test_2016_flickr.de.gz"))
    ap.add_argument("--tokenize", default="13a", help="BLEU tokeniser (nmt score --tokenize)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--alternate", type=int, default=3,
                    help="turns of nmt process against CTranslate2 engine, alternated")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--types", default="f32,int8,bf16")
    ap.add_argument("--latency", type=int, default=0,
                    help="batch-1 latency over N sentences instead of throughput")
    a = ap.parse_args()
    nmt = os.environ.get("NMT", os.path.join(root, "build", "nmt"))
    bench = os.environ.get("BENCH", os.path.join(root, "build", "bench", "bench_translate"))
    for exe in (nmt, bench):
        if not os.access(exe, os.X_OK):
            sys.exit(f"ct2.py: {exe} is missing: build first (README)")
    tmp = tempfile.mkdtemp(prefix="nmt-ct2-")
    try:
        run(a, nmt, bench, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read()


def check(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"ct2.py: failed: {' '.join(cmd)}\n{p.stderr.strip()}")
    return p.stdout


def timed(shell_cmd, rounds, mem):
    """Best wall seconds of `rounds` runs of a shell pipeline, and the peak
    memory (MiB) that the command in it run under `/usr/bin/time -f %M -o MEM`
    wrote to `mem` (none without one)."""
    best, peak = None, 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        p = subprocess.run(["bash", "-c", "set -o pipefail; " + shell_cmd], capture_output=True,
                           text=True)
        s = time.perf_counter() - t0
        if p.returncode != 0:
            sys.exit(f"ct2.py: failed: {shell_cmd}\n{p.stderr.strip()[-2000:]}")
        best = s if best is None else min(best, s)
        if mem:
            peak = max(peak, int(open(mem).read().split()[-1]) / 1024)
    return best, peak


def run(a, nmt, bench, tmp):
    src, ref = os.path.join(tmp, "src.txt"), os.path.join(tmp, "ref.txt")
    open(src, "w", encoding="utf-8").write(read_text(a.src))
    open(ref, "w", encoding="utf-8").write(read_text(a.ref))
    n = sum(1 for _ in open(src, encoding="utf-8"))
    model = ModelFile(a.model, lambda why: sys.exit(f"ct2.py: {a.model}: {why}"))
    header = model.header
    if "vocab/tokens" in header or "vocab/source/sentencepiece" in header:
        sys.exit("ct2.py: give a model that nmt trained (one SentencePiece model, its own ids)")
    spm = os.path.join(tmp, "vocab.spm")
    open(spm, "wb").write(model.blob("vocab/sentencepiece"))
    if a.latency > 0:
        return latency(a, nmt, bench, tmp, spm, src)

    def bleu(hyp):
        return float(check([nmt, "score", "-r", ref, "-i", hyp, "--tokenize", a.tokenize,
                            "--score-only"]).split()[0])

    search = ["--beam", str(BEAM), "--alpha", "0", "--max-length-a", "0", "--max-length-b", str(MAX_LEN)]
    # With a shortlist in the model, each side runs without it and with it
    # (CTranslate2 with the same table as its vocabulary map, use_vmap).
    has_sl = "shortlist" in header
    rows = []  # (run, setting, engine sent/s, process sent/s, BLEU, peak MiB)
    for t, sl in itertools.product(a.types.split(","), ("off", "on") if has_sl else ("off",)):
        why = nmt_cannot(nmt, a.model, t)
        if why:
            rows.append((f"nmt {t}", "skipped: " + why, None, None, None, None))
            continue
        e = check([bench, "--real", a.model, "--src", a.src, "--ref", a.ref, "--compute-type", t,
                   "--repeat", "3", "--shortlist", sl] + search)
        passes = [l.split() for l in e.splitlines() if len(l.split()) == 5 and l.split()[0].isdigit()]
        engine = max(float(p[1]) for p in passes[1:]) if len(passes) > 1 else None
        hyp = os.path.join(tmp, f"nmt-{t}-{sl}.txt")
        mem = os.path.join(tmp, "mem")
        s, peak = timed(f"/usr/bin/time -f %M -o {mem} {nmt} translate -m {a.model} --compute-type {t} "
                        f"--shortlist {sl} {' '.join(search)} -i {src} -o {hyp}", a.rounds, mem)
        rows.append((f"nmt {t}" + (" +sl" if sl == "on" else ""),
                     "defaults (workers and threads for this machine)", engine, n / s, bleu(hyp), peak))

    why = ct2_status()
    if why:
        print_table(a, n, rows, f"CTranslate2 not measured: {why}")
        return
    import ctranslate2
    pieces = os.path.join(tmp, "src.pieces")
    check(["bash", "-c", f"spm_encode --model {spm} <{src} >{pieces}"])
    T = a.threads
    settings = {}  # (compute type, vmap): CTranslate2's model directory and best setting
    threads = sorted({(1, T), (T, 1)} | ({(2, T // 2)} if T >= 4 else set()))
    batches = [(16, "examples"), (32, "examples"), (64, "examples"), (512, "tokens"),
               (1024, "tokens"), (2048, "tokens")]
    for q in ("f32", "int8"):
        d = os.path.join(tmp, f"ct2-{q}")
        to_ct2(a.model, d, q, vmap=has_sl)
        sweep = []
        for (inter, intra), (b, bt) in itertools.product(threads, batches):
            out = os.path.join(tmp, f"ct2-{q}-{inter}x{intra}-{b}{bt[0]}.pieces")
            r = json.loads(check([sys.executable, __file__, "--engine", d, pieces, str(inter),
                                  str(intra), str(b), bt, str(a.rounds), out]).splitlines()[-1])
            sweep.append((r["sent_s"], inter, intra, b, bt, r["peak_mib"], out))
            print(f"  ct2 {q} {inter}x{intra} batches of {b} {bt}: {r['sent_s']:.1f} sent/s",
                  file=sys.stderr)
        best = max(sweep)
        s_s, inter, intra, b, bt, peak, out = best
        settings[(q, False)] = (d, inter, intra, b, bt)
        hyp = os.path.join(tmp, f"ct2-{q}.txt")
        check(["bash", "-c", f"spm_decode --model {spm} <{out} >{hyp}"])
        mem = os.path.join(tmp, "mem")
        s, ppeak = timed(f"spm_encode --model {spm} <{src} | /usr/bin/time -f %M -o {mem} "
                         f"{sys.executable} {__file__} --translate {d} {inter} {intra} {b} {bt} | "
                         f"spm_decode --model {spm} >/dev/null", a.rounds, mem)
        rows.append((f"ct2 {q}", f"best of {len(sweep)}: {inter} translator(s) x {intra} thread(s), "
                     f"batches of {b} {bt}", s_s, n / s, bleu(hyp), max(peak, ppeak)))
        if has_sl:
            # With nmt's shortlist as its vocabulary map, the best of the three
            # best settings without it: the map changes which setting wins (one
            # run's best without it, 1 x 2 threads, was 17% slower with it than
            # 2 x 1).
            tried = []
            for _, inter, intra, b, bt, _, _ in sorted(sweep, reverse=True)[:3]:
                out = os.path.join(tmp, f"ct2-{q}-vmap-{inter}x{intra}-{b}{bt[0]}.pieces")
                r = json.loads(check([sys.executable, __file__, "--engine", d, pieces, str(inter),
                                      str(intra), str(b), bt, str(a.rounds), out,
                                      "vmap"]).splitlines()[-1])
                tried.append((r["sent_s"], inter, intra, b, bt, r["peak_mib"], out))
                print(f"  ct2 {q} +vmap {inter}x{intra} batches of {b} {bt}: {r['sent_s']:.1f} sent/s",
                      file=sys.stderr)
            v_s, inter, intra, b, bt, v_peak, out = max(tried)
            settings[(q, True)] = (d, inter, intra, b, bt)
            r = {"sent_s": v_s, "peak_mib": v_peak}
            hyp = os.path.join(tmp, f"ct2-{q}-vmap.txt")
            check(["bash", "-c", f"spm_decode --model {spm} <{out} >{hyp}"])
            s, ppeak = timed(f"spm_encode --model {spm} <{src} | /usr/bin/time -f %M -o {mem} "
                             f"{sys.executable} {__file__} --translate {d} {inter} {intra} {b} {bt} vmap | "
                             f"spm_decode --model {spm} >/dev/null", a.rounds, mem)
            rows.append((f"ct2 {q} +vmap", f"use_vmap (nmt's shortlist), best of the 3 best: "
                         f"{inter} x {intra}, batches of {b} {bt}", r["sent_s"], n / s,
                         bleu(hyp), max(r["peak_mib"], ppeak)))
    print_table(a, n, rows, f"CTranslate2 {ctranslate2.__version__}, converted by bench/nmt2ct2.py")
    by = {r[0]: r for r in rows}
    for q, x in itertools.product(("f32", "int8"), ("", " +sl")):
        m = by.get(f"nmt {q}{x}")
        c = by.get(f"ct2 {q}" + (" +vmap" if x else ""))
        if m and c and m[3] and c[2]:
            print(f"{q}{x}: nmt process / ct2 engine {m[3] / c[2]:.2f}x; engine / engine "
                  f"{m[2] / c[2]:.2f}x; process / process {m[3] / c[3]:.2f}x")
    if a.alternate <= 0:
        return
    print(f"alternated, {a.alternate} turns each: nmt process against CTranslate2 engine "
          f"(sentences/s; median ratio, range)")
    for q, sl in itertools.product(("f32", "int8"), (False, True)):
        if (q, sl) not in settings or not (f"nmt {q}" in by and by[f"nmt {q}"][3]):
            continue  # not measured (or nmt cannot run this compute type here)
        d, inter, intra, b, bt = settings[(q, sl)]
        mine, theirs = [], []
        for _ in range(a.alternate):
            s, _ = timed(f"{nmt} translate -m {a.model} --compute-type {q} "
                         f"--shortlist {'on' if sl else 'off'} {' '.join(search)} -i {src} "
                         f"-o {os.path.join(tmp, 'alt.txt')}", 1, None)
            out = os.path.join(tmp, "alt.pieces")
            r = json.loads(check([sys.executable, __file__, "--engine", d, pieces, str(inter),
                                  str(intra), str(b), bt, "1", out] +
                                 (["vmap"] if sl else [])).splitlines()[-1])
            mine.append(n / s)
            theirs.append(r["sent_s"])
        ratios = sorted(m / t for m, t in zip(mine, theirs))
        mid = ratios[len(ratios) // 2]
        print(f"{q}{' +sl' if sl else ''}: nmt process "
              + " ".join(f"{v:.1f}" for v in mine) + ", ct2 engine"
              + (" +vmap" if sl else "") + " " + " ".join(f"{v:.1f}" for v in theirs)
              + f": {mid:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x)")


def print_table(a, n, rows, note):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"{n} sentences ({a.src}), beam {BEAM}, no length normalisation, {a.threads} cores "
          f"({cpu}); best of {a.rounds} rounds; {note}")
    print(f"{'run':<14} {'engine s/s':>10} {'process s/s':>11} {'BLEU':>6} {'peak MiB':>8}  setting")
    fmt = lambda v, f: (f % v) if v is not None else "-"
    for r, setting, e, p, b, m in rows:
        print(f"{r:<14} {fmt(e, '%.1f'):>10} {fmt(p, '%.1f'):>11} {fmt(b, '%.2f'):>6} "
              f"{fmt(m, '%.0f'):>8}  {setting}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--engine":
        d, pieces, inter, intra, b, bt, rounds, out = sys.argv[2:10]
        ct2_engine(d, pieces, int(inter), int(intra), int(b), bt, int(rounds), out,
                   vmap=sys.argv[10:11] == ["vmap"])
    elif len(sys.argv) > 1 and sys.argv[1] == "--latency-worker":
        d, pieces, intra, n = sys.argv[2:6]
        ct2_latency(d, pieces, int(intra), int(n))
    elif len(sys.argv) > 1 and sys.argv[1] == "--translate":
        d, inter, intra, b, bt = sys.argv[2:7]
        ct2_translate_stdin(d, int(inter), int(intra), int(b), bt, vmap=sys.argv[7:8] == ["vmap"])
    else:
        main()
