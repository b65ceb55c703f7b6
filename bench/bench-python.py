#!/usr/bin/env python3
"""make bench's Python line: translating the same lines from Python (the s2s package over
libs2s.so) and with ./translate, in turn, ROUNDS times each; prints one JSON line with the
median seconds of each, their ratio, and whether the outputs were identical.

  /usr/bin/python3 bench/bench-python.py MODEL INPUT [--rounds 3] [--beam 1] [--threads 0] [--bin .]

./translate's time is its whole process (loading the model, reading, decoding, writing);
Python's is loading the model and translating the list in a process that has imported s2s
already (what a notebook pays per call). Not part of the product: a measurement."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import s2s  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--bin", default=ROOT)
    a = ap.parse_args()
    with open(a.input, encoding="utf-8") as f:
        lines = f.read().splitlines()
    cli = [os.path.join(a.bin, "translate"), a.model, "--input", a.input, "--beam", str(a.beam)]
    if a.threads:
        cli += ["--threads", str(a.threads)]
    t_cli, t_py, same = [], [], True
    for r in range(a.rounds):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):  # the order swapped every round: the machine drifts
            t0 = time.perf_counter()
            if which == 0:
                out = subprocess.run(cli, capture_output=True, text=True, check=True).stdout.splitlines()
                t_cli.append(time.perf_counter() - t0)
                want = out
            else:
                with s2s.Model(a.model, threads=a.threads) as m:
                    got = m.translate(lines, beam=a.beam, errors="empty")
                t_py.append(time.perf_counter() - t0)
        same &= got == want
    c, p = statistics.median(t_cli), statistics.median(t_py)
    print(json.dumps({"event": "python_translate", "lines": len(lines), "beam": a.beam, "rounds": a.rounds,
                      "translate_s": round(c, 3), "python_s": round(p, 3), "python_vs_translate": round(p / c, 4),
                      "identical": same, "library": os.path.basename(s2s.library)}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
