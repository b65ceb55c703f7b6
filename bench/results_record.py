#!/usr/bin/env python3
"""Lines for bench/results.jsonl: a finished run's scores ("quality", results.py record) and a
./compare summary's paired tests ("quality-compare", results.py compare), with the machine and
the build that made them. Used by bench/results.py (its usage is there) and
bench/decode-speed.py. Not part of the product."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "results.jsonl")


def build_of(program):
    """The build a program says it is (its --version), or "unknown"."""
    ver = subprocess.run([program, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"build ([0-9a-f]+(-dirty)?|unknown)", ver)
    return m.group(1) if m else "unknown"


def cpu_info():
    info = open("/proc/cpuinfo").read().splitlines()
    g = lambda k: next((l.split(":", 1)[1].strip() for l in info if l.startswith(k)), "")
    flags = " " + g("flags") + " "
    isa = "none"
    for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16"):
        if f" {f} " in flags:
            isa = f
    return {"cpu": g("model name"), "cpu_family": int(g("cpu family") or 0), "cpu_model": int(g("model\t") or 0),
            "cpu_isa": isa, "cores": os.cpu_count()}


def record(args):
    runs, system, beam, alpha, bindir, busy = [], None, 0, 1.0, os.path.join(ROOT, "build", "bin"), False
    model = "model.bin"
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--system", "--beam", "--alpha", "--bin", "--model") and i + 1 >= len(args):
            sys.exit(f"results: {a} needs a value")
        if a == "--system":
            system, i = args[i + 1], i + 2
        elif a == "--beam":
            beam, i = int(args[i + 1]), i + 2
        elif a == "--alpha":
            alpha, i = float(args[i + 1]), i + 2
        elif a == "--bin":
            bindir, i = os.path.abspath(args[i + 1]), i + 2
        elif a == "--model":
            model, i = args[i + 1], i + 2
        elif a == "--busy":
            busy, i = True, i + 1
        elif a.startswith("-"):
            sys.exit(f"results: {a}: unknown option")
        else:
            runs.append(a)
            i += 1
    if not runs or not system:
        sys.exit("usage: results.py record RUN [RUN...] --system NAME [--beam K --alpha A] [--model FILE] [--bin DIR] [--busy]")
    if os.path.basename(model) != model:
        sys.exit(f"results: --model {model}: a file name in each run's directory, not a path")
    commit = build_of(os.path.join(bindir, "train"))
    lines = []
    for run in runs:
        cfg = json.load(open(os.path.join(run, "config.json")))
        log = [json.loads(l) for l in open(os.path.join(run, "log.jsonl")) if l.strip()]
        test = next((l for l in reversed(log) if l.get("type") == "test"), None)
        if test is None:
            sys.exit(f"results: {run}: no test line (the run has not ended)")
        epochs = [l for l in log if l.get("type") == "epoch"]
        task, tr = cfg["task"], cfg["train"]
        r = {"bench": "quality", "task": "reverse" if task["type"] == "reverse" else "translate", "system": system,
             "configs": [cfg.get("name")], "seed": cfg.get("seed"), "precision": tr.get("precision", "fp32"),
             "commit": commit, **cpu_info(), "threads": tr.get("threads") or os.cpu_count(), "quiet": not busy,
             "train_s": round(epochs[-1]["elapsed_s"], 1) if epochs and "elapsed_s" in epochs[-1] else None,
             "epochs": test.get("epochs"),
             "test": f"{task.get('test_size')} strings" if task["type"] == "reverse" else task.get("test_prefix", "test")}
        if task["type"] != "reverse":
            r["data_dir"] = task.get("data_dir")
        if model == "model.bin":
            r["greedy"] = log_scores(test)
        else:  # the log's test line is the best checkpoint's, not this model's
            if task["type"] == "reverse":
                sys.exit("results: --model: a translation run's option")
            r["model"] = model
            r["greedy"] = {k: v for k, v in decode_scores(bindir, run, model, cfg, 0, 0).items() if k not in ("k", "alpha")}
        if beam and task["type"] != "reverse":
            r["beam"] = decode_scores(bindir, run, model, cfg, beam, alpha)
        r["source"] = "bench/results.py record"
        lines.append({k: v for k, v in r.items() if v is not None})
    with open(DATA, "a", encoding="utf-8") as f:
        for r in lines:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            print(json.dumps(r, ensure_ascii=False))


def log_scores(test):
    """The greedy figures of a run's log's test line."""
    greedy = {}
    for k, name in (("test_sacrebleu", "sacrebleu"), ("test_chrf", "chrf"), ("test_bleu", "multibleu")):
        if k in test:
            greedy[name] = round(test[k], 2)
    for k in ("exact_match", "token_accuracy", "tf_token_accuracy"):
        if "test_" + k in test:
            greedy[k] = round(100 * test["test_" + k], 2)
    return greedy


def decode_scores(bindir, run, model, cfg, beam, alpha):
    """The test set decoded by RUN/MODEL (greedy when beam is 0) and scored."""
    task = cfg["task"]
    d, p = task["data_dir"], task["test_prefix"]
    pick = lambda lang: next((f for f in (f"{d}/{p}.{lang}", f"{d}/{p}.{lang}.gz") if os.path.exists(f)), None)
    src, ref = pick(task["src_lang"]), pick(task["trg_lang"])
    subword = task.get("subword", "none") not in ("none", "")
    with tempfile.TemporaryDirectory() as tmp:
        def plain(path, name):
            if not path.endswith(".gz"):
                return path
            out = os.path.join(tmp, name)
            subprocess.run(f"zcat '{path}' > '{out}'", shell=True, check=True)
            return out
        src, ref, hyp = plain(src, "src"), plain(ref, "ref"), os.path.join(tmp, "hyp")
        search = ["--beam", str(beam), "--alpha", f"{alpha:g}"] if beam else []
        cmd = [os.path.join(bindir, "translate"), os.path.join(run, model), *search, "--input", src, "--output", hyp] + \
            ([] if subword else ["--tokenized"])
        subprocess.run(cmd, check=True, capture_output=True)
        bleu = os.path.join(bindir, "bleu")
        out = {"k": beam, "alpha": alpha}
        score = lambda *a: float(re.search(r"= ([0-9.]+)", subprocess.run([bleu, *a], capture_output=True, text=True,
                                                                        check=True).stdout).group(1))
        if subword:
            out["sacrebleu"] = score("--sacrebleu", "--width", "2", ref, hyp)
            out["chrf"] = score("--chrf", "--width", "2", ref, hyp)
        else:
            out["multibleu"] = score(ref, hyp)
        return out


def compare(args):
    """results.py compare DIR --metric M --command CMD [--pairs A:B,...]: DIR/summary.json's paired
    tests (./compare's), one "quality-compare" line each, with the command that made them."""
    opts, dirs, i = {"--metric": None, "--command": None, "--pairs": None}, [], 0
    while i < len(args):
        if args[i] in opts:
            if i + 1 >= len(args):
                sys.exit(f"results: {args[i]} needs a value")
            opts[args[i]], i = args[i + 1], i + 2
        elif args[i].startswith("-"):
            sys.exit(f"results: {args[i]}: unknown option")
        else:
            dirs.append(args[i])
            i += 1
    if len(dirs) != 1 or not opts["--metric"] or not opts["--command"]:
        sys.exit("usage: results.py compare DIR --metric M --command CMD [--pairs A:B,...]")
    path = os.path.join(dirs[0], "summary.json")
    try:
        summary = json.load(open(path, encoding="utf-8"))
        tests = summary["paired_bootstrap"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"results: {path}: not a ./compare summary ({e})")
    want = None if opts["--pairs"] is None else [tuple(p.split(":", 1)) for p in opts["--pairs"].split(",")]
    if want and any(len(p) != 2 for p in want):
        sys.exit(f"results: --pairs {opts['--pairs']}: expected A:B,...")
    have = {(t["a"], t["b"]): t for t in tests if "difference" in t}  # pairs of no common seed have no test
    missing = [f"{a}:{b}" for a, b in want or [] if (a, b) not in have]
    if missing:
        sys.exit(f"results: {path} has no paired test " + ", ".join(missing) +
                 " (it has " + ", ".join(f"{a}:{b}" for a, b in have) + ")")
    lines = []
    for a, b in want or list(have):
        t = have[(a, b)]
        r = {"bench": "quality-compare", "task": "multi30k", "a": a, "b": b, "metric": opts["--metric"],
             "runs": t["seeds"], "diff": round(t["difference"], 2), "lo": round(t["ci_low"], 2),
             "hi": round(t["ci_high"], 2)}
        r.update({"p_below": round(1 / summary["resamples"], 3)} if t["p"] == 0 else {"p": t["p"]})
        r.update({"resamples": summary["resamples"], "command": opts["--command"], "source": path})
        lines.append(r)
    with open(DATA, "a", encoding="utf-8") as f:
        for r in lines:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            print(json.dumps(r, ensure_ascii=False))
