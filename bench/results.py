#!/usr/bin/env python3
"""The measurements pages, made from bench/results.jsonl, and the results it holds.

  python3 bench/results.py page [--check]
      writes docs/results.md (the quality of the models: "quality" lines), docs/benchmarks.md
      and docs/benchmarks.svg (speed: the lines make bench, make bench-data and make
      bench-serve append), and the results table of README.md (between its results:begin
      and results:end markers); --check exits 1, naming the file, when one is not what the
      lines give (make test runs it so).
  python3 bench/results.py record RUN [RUN...] --system NAME [--beam K --alpha A] [--model FILE] [--bin DIR] [--busy]
      appends one "quality" line per run: its config, seed, precision, threads, training time
      and test metrics (its log's test line: greedy decoding), the machine and the build; with
      --beam it also decodes the run's test set with ./translate --beam K --alpha A (choose A on
      validation: scripts/tune-alpha.sh) and scores it with ./bleu. --model FILE: RUN/FILE is the
      final model instead of RUN/model.bin (say, its checkpoints averaged by ./average), and its
      greedy figures are decoded and scored here, not read from the log. --busy marks a run that
      shared the machine. Several runs: one line each (seeds of one system).
  python3 bench/results.py compare DIR --metric M --command CMD [--pairs A:B,...]
      appends one "quality-compare" line per paired test of DIR/summary.json (./compare's
      --out DIR; only the pairs named, in that order, with --pairs): the difference, its
      interval and p, the metric M it compares (say, beam.sacrebleu) and the command CMD that
      made DIR. The results page shows the latest command's lines.

A figure in the docs is a line of the file: nothing here is typed twice. Not part of the
product."""
import itertools
import json
import math
import os
import sys
import tempfile

from results_record import DATA, ROOT, build_of, compare, cpu_info, record  # noqa: F401 (decode-speed.py's too)
SIG = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


def load():
    with open(DATA, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def quality(lines, **want):
    """The quality lines whose fields equal want's (a list or tuple: any of its values)."""
    out = []
    for r in lines:
        if r.get("bench") != "quality":
            continue
        if all((r.get(k) in v) if isinstance(v, (list, tuple)) else r.get(k) == v for k, v in want.items()):
            out.append(r)
    return sorted(out, key=lambda r: r.get("seed", 0))


def get(r, path):
    for p in path.split("."):
        r = r.get(p) if isinstance(r, dict) else None
    return r


def recorded_mean(lines, system, metric, seeds):
    for r in lines:
        if r.get("bench") == "quality-mean" and r["system"] == system and r["metric"] == metric and r["seeds"] == seeds:
            return r["mean"]
    return None


def stat(lines, runs, metric, sd=True, digits=2):
    """A metric over runs: the value (one run), or the mean ± sd (several); a mean the file
    recorded when some runs lack the figure; '—' when there is none."""
    vals = [get(r, metric) for r in runs]
    have = [v for v in vals if v is not None]
    if not runs or not have:
        return "—"
    if len(runs) == 1:
        return f"{have[0]:.{digits}f}"
    if len(have) < len(vals):
        m = recorded_mean(lines, runs[0]["system"], metric, [r["seed"] for r in runs])
        return "—" if m is None else f"{m:.{digits}f}"
    m = sum(have) / len(have)
    if not sd:
        return f"{m:.{digits}f}"
    s = math.sqrt(sum((v - m) ** 2 for v in have) / (len(have) - 1))
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def by_seed(runs, metric):
    return ", ".join("—" if get(r, metric) is None else f"{get(r, metric):.2f}" for r in runs)


def minutes(runs):
    """The range of training minutes; a busy run's apart when quiet ones have theirs."""
    def span(rs):
        t = [r["train_s"] for r in rs if r.get("train_s")]
        if not t:
            return "—"
        lo, hi = min(t) / 60, max(t) / 60
        return f"{lo:.0f}" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}"
    quiet, busy = [r for r in runs if r.get("quiet") is True], [r for r in runs if r.get("quiet") is False]
    if quiet and busy and span(quiet) != "—" and span(busy) != "—":
        return f"{span(quiet)} (busy: {span(busy)})"
    return span(runs)


def seconds(runs):
    t = [r["train_s"] for r in runs if r.get("train_s")]
    if not t:
        return "—"
    lo, hi = min(t), max(t)
    return f"{lo:.0f} s" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f} s"


def machine(r):
    fam = f" (family {r['cpu_family']}" + (f", model {r['cpu_model']})" if r.get("cpu_model") is not None else ")") \
        if r.get("cpu_family") else ""
    return f"{r.get('cpu', '?')}{fam}"


def how(runs):
    """Precision, threads, quiet or busy, machine: what the minutes were measured on."""
    r = runs[0]
    bits = [r.get("precision", "fp32")]
    th = sorted({x.get("threads") for x in runs if x.get("threads")})
    if th:
        bits.append(" or ".join(map(str, th)) + (" thread" if th == [1] else " threads"))
    q = {x.get("quiet") for x in runs}
    bits.append("quiet" if q == {True} else "busy" if q == {False} else "quiet and busy" if None not in q else "")
    where = list(dict.fromkeys(machine(x) for x in runs))
    if len(where) > 1:  # seeds trained on different machines: each machine with its seeds
        seeds = {m: [str(x.get("seed")) for x in runs if machine(x) == m] for m in where}
        where = [f"{m}: seed{'s' if len(s) > 1 else ''} {', '.join(s)}" for m, s in seeds.items()]
    return ", ".join(b for b in bits if b) + "; " + "; ".join(where)


def alphas(runs):
    a = [get(r, "beam.alpha") for r in runs if get(r, "beam.alpha") is not None]
    return "" if not a else " (α " + ", ".join(f"{x:g}" for x in a) + ")"


# ---- docs/results.md ----

B, BR, BT, BRT = "multi30k-best", "multi30k-best-rnn", "multi30k-best-tok", "multi30k-best-rnn-tok"
E, ET = f"{B} + {BR}", f"{BT} + {BRT}"
ENS = f"./translate runs/{B}/model.bin runs/{BR}/model.bin --beam 5 --alpha 1.5"
E4 = f"{B} + {BR} + {B}-s2 + {BR}-s2"  # the two, each with a second seed (docs/how-to/distill.md)
ENS4 = f"./translate runs/{B}/model.bin runs/{BR}/model.bin runs/{B}-s2/model.bin runs/{BR}-s2/model.bin --beam 5 --alpha 1.5"
# students distilled from the ensemble (docs/how-to/distill.md): (system, layers encoder / decoder)
STUDENTS = [("multi30k-student-6x1", "6 / 1"), ("multi30k-student-6x2", "6 / 2")]


def student_cmd(system):
    return f"./train --config {system} --set precision=bf16 --set task.teacher_precision=bf16"


BEST = [  # (label, command, selection)
    ("best single model (Transformer)", f"./train --config {B}", dict(system=B, precision="fp32", commit="1ab73e0")),
    ("the same, bf16", f"./train --config {B} --set precision=bf16", dict(system=B, precision="bf16")),
    ("the same, three seeds", f"./train --config {B} --seed N --set threads=1", dict(system=B, threads=1)),
    ("best RNN (bi-GRU, scaled-dot)", f"./train --config {BR}", dict(system=BR, precision="fp32", seed=1)),
    ("the same, bf16", f"./train --config {BR} --set precision=bf16", dict(system=BR, precision="bf16")),
    ("the same, three seeds", f"./train --config {BR} --seed N", dict(system=BR, precision="fp32")),
    ("ensemble of the two", ENS, dict(system=E, precision="fp32")),
    ("the same, both bf16", ENS, dict(system=E, precision="bf16")),
] + [(f"distilled student of the ensemble (Transformer {layers})", student_cmd(system), dict(system=system))
       for system, layers in STUDENTS] + [
    ("the 6 / 2 student on the teacher's and the original pairs, 13 epochs",
     student_cmd("multi30k-student-6x2") + " --set task.teacher_mix=add --set train.epochs=13 --out runs/multi30k-student-6x2-mix",
     dict(system="multi30k-student-6x2-mix")),
    ("ensemble of four (the two, and each again with seed 2)", ENS4, dict(system=E4)),
    ("the 6 / 2 student of the four, on their pairs and the original ones, its last three checkpoints averaged",
     student_cmd("multi30k-student-6x2-ens4") + "; ./average --last 3 runs/multi30k-student-6x2-ens4 --out "
     "runs/multi30k-student-6x2-ens4/avg3.bin", dict(system="multi30k-student-6x2-ens4")),
    ("the same 6 / 2 without a teacher, as many steps (40 epochs), its last three checkpoints averaged",
     "./train --config multi30k-student-6x2 --set task.teacher= --set precision=bf16 --set train.epochs=40 --out "
     "runs/multi30k-student-6x2-nodistill; ./average --last 3 …", dict(system="multi30k-student-6x2-nodistill")),
] + [row for size, name in (("6 / 1", "6x1"), ("6 / 1 of d_model 128", "tiny")) for row in (
    (f"the {size} student of the four, its last three checkpoints averaged",
     student_cmd(f"multi30k-student-{name}-ens4") + "; ./average --last 3 …", dict(system=f"multi30k-student-{name}-ens4")),
    (f"the same {size} without a teacher (40 epochs), its last three checkpoints averaged",
     f"./train --config multi30k-student-{name} --set task.teacher= --set precision=bf16 --set train.epochs=40 --out "
     f"runs/multi30k-student-{name}-nodistill; ./average --last 3 …", dict(system=f"multi30k-student-{name}-nodistill")))]
BEST_TOK = [
    ("Transformer on the tokenised files", f"./train --config {BT}", dict(system=BT, precision="fp32")),
    ("RNN on the tokenised files, three seeds", f"./train --config {BRT} --seed N", dict(system=BRT, precision="fp32")),
    ("ensemble of the two", f"./translate runs/{BT}/model.bin runs/{BRT}/model.bin --beam 5 --alpha 1",
     dict(system=ET, precision="fp32")),
    ("Transformer, bf16", f"./train --config {BT} --set precision=bf16", dict(system=BT, precision="bf16")),
    ("RNN, bf16", f"./train --config {BRT} --set precision=bf16", dict(system=BRT, precision="bf16")),
    ("ensemble of the two, both bf16", f"./translate runs/{BT}/model.bin runs/{BRT}/model.bin --beam 5 --alpha 2",
     dict(system=ET, precision="bf16")),
]
TR = "multi30k-transformer"
ABLATION = [
    (TR, f"./train --config {TR}", TR),
    ("+ label smoothing 0.1", "`--set label_smoothing=0.1`", TR + " +ls"),
    ("+ tied embeddings (all)", "`--set tie_embeddings=all`", TR + " +ls +tie"),
    ("+ moving average 0.999", "`--set ema_decay=0.999`", TR + " +ls +tie +ema"),
    ("+ dropout 0.3", "`--set dropout=0.3`", TR + " +ls +tie +ema +dropout0.3"),
    ("RNN on the same BPE", "./train --config multi30k-bpe", "multi30k-bpe"),
    ("+ BPE-dropout 0.1", "`--set bpe_dropout=0.1`", "multi30k-bpe +bpe_dropout"),
    ("+ label smoothing 0.1", f"./train --config {BR}", BR),
    ("Transformer + smoothing + tying + BPE-dropout + lr 0.001", f"./train --config {B}", B),
]
ABLATION_VS = {  # which row each is tested against
    TR + " +ls": TR, TR + " +ls +tie": TR + " +ls", TR + " +ls +tie +ema": TR + " +ls +tie",
    TR + " +ls +tie +ema +dropout0.3": TR + " +ls +tie +ema", "multi30k-bpe": TR,
    "multi30k-bpe +bpe_dropout": "multi30k-bpe", B: TR + " +ls +tie",
}
WORDS = [
    ("BPE (`multi30k-bpe.json`)", dict(system="multi30k-bpe")),
    ("BPE + BPE-dropout 0.1", dict(system="multi30k-bpe +bpe_dropout")),
    ("BPE + BPE-dropout + label smoothing (`multi30k-best-rnn.json`)", dict(system=BR, precision="fp32")),
    ("words (`multi30k.json`, the homework)", dict(system="multi30k attention=scaled_dot", precision="fp32")),
    ("words + label smoothing 0.1", dict(system="multi30k label_smoothing=0.1")),
    ("BPE + BPE-dropout + label smoothing on the tokenised files (`multi30k-best-rnn-tok.json`)",
     dict(system=BRT, precision="fp32")),
]


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def best_rows(lines, spec, tok=False):
    rows = []
    for label, cmd, sel in spec:
        runs = quality(lines, **sel)
        if not runs:
            continue
        cmd = cmd if cmd.startswith("`") else f"`{cmd}`"
        seeds = ", ".join(str(r["seed"]) for r in runs) if len({r["system"] for r in runs}) == 1 else "1"
        if tok:
            rows.append([label, cmd, seeds, stat(lines, runs, "greedy.multibleu"),
                         stat(lines, runs, "beam.multibleu", sd=False) + alphas(runs), minutes(runs), how(runs)])
        else:
            rows.append([label, cmd, seeds, stat(lines, runs, "greedy.sacrebleu"),
                         stat(lines, runs, "beam.sacrebleu", sd=False) + alphas(runs),
                         stat(lines, runs, "beam.chrf", sd=False), stat(lines, runs, "greedy.multibleu", sd=False),
                         stat(lines, runs, "beam.multibleu", sd=False), minutes(runs), how(runs)])
    return rows


def test_text(r):
    """A quality-compare line's difference, interval and p."""
    p = f"p < {r['p_below']:g}" if "p_below" in r else f"p = {r['p']:g}"
    return f"{r['diff']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}], {p}"


def compare_line(lines, a, b):
    for r in lines:
        if r.get("bench") == "quality-compare" and r["a"] == a and r["b"] == b:
            return test_text(r)
    return ""


# students of three sizes, each distilled from the four and trained without a teacher: (layers, d_model and
# ff, distilled system, undistilled system)
SIZES = [("6 / 2", "256, 512", "multi30k-student-6x2-ens4", "multi30k-student-6x2-nodistill"),
         ("6 / 1", "256, 512", "multi30k-student-6x1-ens4", "multi30k-student-6x1-nodistill"),
         ("6 / 1", "128, 512", "multi30k-student-tiny-ens4", "multi30k-student-tiny-nodistill")]


def seed_test(a, b):
    """Scores a and b of two systems, one a seed: the difference of their means and its exact
    permutation p (two-sided: the share of the splits of the pooled scores into groups of their
    sizes whose means differ at least as much); None under two seeds a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    pool, total = a + b, sum(a) + sum(b)
    gap = lambda s: s / len(a) - (total - s) / len(b)  # the difference of means when a's group sums to s
    diff = gap(sum(a))
    far = sum(abs(gap(sum(x))) >= abs(diff) - 1e-9 for x in itertools.combinations(pool, len(a)))
    return diff, far / math.comb(len(pool), len(a))


def latest_decode_speed(lines):
    """The lines of the latest bench/decode-speed.py run."""
    dec = [r for r in lines if r.get("bench") == "decode_speed" and r.get("run")]
    last = max((r["run"] for r in dec), default=None)
    return [r for r in dec if r["run"] == last]


def student_tests(lines):
    """The paired tests of the students' final models: the latest ./compare command's lines."""
    tests = [r for r in lines if r.get("bench") == "quality-compare" and r.get("metric") == "beam.sacrebleu"]
    return [r for r in tests if r["command"] == tests[-1]["command"]] if tests else []


def students_by_size(lines, tests):
    """One row a student size: its scores with and without the four as teacher, the paired tests,
    and its decoding speed against the four's from the latest decode-speed run."""
    dec = latest_decode_speed(lines)
    def speed(system, batch):  # against the four's cell of the run, whichever system came first in it
        def cell(mode, of):
            return next((r for r in dec if r["mode"] == mode and r["precision"] == "int8" and r["batch"] == batch
                         and of(r)), None)
        x = [(cell(m, lambda r: any(p.startswith(f"runs/{system}/") for p in r["models"])),
              cell(m, lambda r: r["system"] == "teacher4")) for m in ("greedy", "beam")]
        return " / ".join(f"{s['sent_per_s'] / t['sent_per_s']:.1f}" for s, t in x) if all(s and t for s, t in x) else "—"
    def test(a, b):
        r = next((t for t in tests if t["a"] == a and t["b"] == b), None)
        return f"{test_text(r)} ({r['runs']})" if r else "—"
    def score(system):
        runs = quality(lines, system=system)
        return f"{stat(lines, runs, 'beam.sacrebleu')} ({len(runs)})" if runs else "—"
    def over_seeds(a, b):
        xa, xb = ([get(r, "beam.sacrebleu") for r in quality(lines, system=s)] for s in (a, b))
        t = seed_test(xa, xb)
        return f"{t[0]:+.2f}, p = {t[1]:.3g} ({len(xa)} + {len(xb)})" if t else "—"
    rows = []
    for layers, dims, dist, plain in SIZES:
        params = next((r["params"] for r in dec if any(m.startswith(f"runs/{dist}/") for m in r["models"])), None)
        rows.append([f"`{dist}`", layers, dims, f"{params / 1e6:.2f} M" if params else "—", score(dist), score(plain),
                     test(dist, plain), over_seeds(dist, plain), test(dist, "four"), speed(dist, 1), speed(dist, 64)])
    four = next((r for r in dec if r["system"] == "teacher4"), None)
    return ("Students of three sizes, each distilled from the four and trained without a teacher for as many\n"
            "steps (`--set task.teacher= --set train.epochs=40` on the same shape), each its last three checkpoints\n"
            "averaged: sacreBLEU beam 5 (runs), the paired tests above (pairs), distillation's gain over the seeds\n"
            "(the difference of the means, with the exact permutation p of the seeds' scores: with three seeds a\n"
            "side no split is rarer than p = 0.1), and decoding speed in int8 as a multiple\n"
            "of the four's" + (f" ({four['params'] / 1e6:.2f} M parameters)" if four else "") +
            ", greedy / beam 5, from the latest run of [benchmarks](benchmarks.md#decoding-a-student-against-its-teacher):\n\n" +
            table(["student", "layers", "d_model, ff", "parameters", "distilled", "no teacher", "distilled − no teacher",
                   "the same over seeds", "distilled − four", "× four, batch 1", "× four, batch 64"], rows))


def results_page(lines):
    o = ["""# Results

What the models score, and how long they train. Every figure is a `"quality"` line of
[`bench/results.jsonl`](../bench/results.jsonl), with the build that trained it, the machine,
its threads and whether the machine was quiet; `python3 bench/results.py page` makes this page
from them (the tests check it is up to date) and `python3 bench/results.py record RUN
--system NAME --beam 5 --alpha A` adds a run (`results.py compare DIR --metric M --command CMD`
the paired tests of a `./compare --out DIR`). Speed is on [benchmarks](benchmarks.md).

How the scores are made: test_2016_flickr (1,000 sentences), read once per final model; beam
search's α chosen on the validation set (`scripts/tune-alpha.sh`), never on the test set.
**sacreBLEU** is 13a BLEU on the cased, detokenised text against the raw references, signature
`""" + SIG + """`; **multi-bleu** is `multi-bleu.perl`'s BLEU on the official lowercased
tokenised text (the homework's figure; a raw-text model's outputs lowercased and tokenised by
`./bleu --normalize en` first). The two are not comparable ([scoring](how-to/scoring.md)).
Minutes are the run's own training time (validation included), on the machine named; "busy"
runs shared the two cores with other work. Mean ± sd over seeds where a row has several.
"""]
    o.append("## Multi30k: the best systems\n")
    o.append("Raw cased text in and out (joint BPE of 8,000 merges).\n")
    o.append(table(["system", "command", "seeds", "sacreBLEU greedy", "sacreBLEU beam 5", "chrF2 beam", "multi-bleu greedy",
                    "multi-bleu beam 5", "minutes", "measured with"], best_rows(lines, BEST)))
    tests = student_tests(lines)
    if tests:
        o.append("The students' final models (beam 5) against each other and the four, in one `./compare --runs`\n"
                 "(paired bootstrap, 1,000 resamples of the test sentences; runs paired by seed, the four's outputs\n"
                 "with every run; the difference is the mean over the pairs):\n")
        o.append(table(["A − B", "runs", "difference [95 % interval], p"],
                       [[f"{r['a']} − {r['b']}", str(r["runs"]), test_text(r)] for r in tests]))
        o.append(f"Command: `{tests[0]['command']}`.\n")
    o.append(students_by_size(lines, tests))
    o.append("The same two models trained on the official lowercased tokenised files (their outputs are in that\n"
             "form, so they have no cased score):\n")
    o.append(table(["system", "command", "seeds", "multi-bleu greedy", "multi-bleu beam 5", "minutes", "measured with"],
                   best_rows(lines, BEST_TOK, tok=True)))
    o.append("## Multi30k: what each piece of the recipe adds\n")
    o.append("Three seeds a row, each row adding one piece to the row above it (the RNN rows start again from the\n"
             "RNN); greedy sacreBLEU with a paired bootstrap test of the row against the one it builds on (1,000\n"
             "resamples of the test sentences, runs paired by seed: the difference, its 95 % interval, p).\n")
    rows = []
    for label, cmd, system in ABLATION:
        runs = quality(lines, system=system, precision="fp32")
        if system == B:
            runs = [r for r in runs if r.get("threads") == 1]
        if not runs:
            continue
        vloss = recorded_mean(lines, system, "best_valid_loss", [1, 2, 3])
        vs = ABLATION_VS.get(system)
        rows.append([label, cmd if cmd.startswith("`") else f"`{cmd}`", stat(lines, runs, "greedy.sacrebleu"),
                     by_seed(runs, "greedy.sacrebleu"), stat(lines, runs, "beam.sacrebleu", sd=False),
                     "—" if vloss is None else f"{vloss:.3f}", compare_line(lines, system, vs) if vs else ""])
    o.append(table(["row", "config", "sacreBLEU greedy", "by seed", "beam 5", "best valid loss", "against"], rows))
    o.append("## Multi30k: subwords and words\n")
    o.append("The word model reads and writes the official lowercased tokenised text; the subword models raw cased\n"
             "text, lowercased and tokenised for this line (but the last, trained on the tokenised files).\n"
             "multi-bleu, three seeds:\n")
    rows = []
    for label, sel in WORDS:
        runs = quality(lines, **sel)
        if not runs:
            continue
        rows.append([label, stat(lines, runs, "greedy.multibleu"), by_seed(runs, "greedy.multibleu"),
                     stat(lines, runs, "beam.multibleu", sd=False), by_seed(runs, "beam.multibleu")])
    o.append(table(["model", "greedy", "by seed", "beam 5", "by seed"], rows))
    o.append("## The homework: three attention variants\n")
    o.append("`./compare --config multi30k --attention dummy,meanpool,scaled_dot --seeds 1,2,3`: the homework's\n"
             "model on the official tokenised files, multi-bleu, greedy (the homework's columns) and beam 5.\n")
    rows = []
    for att in ("dummy", "meanpool", "scaled_dot"):
        runs = quality(lines, system=f"multi30k attention={att}", precision="fp32")
        if not runs:
            continue
        g = [get(r, "greedy.multibleu") for r in runs]
        m = sum(g) / len(g)
        var = sum((v - m) ** 2 for v in g) / (len(g) - 1)
        vloss = recorded_mean(lines, f"multi30k attention={att}", "best_valid_loss", [1, 2, 3])
        rows.append([att, by_seed(runs, "greedy.multibleu"), stat(lines, runs, "greedy.multibleu"), f"{var:.3f}",
                     "—" if vloss is None else f"{vloss:.3f}", stat(lines, runs, "beam.multibleu")])
    o.append(table(["attention", "BLEU by seed", "mean ± sd", "variance", "best valid loss (mean)", "beam 5"], rows))
    o.append(debian(lines))
    o.append(reversal(lines))
    return "\n".join(o)


DEB = "debian-descriptions"  # the system name of scripts/get-debian-descriptions.sh's corpus
DEB_CMD = "./train --config corpus --set task.data_dir=data/debian-descriptions --out runs/debian"


def debian(lines):
    """A corpus nobody here wrote: Debian's package descriptions (docs/tutorials/debian.md)."""
    o = ["## Debian's package descriptions\n",
         "German→English package descriptions of Debian bookworm (`scripts/get-debian-descriptions.sh`: 42,750\n"
         "training pairs, 1,073 validation, 1,181 test segments), trained with `configs/corpus.json` as it\n"
         "is ([the tutorial](tutorials/debian.md)); sacreBLEU and chrF on the raw cased test split.\n"]
    rows = [[f"`{DEB_CMD}`", ", ".join(str(r["seed"]) for r in runs), stat(lines, runs, "greedy.sacrebleu"),
             stat(lines, runs, "beam.sacrebleu") + alphas(runs), stat(lines, runs, "beam.chrf"), minutes(runs), how(runs)]
            for runs in [quality(lines, system=DEB)] if runs]
    o.append(table(["command", "seeds", "sacreBLEU greedy", "sacreBLEU beam 5", "chrF2 beam", "minutes", "measured with"],
                   rows) if rows else "No run recorded yet.\n")
    return "\n".join(o)


def reversal(lines):
    runs = [r for r in lines if r.get("bench") == "quality" and r.get("task") == "reverse"]
    o = ["## String reversal\n",
         "1,000 test strings never seen in training; exact match and token accuracy by greedy decoding,\n"
         "teacher-forced token accuracy (the practical's figure) for its exact setup (`reverse-ist*`).\n"]
    rows = []
    for system in dict.fromkeys(r["system"] for r in runs):
        rs = sorted((r for r in runs if r["system"] == system), key=lambda r: r["seed"])
        rows.append([f"`{system}`", ", ".join(str(r["seed"]) for r in rs), stat(lines, rs, "greedy.exact_match", digits=1),
                     stat(lines, rs, "greedy.token_accuracy", digits=1), stat(lines, rs, "greedy.tf_token_accuracy", digits=1),
                     seconds(rs), how(rs)])
    o.append(table(["config", "seeds", "exact match %", "token accuracy %", "teacher-forced %", "training", "measured with"],
                   rows) if rows else "No reversal results recorded yet.\n")
    return "\n".join(o)


def readme_table(lines):
    """The README's table: the best single model, the best RNN, their ensemble, the homework."""
    def pick(**sel):
        return quality(lines, **sel)
    one, three = pick(system=B, precision="fp32", commit="1ab73e0"), pick(system=B, threads=1)
    bf = pick(system=B, precision="bf16")
    rnn1, rnn3, rnnbf = pick(system=BR, precision="fp32", seed=1), pick(system=BR, precision="fp32"), pick(system=BR, precision="bf16")
    ens, ensbf = pick(system=E, precision="fp32"), pick(system=E, precision="bf16")
    hw = pick(system="multi30k attention=scaled_dot", precision="fp32")
    s2, s4 = pick(system="multi30k-student-6x2"), pick(system="multi30k-student-6x2-ens4")  # the 6/1: docs/results.md
    deb = pick(system=DEB)
    rows = [
        ["best single model (Transformer)", f"`./train --config {B}`", f"{minutes(one)} ({minutes(bf)} in bf16)",
         stat(lines, one, "beam.sacrebleu"), stat(lines, one, "beam.multibleu"),
         f"{stat(lines, three, 'greedy.sacrebleu')} / {stat(lines, three, 'beam.sacrebleu', sd=False)}"],
        ["best RNN (bi-GRU, attention)", f"`./train --config {BR}`", f"{minutes(rnn1)} ({minutes(rnnbf)} in bf16)",
         stat(lines, rnn1, "beam.sacrebleu"), stat(lines, rnn1, "beam.multibleu"),
         f"{stat(lines, rnn3, 'greedy.sacrebleu')} / {stat(lines, rnn3, 'beam.sacrebleu', sd=False)}"],
        ["ensemble of the two", f"`{ENS}`", f"{minutes(ens)} ({minutes(ensbf)} in bf16), both", stat(lines, ens, "beam.sacrebleu"),
         stat(lines, ens, "beam.multibleu"), "one seed"],
    ] + ([["distilled student of the ensemble (Transformer 6 / 2)", f"`{student_cmd('multi30k-student-6x2')}`",
           f"{minutes(s2)} in bf16 (the teacher's translating apart)",
           stat(lines, s2, "beam.sacrebleu"), stat(lines, s2, "beam.multibleu"), "one seed"]] if s2 else []) + ([
        ["distilled student of four models (the two, each with two seeds; 6 / 2, checkpoints averaged)",
         "`./train --config multi30k-student-6x2-ens4 --set precision=bf16 --set task.teacher_precision=bf16` then "
         "`./average --last 3 …` ([distilling](docs/how-to/distill.md#a-stronger-teacher))",
         f"{minutes(s4)} in bf16 (the teachers' apart)", stat(lines, [r for r in s4 if r["seed"] == 1], "beam.sacrebleu"), "—",
         f"{len(s4)} seeds: {stat(lines, s4, 'greedy.sacrebleu')} / {stat(lines, s4, 'beam.sacrebleu', sd=False)}"]]
        if s4 else []) + [
    ] + ([["Debian's package descriptions (Transformer, `corpus.json` as it is; its own test split)",
           f"`{DEB_CMD}`", minutes(deb), stat(lines, deb, "beam.sacrebleu"), "—", "one seed"]] if deb else []) + [
        ["the homework's model (words, scaled-dot)", "`./train --config multi30k`", "—", "—",
         stat(lines, hw[:1], "beam.multibleu"),
         f"multi-bleu {stat(lines, hw, 'greedy.multibleu')} / {stat(lines, hw, 'beam.multibleu', sd=False)}"],
    ]
    m = machine(one[0]) if one else "?"
    deb_note = (f" The Debian row: its own test split ({deb[0]['test']}.de, 1,181 segments), α {get(deb[0], 'beam.alpha'):g},"
                f"\non an {machine(deb[0])}.") if deb else ""
    return (table(["system", "command", "minutes", "sacreBLEU", "multi-bleu", "three seeds: greedy / beam 5"], rows) +
            f"\nMulti30k German→English, test_2016_flickr, beam 5 (α chosen on validation), seed 1: cased\n"
            f"sacreBLEU on the raw text (`{SIG}`) and\n"
            f"multi-bleu on the official lowercased tokenised text; three seeds: sacreBLEU greedy (mean ± sd) and\n"
            f"beam 5 (mean), one thread each. Minutes of training on 2 cores of an {m}, float32\n"
            f"(bf16 where the CPU has avx512_bf16).{deb_note} Every row, its machine and build:\n"
            f"[docs/results.md](docs/results.md).\n")


# ---- docs/benchmarks.md ----

def speed_machine(r):
    fam = f", family {r['cpu_family']}, model {r['cpu_model']}" if r.get("cpu_family") else ", family not recorded"
    isa = f", {r['cpu_isa']}" if r.get("cpu_isa") else ""
    return f"{r.get('cpu', '?')}{fam}{isa}, {r.get('cores', '?')} cores"


def num(r, k, fmt="{:,.0f}"):
    return fmt.format(r[k]) if isinstance(r.get(k), (int, float)) else "—"


def svg_plot(series, path):
    """A line per series of (x, y) points: training tokens/s by make bench run, per machine."""
    W, H, L, T, R, Bm = 720, 300, 60, 20, 200, 40
    pts = [p for _, s in series for p in s]
    if not pts:
        return
    xmax = max(x for x, _ in pts) or 1
    ymax = max(y for _, y in pts) * 1.1
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    sx = lambda x: L + (W - L - R) * x / xmax
    sy = lambda y: H - Bm - (H - T - Bm) * y / ymax
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<line x1="{L}" y1="{H - Bm}" x2="{W - R}" y2="{H - Bm}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - Bm}" stroke="black"/>']
    step = 10 ** math.floor(math.log10(ymax / 2)) if ymax > 0 else 1
    y = 0
    while y <= ymax:
        o.append(f'<text x="{L - 5}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:,.0f}</text>')
        o.append(f'<line x1="{L}" y1="{sy(y):.1f}" x2="{W - R}" y2="{sy(y):.1f}" stroke="#ddd"/>')
        y += step * (2 if ymax / step > 10 else 1)
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">make bench runs, oldest first</text>')
    o.append(f'<text x="14" y="{(T + H - Bm) / 2}" transform="rotate(-90 14 {(T + H - Bm) / 2})" '
             f'text-anchor="middle">training target tokens/s</text>')
    for i, (name, s) in enumerate(series):
        c = colors[i % len(colors)]
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        o.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{d}"/>')
        for x, y in s:
            o.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2" fill="{c}"/>')
        o.append(f'<text x="{W - R + 10}" y="{T + 14 * i + 10}" fill="{c}">{name}</text>')
    o.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(o) + "\n")


def onnx_section(lines):
    """bench/onnx-speed.py's latest run: ./translate against ONNX Runtime on the same model."""
    rs = [r for r in lines if r.get("bench") == "onnx_speed"]
    if not rs:
        return []
    rs = [r for r in rs if r["run"] == rs[-1]["run"]]
    r0 = rs[0]
    return ["## Decoding against ONNX Runtime\n",
            f"`bench/onnx-speed.py`: the model of `{r0.get('system', r0['model'])}` decoded by `./translate` and by its ONNX export on ONNX\n"
            f"Runtime {r0.get('ort_version') or '?'} (`scripts/onnx/translate.js`, [export to ONNX](how-to/onnx.md)), the "
            f"same {r0['lines']:,}\ntest_2016_flickr sentences, {r0['threads']} threads, batch {r0['batch']}, the median of "
            f"{r0['rounds']} rounds, start-up left out;\nint8: `./translate --int8` against `./export --int8`'s graphs (ONNX "
            f"Runtime's dynamic quantisation: two\nschemes, so their outputs differ a little). ONNX Runtime's figure is the reference decoder's "
            f"whole loop,\nits JavaScript (the beam's bookkeeping; the graph reorders its own state) included. The latest run: "
            f"{speed_machine(r0)} (the line keeps its build).\n",
            table(["mode", "precision", "s2s sentences/s", "ONNX Runtime sentences/s", "s2s × ONNX Runtime",
                   "outputs identical"],
                  [["greedy" if r["mode"] == "greedy" else f"beam {r['beam']}", r["precision"], f"{r['s2s_sent_per_s']:.1f}",
                    f"{r['ort_sent_per_s']:.1f}", f"{r['s2s_vs_ort']:.2f}", f"{r['identical_lines']:,} of {r['lines']:,}"]
                   for r in rs])]


def benchmarks_page(lines, svg):
    bench = [r for r in lines if "bench" not in r and "event" not in r and "train_tok_per_s" in r]
    o = ["""# Benchmarks

Speed, measured by `make bench` against PyTorch on the same machine in the same run (the method:
[speed](speed.md)), by `make bench-data` (corpora of 29,000 to 10 million pairs) and by `make
bench-serve` (the server under load). Every figure is a line of
[`bench/results.jsonl`](../bench/results.jsonl); this page is made from it by `python3
bench/results.py page`. Tables are per machine: a virtual machine may name its CPU only
"AMD EPYC", so the family, model and widest matrix instructions are given where the line
recorded them.

## Training and decoding against PyTorch

The homework model (`configs/multi30k.json`, bi-GRU 512, 17.5 M parameters) trained on
length-bucketed Multi30k batches, target tokens per second; `× PyTorch` is our rate over
PyTorch's in the same run (its float32 on OpenBLAS, its bf16 autocast). Decoding:
test_2016_flickr sentences per second, greedy and beam 5, with the trained model where the run
had one. The latest run of each machine (the lines keep which build each run measured):
"""]
    groups = {}
    for r in bench:
        groups.setdefault(speed_machine(r), []).append(r)
    rows = []
    for m, rs in groups.items():
        r = rs[-1]
        rows.append([m, str(len(rs)), num(r, "train_tok_per_s"),
                     num(r, "train_ratio", "{:.2f}"), num(r, "train_bf16_tok_per_s"), num(r, "train_bf16_ratio", "{:.2f}"),
                     num(r, "transformer_train_tok_per_s"), num(r, "transformer_train_ratio", "{:.2f}"),
                     num(r, "trained_greedy_sent_per_s"), num(r, "trained_beam5_sent_per_s"),
                     num(r, "trained_greedy_int8_sent_per_s"), num(r, "peak_rss_mb"), num(r, "rss_ratio", "{:.2f}")])
    o.append(table(["machine", "runs", "RNN fp32 tok/s", "× PyTorch", "RNN bf16 tok/s", "× PyTorch", "Transformer fp32 tok/s",
                    "× PyTorch", "greedy sent/s", "beam 5 sent/s", "greedy int8 sent/s", "peak RSS MB", "RSS × PyTorch"], rows))
    o.append("![training tokens/s by run](benchmarks.svg)\n")
    series = []
    for m, rs in groups.items():
        short = m.split(",")[0] + ("" if "family not" in m else " " + m.split(",")[1].strip())
        series.append((f"{short} fp32", [(i, r["train_tok_per_s"]) for i, r in enumerate(bench) if r in rs]))
        tp = [(i, r["torch_train_tok_per_s"]) for i, r in enumerate(bench) if r in rs and "torch_train_tok_per_s" in r]
        if tp:
            series.append((f"{short} PyTorch fp32", tp))
    svg_plot(series, svg)
    o.append("Every run, per machine, oldest first:\n")
    for m, rs in groups.items():
        o.append(f"**{m}**\n")
        o.append(table(["run", "RNN fp32 tok/s", "× PyTorch", "bf16 tok/s", "× PyTorch", "greedy sent/s", "beam 5 sent/s"],
                       [[str(i + 1), num(r, "train_tok_per_s"), num(r, "train_ratio", "{:.2f}"),
                         num(r, "train_bf16_tok_per_s"), num(r, "train_bf16_ratio", "{:.2f}"),
                         num(r, "trained_greedy_sent_per_s"), num(r, "trained_beam5_sent_per_s")] for i, r in enumerate(rs)]))
    busy = {m: [r for r in rs if "train_busy_tok_per_s" in r] for m, rs in groups.items()}
    if any(busy.values()):
        o.append("## Beside a busy process\n")
        o.append("The same training and decoding (random weights: greedy of 50 steps, beam 5) while one plain CPU loop\n"
                 "runs beside them, ours and PyTorch's each with its default threads, in the same run as the quiet\n"
                 "figures above; `of quiet` is the busy rate over the quiet one, `× threads=1` ours over ours on one\n"
                 "thread under the same load. The latest run of each machine:\n")
        o.append(table(["machine", "RNN fp32 tok/s", "of quiet", "× threads=1", "× PyTorch", "PyTorch of quiet",
                        "greedy sent/s", "of quiet", "× PyTorch", "beam 5 sent/s", "of quiet"],
                       [[m, num(rs[-1], "train_busy_tok_per_s"), num(rs[-1], "train_busy_of_quiet", "{:.0%}"),
                         num(rs[-1], "train_busy_vs_threads1", "{:.2f}"), num(rs[-1], "train_busy_ratio", "{:.2f}"),
                         num(rs[-1], "torch_train_busy_of_quiet", "{:.0%}"),
                         num(rs[-1], "random_greedy_full_busy_sent_per_s"), num(rs[-1], "greedy_full_busy_of_quiet", "{:.0%}"),
                         num(rs[-1], "greedy_full_busy_ratio", "{:.2f}"),
                         num(rs[-1], "random_beam5_busy_sent_per_s", "{:.1f}"), num(rs[-1], "beam5_busy_of_quiet", "{:.0%}")]
                        for m, rs in busy.items() if rs]))
    mpi = {m: [r for r in rs if "train_mpi2_tok_per_s" in r] for m, rs in groups.items()}
    if any(mpi.values()):
        o.append("## Two MPI ranks against one process\n")
        o.append("The same global batches as one process of 2 threads and as `mpirun -np 2` ranks of 1 thread, and the\n"
                 "gradient sum alone (the homework model's 70 MB gradient) over shared memory and TCP loopback; the\n"
                 "latest run of each machine ([MPI](how-to/mpi.md); `bench/scaling-model.py` predicts more machines\n"
                 "from these figures):\n")
        o.append(table(["machine", "one process tok/s", "2 ranks tok/s", "ratio", "the sum's share of a step",
                        "sum, shared memory ms", "sum, TCP ms"],
                       [[m, num(rs[-1], "train_tok_per_s"), num(rs[-1], "train_mpi2_tok_per_s"),
                         num(rs[-1], "train_mpi2_vs_one_process", "{:.2f}"), num(rs[-1], "mpi2_sum_share", "{:.1%}"),
                         num(rs[-1], "sum_shm_ms", "{:.1f}"), num(rs[-1], "sum_tcp_ms", "{:.1f}")]
                        for m, rs in mpi.items() if rs]))
    data = [r for r in lines if r.get("bench") == "data"]
    if data:
        o.append("## Corpora of millions of pairs\n")
        o.append("`make bench-data`: corpora grown from Multi30k, prepared once and streamed, a Transformer of 10 M\n"
                 "parameters ([your own corpus](tutorials/corpus.md) explains the columns). The latest line of each size:\n")
        last = {}
        for r in data:
            last[(speed_machine(r), r["pairs"])] = r
        o.append(table(["machine", "pairs", "prepare", "prepared file", "training peak RSS", "start to first step", "tokens/s"],
                       [[m, f"{n:,}", num(r, "prepare_s", "{:.1f} s"), num(r, "prepared_mb", "{:,.0f} MB"),
                         num(r, "train_peak_mb", "{:,.0f} MB"), num(r, "first_step_s", "{:.2f} s"), num(r, "train_tok_per_s")]
                        for (m, n), r in sorted(last.items())]))
    rs = latest_decode_speed(lines)
    if rs:
        r0 = rs[0]
        o.append("## Decoding: a student against its teacher\n")
        o.append("`bench/decode-speed.py` ([distilling](how-to/distill.md)): each system translates the same "
                 f"{r0['lines']:,}\ntest_2016_flickr sentences with `./translate` ({r0['threads']} threads, the median of "
                 f"{r0['rounds']} rounds, the systems\ntaken in turn each round), its start-up left out; `×` is the rate "
                 f"over the first system's. The latest\nrun: {speed_machine(r0)} (the line keeps its build).\n")
        o.append(table(["system", "models", "parameters", "mode", "precision", "batch", "sentences/s", "×"],
                       [[r["system"], " + ".join(f"`{m}`" for m in r["models"]),
                         f"{r['params'] / 1e6:.2f} M" if r.get("params") else "?",
                         "greedy" if r["mode"] == "greedy" else f"beam {r['beam']}", r["precision"], str(r["batch"]),
                         f"{r['sent_per_s']:.1f}", f"{r['vs_first']:.2f}"] for r in rs]))
        o.append("At batch 1 a step's float32 products have one row per hypothesis, so the step costs what reading\n"
                 "the decoder's weights costs: one model's beam of 4 takes about as long as its beam of 2, and bf16\n"
                 "halves it. A single model's greedy search reads most of its output layer as an int8 screen; an\n"
                 "ensemble's members cannot, since each needs its full distribution, so each member reads all of it.\n")
    o += onnx_section(lines)
    serve = [r for r in lines if r.get("event") == "serve_load"]
    if serve:
        o.append("## The server under load\n")
        o.append("`make bench-serve`: 1 and 64 kept-alive connections for 30 s, one sentence a request; client and\n"
                 "server share the machine's cores.\n")
        o.append(table(["machine", "model", "connections", "requests/s", "p50 ms", "p99 ms", "errors",
                        "server MB: idle → end"],
                       [[speed_machine(r), f"`{r['model']}`", str(r["connections"]),
                         num(r, "requests_per_s"), num(r, "p50_ms", "{:.2f}"), num(r, "p99_ms", "{:.2f}"),
                         f"{r['errors']} of {r['requests']:,}",
                         f"{num(r, 'server_rss_idle_mb', '{:.1f}')} → {num(r, 'server_rss_end_mb', '{:.1f}')}"] for r in serve]))
    return "\n".join(o)


# ---- main ----

def replace_between(text, begin, end, new, what):
    if begin not in text or end not in text:
        sys.exit(f"results: {what} has no {begin} … {end} markers")
    i, j = text.index(begin) + len(begin), text.index(end)
    return text[:i] + new + text[j:]


def page(check):
    lines = load()
    results, readme_path = results_page(lines), os.path.join(ROOT, "README.md")
    readme = open(readme_path, encoding="utf-8").read()
    readme_new = replace_between(readme, "<!-- results:begin -->\n", "<!-- results:end -->", readme_table(lines),
                                 "README.md")
    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "benchmarks.svg")
        bench = benchmarks_page(lines, svg)
        svg_text = open(svg, encoding="utf-8").read() if os.path.exists(svg) else ""
    outputs = [("docs/results.md", results), ("docs/benchmarks.md", bench), ("docs/benchmarks.svg", svg_text),
               ("README.md", readme_new)]
    stale = []
    for rel, text in outputs:
        path = os.path.join(ROOT, rel)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(rel)
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if check:
        if stale:
            sys.stderr.write("results: not what bench/results.jsonl gives: " + ", ".join(stale) +
                             " (run: python3 bench/results.py page)\n")
            sys.exit(1)
        print("results: the pages are bench/results.jsonl's")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("page", "record", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "page":
        page("--check" in sys.argv[2:])
    else:
        (record if sys.argv[1] == "record" else compare)(sys.argv[2:])


if __name__ == "__main__":
    main()
