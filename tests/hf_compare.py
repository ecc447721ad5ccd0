#!/usr/bin/env python3
"""Checks a converted Hugging Face fixture against what Transformers wrote
(tests/fixtures/hf/*/expected.json): greedy and beam-4 translations token
for token, beam scores, and nmt score -m's per-token log-probabilities of
the references within 1e-3 (0.25 with --compute-type int8 or bf16, whose
translations may part at near ties). Python's standard library only.

usage: hf_compare.py NMT MODEL.nmt EXPECTED.json [--compute-type T] [nmt options...]
"""
import json
import subprocess
import sys

nmt, model, expected = sys.argv[1:4]
extra = sys.argv[4:]
quantised = "--compute-type" in extra and extra[extra.index("--compute-type") + 1] != "f32"
exp = json.load(open(expected, encoding="utf-8"))
sentences = exp["sentences"]
src = "\n".join(s["source"] for s in sentences) + "\n"
failures = []


def run(args, text):
    p = subprocess.run([nmt] + args, input=text.encode(), capture_output=True)
    if p.returncode != 0:
        sys.exit("nmt %s failed: %s" % (" ".join(args), p.stderr.decode()))
    return p.stdout.decode().splitlines()


for beam in (1, 4):
    # Without a length penalty (Transformers' length_penalty 0, nmt's
    # --alpha 0) both searches are exact: a beam stops once no live
    # hypothesis can beat the finished ones, and greedy takes the best token
    # until </s>. (With one, Transformers stops when the best live
    # hypothesis's current mean does not beat the worst finished one, nmt
    # looks 4 tokens ahead: near-ties can end differently.)
    norm = ["--alpha", "0"]
    out = run(["translate", "-m", model, "--beam", str(beam), "--scores"] + norm + extra, src)
    for k, (line, s) in enumerate(zip(out, sentences)):
        score, text = line.split("\t", 1)
        want = s["beam%d" % beam]
        if text != want["text"]:
            failures.append("beam %d sentence %d: nmt %r, Transformers %r" %
                            (beam, k + 1, text, want["text"]))
        if "score" in want and not quantised and abs(float(score) - want["score"]) > 1e-3:
            failures.append("beam %d sentence %d: score %s, Transformers %.6f" %
                            (beam, k + 1, score, want["score"]))

# nmt score -m: the references' log-probabilities, token by token.
with open(model + ".src", "w", encoding="utf-8") as f:
    f.write(src)
with open(model + ".ref", "w", encoding="utf-8") as f:
    f.write("\n".join(s["reference"] for s in sentences) + "\n")
out = run(["score", "-m", model, "--src", model + ".src", "--tgt", model + ".ref",
           "--output-format", "jsonl", "--word-scores"] + extra, "")
worst = 0.0
for k, (line, s) in enumerate(zip(out, sentences)):
    got = json.loads(line)["token_logprobs"] if "token_logprobs" in line else None
    if got is None:
        failures.append("score: no token_logprobs in %r" % line)
        break
    want = s["reference_logprobs"]
    if len(got) != len(want):
        failures.append("score sentence %d: %d tokens, Transformers %d" % (k + 1, len(got), len(want)))
        continue
    worst = max(worst, max(abs(a - b) for a, b in zip(got, want)))
# int8 and bf16 round the weights: their translations may part from
# Transformers' f32 ones at a near tie (reported, not failed), but no
# reference token's log-probability moves by more than this.
tolerance = 0.25 if quantised else 1e-3
far = worst > tolerance
if far:
    failures.append("score: a token's log-probability differs by %.2e (> %g)" % (worst, tolerance))
for f in failures:
    print(expected + ": " + f)
print("%s: %d sentences, %d differences, largest log-probability difference %.2e%s" %
      (expected, len(sentences), len(failures), worst, " (quantised)" if quantised else ""))
sys.exit(1 if far or (failures and not quantised) else 0)
