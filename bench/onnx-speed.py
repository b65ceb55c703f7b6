#!/usr/bin/env python3
"""Decoding speed of one model in s2s and in ONNX Runtime, in one run: ./translate against the
reference decoder on ONNX Runtime (scripts/onnx/translate.js, onnxruntime-node) on the model's
ONNX export, the same source lines, threads and batch, greedy and beam search, the two taken in
turn each round so that a machine's drift falls on both.

  bench/onnx-speed.py MODEL.bin --src FILE[.gz] [--lines N] [--rounds R] [--threads T] [--beam K]
                      [--batch B] [--system NAME] [--record bench/results.jsonl]

Float32 and int8: ./translate --int8 (its own scheme) against ONNX Runtime on ./export --int8's
graphs (ONNX Runtime's dynamic quantisation; an RNN's cells stay float32 there).
Prints a table (sentences a second, the median of the rounds; s2s over ONNX Runtime) and, with
--record, appends one "onnx_speed" JSON line a mode and precision. The time is each program's wall clock less
its start (the same command on no lines: loading the model, and for Node its runtime). Both
outputs are compared line by line; the line says whether they were identical. Needs node and
scripts/onnx/node_modules (scripts/deps.sh); says so and exits 0 without measuring elsewhere."""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import results  # bench/results.py: the machine and build, as its other lines record them

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_DECODER = os.path.join(ROOT, "scripts", "onnx", "translate.js")


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("onnx-speed: %s failed:\n%s" % (" ".join(cmd), p.stderr.decode(errors="replace")))
    return dt, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--src", required=True)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bin", default=os.environ.get("S2S_BIN_DIR", ROOT))
    ap.add_argument("--system", help="the model's name in the record (default: its path)")
    ap.add_argument("--record")
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(ROOT, "scripts", "onnx", "node_modules", "onnxruntime-node")):
        print("onnx-speed: onnxruntime-node is not installed (scripts/deps.sh); nothing measured")
        return
    translate = os.path.join(a.bin, "translate")
    machine, build = results.cpu_info(), results.build_of(translate)
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        export = os.path.join(tmp, "onnx")
        timed([os.path.join(a.bin, "export"), a.model, "--format", "onnx", "--out", export])
        src, empty = os.path.join(tmp, "src"), os.path.join(tmp, "empty")
        opener = gzip.open if a.src.endswith(".gz") else open
        with opener(a.src, "rt", encoding="utf-8") as f, open(src, "w", encoding="utf-8") as out:
            lines = [l for _, l in zip(range(a.lines), f)]
            out.writelines(lines)
        open(empty, "w").close()
        engines = {("s2s", "fp32"): [translate, a.model], ("onnxruntime", "fp32"): ["node", NODE_DECODER, export]}
        q8 = os.path.join(tmp, "onnx-int8")  # ONNX Runtime's dynamic quantisation against ./translate --int8
        if subprocess.run([os.path.join(a.bin, "export"), a.model, "--format", "onnx", "--int8", "--out", q8],
                          capture_output=True).returncode == 0:
            engines[("s2s", "int8")] = [translate, a.model, "--int8"]
            engines[("onnxruntime", "int8")] = ["node", NODE_DECODER, q8]
        else:
            print("onnx-speed: ./export --int8 failed on this model: int8 not measured")
        times, outs = {}, {}
        for _ in range(a.rounds):
            for mode in ("greedy", "beam"):
                extra = ["--batch", str(a.batch), "--threads", str(a.threads)] + (["--beam", str(a.beam)] if mode == "beam" else [])
                for key, cmd in engines.items():
                    start, _ = timed(cmd + ["--input", empty] + extra)
                    dt, out = timed(cmd + ["--input", src] + extra)
                    if dt <= start:
                        sys.exit("onnx-speed: %s translated %d lines no slower than its start-up: give more --lines" % (key, len(lines)))
                    times.setdefault(key + (mode,), []).append(dt - start)
                    outs[key + (mode,)] = out
        n = len(lines)
        print("| mode | precision | s2s sentences/s | ONNX Runtime sentences/s | s2s × ONNX Runtime | outputs identical |")
        print("|---|---|---|---|---|---|")
        rec = open(a.record, "a") if a.record else None
        for prec in sorted({p for _, p in engines}):
            for mode in ("greedy", "beam"):
                ours, theirs = (n / statistics.median(times[(e, prec, mode)]) for e in ("s2s", "onnxruntime"))
                a_lines, b_lines = (outs[(e, prec, mode)].decode().split("\n") for e in ("s2s", "onnxruntime"))
                same = sum(x == y for x, y in zip(a_lines, b_lines)) - 1  # the empty piece after the last newline
                print("| %s | %s | %.1f | %.1f | %.2f | %d/%d |" % (mode if mode == "greedy" else "beam %d" % a.beam, prec, ours,
                                                                     theirs, ours / theirs, same, n))
                if rec:
                    rec.write(json.dumps({"bench": "onnx_speed", "system": a.system or a.model, "model": a.model, "mode": mode,
                                          "beam": a.beam if mode == "beam" else 1, "precision": prec, "batch": a.batch,
                                          "lines": n, "rounds": a.rounds, "threads": a.threads,
                                          "s2s_sent_per_s": round(ours, 2), "ort_sent_per_s": round(theirs, 2),
                                          "s2s_vs_ort": round(ours / theirs, 3), "identical_lines": same,
                                          "ort_version": ort_version(), "cpu": machine["cpu"],
                                          "cpu_family": machine.get("cpu_family"), "cpu_model": machine.get("cpu_model"),
                                          "cpu_isa": machine["cpu_isa"], "cores": os.cpu_count(), "commit": build,
                                          "run": started, "source": "bench/onnx-speed.py"}) + "\n")
        if rec:
            rec.close()


def ort_version():
    try:
        with open(os.path.join(ROOT, "scripts", "onnx", "node_modules", "onnxruntime-node", "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return None


if __name__ == "__main__":
    main()
