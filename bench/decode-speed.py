#!/usr/bin/env python3
"""Decoding speed of several systems in one run: each a model or an ensemble, timed with
./translate on the same source lines, greedy and beam, float32 / bf16 / int8, one sentence a
batch and 64, the systems taken in turn each round so that a machine's drift falls on all.

  bench/decode-speed.py --src FILE[.gz] [--lines N] [--rounds R] [--threads T] [--beam K]
                          [--modes greedy,beam] [--precisions fp32,bf16,int8] [--batches 1,64]
                          [--record bench/results.jsonl] NAME=MODEL[+MODEL...] ...

Prints a table (sentences a second, the median of the rounds, and the ratio to the first
system) and, with --record, appends one "decode_speed" JSON line a measurement. The time is the
program's wall clock less its start (the same command on no lines: loading the models). bf16
needs a CPU with avx512_bf16 (./translate refuses it elsewhere): it is left out there, and said.
Parameters come from the s2s package (python/s2s) over the built library."""
import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import results  # bench/results.py: the machine and build, as its quality lines record them

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu():
    info = {"cpu": platform.processor() or "unknown", "cpu_flags": ""}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name":
                info["cpu"] = value.strip()
            elif key == "cpu family":
                info["cpu_family"] = int(value)
            elif key == "model":
                info["cpu_model"] = int(value)
            elif key == "flags":
                info["cpu_flags"] = value
                break
    except OSError:
        pass
    return info


def params(models):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import s2s
    except ImportError as e:
        print("decode-speed: no parameter counts (the s2s package: %s)" % e, file=sys.stderr)
        return None
    total = 0
    for m in models:
        with s2s.Model(m) as model:
            total += model.params
    return total


def run(translate, models, src, args, threads):
    cmd = [translate] + models + ["--input", src, "--threads", str(threads)] + args
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("decode-speed: %s failed:\n%s" % (" ".join(cmd), p.stderr.decode(errors="replace")))
    return dt, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("systems", nargs="+", help="NAME=MODEL[+MODEL...]")
    ap.add_argument("--src", required=True)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--modes", default="greedy,beam")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--bin", default=os.environ.get("S2S_BIN_DIR", ROOT))
    ap.add_argument("--record")
    a = ap.parse_args()
    translate = os.path.join(a.bin, "translate")
    systems = []
    for s in a.systems:
        name, _, models = s.partition("=")
        if not models:
            ap.error("a system is NAME=MODEL[+MODEL...], got " + s)
        systems.append((name, models.split("+")))
    machine = cpu()
    build, isa = results.build_of(translate), results.cpu_info()["cpu_isa"]
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())  # one run's lines share it
    precisions = a.precisions.split(",")
    if "bf16" in precisions and "avx512_bf16" not in machine["cpu_flags"]:
        print("decode-speed: no avx512_bf16 on this CPU: bf16 left out", file=sys.stderr)
        precisions.remove("bf16")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        opener = gzip.open if a.src.endswith(".gz") else open
        with opener(a.src, "rt", encoding="utf-8") as f, open(src, "w", encoding="utf-8") as out:
            lines = [l for _, l in zip(range(a.lines), f)]
            out.writelines(lines)
        empty = os.path.join(tmp, "empty")
        open(empty, "w").close()
        cells = [(m, p, b) for m in a.modes.split(",") for p in precisions for b in map(int, a.batches.split(","))]
        times = {}
        for r in range(a.rounds):
            for mode, prec, batch in cells:
                for name, models in systems:
                    extra = (["--beam", str(a.beam), "--alpha", str(a.alpha)] if mode == "beam" else []) + ["--batch", str(batch)]
                    if prec != "fp32":
                        extra.append("--" + prec)
                    start, _ = run(translate, models, empty, extra, a.threads)
                    dt, _ = run(translate, models, src, extra, a.threads)
                    if dt <= start:  # too few lines: the start-up's noise is the measurement
                        sys.exit("decode-speed: %s (%s, %s, batch %d) translated %d lines in %.3f s, no longer than its "
                                 "start-up alone (%.3f s): give more --lines" % (name, mode, prec, batch, len(lines), dt,
                                                                               start))
                    times.setdefault((name, mode, prec, batch), []).append(dt - start)
        counts = {name: params(models) for name, models in systems}
        n = len(lines)
        print("| system | parameters | mode | precision | batch | sentences/s | × %s |" % systems[0][0])
        print("|---|---|---|---|---|---|---|")
        rec = open(a.record, "a") if a.record else None
        for mode, prec, batch in cells:
            base = n / statistics.median(times[(systems[0][0], mode, prec, batch)])
            for name, models in systems:
                sps = n / statistics.median(times[(name, mode, prec, batch)])
                p = counts[name]
                print("| %s | %s | %s | %s | %d | %.1f | %.2f |" % (name, "%.2f M" % (p / 1e6) if p else "?", mode, prec, batch,
                                                                   sps, sps / base))
                if rec:
                    rec.write(json.dumps({"bench": "decode_speed", "system": name, "models": models, "params": p,
                                          "mode": mode, "beam": a.beam if mode == "beam" else 1, "precision": prec,
                                          "batch": batch, "lines": n, "rounds": a.rounds, "threads": a.threads,
                                          "sent_per_s": round(sps, 2), "vs_first": round(sps / base, 3),
                                          "cpu": machine["cpu"], "cpu_family": machine.get("cpu_family"),
                                          "cpu_model": machine.get("cpu_model"),
                                          "cpu_isa": isa, "cores": os.cpu_count(), "commit": build, "run": started,
                                          "source": "bench/decode-speed.py"}) + "\n")
        if rec:
            rec.close()


if __name__ == "__main__":
    main()
