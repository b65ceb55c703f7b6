#!/usr/bin/env python3
"""The data benchmark (make bench-data): synthetic corpora of 29k, 1M and 10M pairs grown from
Multi30k (bench/make-corpus.py), each prepared once (./train --prepare) and then trained on
for a few steps, a small Transformer with BPE (configs/multi30k-transformer.json). Records for
each size: the preparation's time and peak RSS, the prepared file's size, the training run's
peak RSS, its time from start to its first logged step, and its training tokens/s (the median
of the steps' rates past the first 10). The sizes train in turn, BENCH_DATA_REPEAT rounds (3),
so that a machine whose speed drifts slows every size alike; each figure is the median of the
rounds (the peak RSS their largest). Appends one JSON line per size to
bench/results.jsonl.

`bench-data.py --table` prints instead the table docs/corpus.md shows: the last line of each
size from bench/results.jsonl.

Environment: BENCH_DATA_SIZES (default "29000 1000000 10000000"), BENCH_DATA_DIR (the corpora,
caches and runs; default runs/bench-data), BENCH_DATA_STEPS (training steps, default 100),
BENCH_DATA_REPEAT (rounds of training runs, default 3)."""
import json
import os
import subprocess
import sys
import time

BIN = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--table" else "build/bin"
CONFIG = "configs/multi30k-transformer.json"


def hwm_mb(pid):
    """The process's peak RSS so far (VmHWM), in MB."""
    try:
        for l in open("/proc/%d/status" % pid):
            if l.startswith("VmHWM:"):
                return int(l.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def run(args, log=None):
    """Runs args; returns (wall seconds, peak RSS in MB, seconds to log's first line or None,
    peak RSS in MB when that line appeared, the output)."""
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    first = first_mb = None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if log and first is None and os.path.exists(log) and os.path.getsize(log) > 0:
            first, first_mb = time.monotonic() - t0, hwm_mb(p.pid)
        time.sleep(0.01)
    out = p.stdout.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench-data: %s failed:\n%s" % (" ".join(args), out))
    return time.monotonic() - t0, ru.ru_maxrss / 1024.0, first, first_mb, out


def cpu():
    info = open("/proc/cpuinfo").read().splitlines()
    get = lambda k: next((l.split(":", 1)[1].strip() for l in info if l.startswith(k)), "")
    return get("model name"), int(get("cpu family") or 0), int(get("model\t") or 0)


def table():
    last = {}
    for l in open("bench/results.jsonl"):
        if '"bench": "data"' in l:
            b = json.loads(l)
            last[b["pairs"]] = b
    for n in sorted(last):
        b = last[n]
        print("| {:,} | {:.1f} s | {:,.0f} MB | {:,} MB | {:.2f} s | {:,.0f} | {} (family {}, model {}), {} cores |".format(
            n, b["prepare_s"], b["prepared_mb"], b["train_peak_mb"], b["first_step_s"], b["train_tok_per_s"], b["cpu"],
            b["cpu_family"], b["cpu_model"], b["cores"]))


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def train_once(corpus, cache, out, steps):
    """One training run on the prepared corpus: (peak MB, seconds to the first step, tokens/s)."""
    subprocess.run(["rm", "-rf", out], check=True)
    sets = ["--set", "task.data_dir=" + corpus, "--set", "task.cache_dir=" + cache]
    # batches of at most 3,500 padded positions: a step's memory and speed do not hang on
    # which lengths the few steps drew (the tail of a larger corpus is longer)
    train = ["--set", "train.max_steps=%d" % steps, "--set", "train.log_every=1", "--set", "train.warmup_steps=10",
             "--set", "train.max_decode_len=8", "--set", "train.batch_tokens=3500"]
    _, peak_mb, first, _, _ = run([BIN + "/train", "--config", CONFIG, "--out", out] + sets + train, log=out + "/log.jsonl")
    tps = [json.loads(l)["tokens_per_s"] for l in open(out + "/log.jsonl") if '"type":"step"' in l][10:]
    return peak_mb, first, median(tps)


def main():
    if "--table" in sys.argv:
        return table()
    sizes = [int(s) for s in os.environ.get("BENCH_DATA_SIZES", "29000 1000000 10000000").split()]
    root = os.environ.get("BENCH_DATA_DIR", "runs/bench-data")
    steps = int(os.environ.get("BENCH_DATA_STEPS", "100"))
    repeats = int(os.environ.get("BENCH_DATA_REPEAT", "3"))
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip() or "unknown"
    name, family, model = cpu()
    lines = {}
    for n in sizes:
        corpus, cache = ["%s/%s-%d" % (root, k, n) for k in ("corpus", "cache")]
        if not os.path.exists(corpus + "/test.en.gz"):  # test.*: corpus.json's names
            subprocess.run([sys.executable, "bench/make-corpus.py", str(n), corpus], check=True)
        subprocess.run(["rm", "-rf", cache], check=True)
        sets = ["--set", "task.data_dir=" + corpus, "--set", "task.cache_dir=" + cache]
        prep_s, prep_mb, _, _, said = run([BIN + "/train", "--config", CONFIG, "--prepare"] + sets)
        print(said.strip().splitlines()[0])
        files = [f for f in os.listdir(cache) if f.endswith(".s2sdata")]
        lines[n] = {"bench": "data", "commit": commit, "cpu": name, "cpu_family": family, "cpu_model": model,
                    "cores": os.cpu_count(), "pairs": n, "prepare_s": round(prep_s, 1), "prepare_peak_mb": round(prep_mb),
                    "prepared_mb": round(os.path.getsize(os.path.join(cache, files[0])) / 1e6, 1), "runs": []}
    # the sizes' training runs in turn, `repeats` rounds: a machine whose speed drifts slows all alike
    for r in range(repeats):
        for n in sizes:
            corpus, cache, out = ["%s/%s-%d" % (root, k, n) for k in ("corpus", "cache", "run")]
            lines[n]["runs"].append(train_once(corpus, cache, out, steps))
    for n in sizes:
        runs = lines[n].pop("runs")
        lines[n].update({"first_step_s": round(median([f for _, f, _ in runs]), 2), "train_peak_mb": round(max(p for p, _, _ in runs)),
                         "train_tok_per_s": round(median([t for _, _, t in runs]), 1),
                         "train_tok_per_s_runs": [round(t, 1) for _, _, t in runs], "steps": steps, "batch_tokens": 3500})
        print(json.dumps(lines[n]))
        with open("bench/results.jsonl", "a") as f:
            f.write(json.dumps(lines[n]) + "\n")


if __name__ == "__main__":
    main()
