#!/usr/bin/env python3
"""Checks a model's ONNX export against ./translate.

  /usr/bin/python3 scripts/onnx-check.py MODEL.bin --src FILE [--n 200] [--bin DIR] [--beam 3]
                   [--tol 1e-4] [--tokenized] [--int8] [--targets FILE]

1. ./export MODEL.bin --format onnx writes the export into a temporary folder; onnx.checker
   (Debian's python3-onnx) checks both graphs with shape inference (full_check).
2. For the first N lines of FILE: ./translate's greedy outputs (or --targets) are scored (--score --logits), and
   the reference decoder on ONNX Runtime (scripts/onnx/translate.js) computes the logits of the same
   (source, output) ids: the largest absolute difference is printed and must be below --tol.
3. Greedy decoding and beam search (--beam K, α 1 and 0.6) through ONNX Runtime must print the same
   lines as ./translate.
With --int8 the export is ./export --int8's (ONNX Runtime's dynamic quantisation) and ./translate
runs --int8 (its own int8 scheme): the two quantise activations differently (per tensor, per row),
so the logits are held to --tol and the outputs' agreement is printed, not required.
Prints "onnx-check: OK" or the differences, and exits 1 on any. Needs python3-onnx and
scripts/onnx/node_modules (scripts/deps.sh --with-onnx); says which is missing and exits 0
without checking where one is. Not part of the product: a check, run by hand or by make test."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NODE_DIR = os.path.join(HERE, "onnx")


def missing():
    try:
        import onnx  # noqa: F401
    except ImportError:
        return "python3-onnx is not installed (Debian: python3-onnx)"
    if not shutil.which("node"):
        return "node is not installed (Debian: nodejs)"
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "onnxruntime-node")):
        return "onnxruntime-node is not installed (cd scripts/onnx && npm install --ignore-scripts)"
    return None


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit(f"onnx-check: {' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--src", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--bin", default=ROOT, help="the folder of the programs (default: the tree's, ./export)")
    ap.add_argument("--beam", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tokenized", action="store_true", help="the lines are tokenised words (./translate --tokenized)")
    ap.add_argument("--int8", action="store_true", help="the int8 export against ./translate --int8")
    ap.add_argument("--targets", help="targets to compare the logits on, a line for each source (default: the greedy outputs)")
    a = ap.parse_args()
    why = missing()
    if why:
        print(f"onnx-check: {why}; nothing checked")
        return 0
    import onnx

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "export")
        run([os.path.join(a.bin, "export"), a.model, "--format", "onnx", "--out", out] + (["--int8"] if a.int8 else []))
        for g in ("encoder", "decoder"):
            onnx.checker.check_model(onnx.load(os.path.join(out, g + ".onnx")), full_check=True)
        src = os.path.join(tmp, "src.txt")
        with open(a.src, encoding="utf-8") as f, open(src, "w", encoding="utf-8") as o:
            o.writelines(f.readlines()[: a.n])
        tr = [os.path.join(a.bin, "translate"), a.model, "--input", src] + (["--tokenized"] if a.tokenized else []) + \
            (["--int8"] if a.int8 else [])
        node = ["node", os.path.join(NODE_DIR, "translate.js"), out, "--input", src]
        # the logits of the targets given, or of ./translate's greedy outputs (the lines with one: an
        # empty output has no score)
        targets = open(a.targets, encoding="utf-8").read() if a.targets else run(tr)
        pairs = [(x, y) for x, y in zip(open(src, encoding="utf-8").read().split("\n"), targets.split("\n")) if x and y]
        ssrc, hyp = os.path.join(tmp, "scored.src"), os.path.join(tmp, "hyp.txt")
        with open(ssrc, "w", encoding="utf-8") as f:
            f.writelines(x + "\n" for x, _ in pairs)
        with open(hyp, "w", encoding="utf-8") as f:
            f.writelines(y + "\n" for _, y in pairs)
        lj = os.path.join(tmp, "logits.jsonl")
        run(tr[:3] + [ssrc] + tr[4:] + ["--score", hyp, "--logits", lj])
        got = run(node + ["--check-logits", lj])
        m = re.search(r"lines (\d+) tokens (\d+) max_abs_diff (\S+)", got)
        worst = float(m.group(3)) if m else float("inf")
        print(f"logits: {got.strip()} (tolerance {a.tol:g})")
        ok &= worst < a.tol and len(pairs) > 0
        for args in ([], ["--beam", str(a.beam)], ["--beam", str(a.beam), "--alpha", "0.6"]):
            ours, theirs = run(tr + args).split("\n"), run(node + args).split("\n")
            same = sum(x == y for x, y in zip(ours, theirs))
            n = len(ours) - 1
            print(f"{' '.join(args) or 'greedy'}: {same - (ours[-1] == theirs[-1])}/{n} lines identical")
            if ours != theirs and not a.int8:
                ok = False
                for i, (x, y) in enumerate(zip(ours, theirs)):
                    if x != y:
                        print(f"  line {i}: ./translate {x!r}\n          ONNX Runtime {y!r}")
                        break
    print("onnx-check:", "OK" if ok else "differences above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
