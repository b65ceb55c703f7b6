"""bench/results.py compare: a ./compare summary's paired tests become lines of the results
file, exactly as the summary has them, and the results page shows the latest command's; a pair
the summary lacks, or a file that is no summary, is refused."""

import json
import os
import shutil
import subprocess
import sys

from conftest import program, write_lines

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def results(repo, *args):
    return subprocess.run([sys.executable, str(repo / "bench" / "results.py"), *args], capture_output=True, text=True)


def test_compare_lines_are_the_summary_s(tiny_run, tmp_path):
    repo = tmp_path / "repo"
    for d in ("scripts", "bench", "docs"):
        shutil.copytree(os.path.join(ROOT, d), repo / d)
    shutil.copy(os.path.join(ROOT, "README.md"), repo)
    run = tiny_run[0]
    # the run's outputs against an oracle (the references): a difference below zero in every resample
    program("compare", "--runs", "--name", f"mine={run}", "--outputs", "test.hyp", "--against", f"oracle={run}/test.ref",
            "--out", tmp_path / "cmp")
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    t = summary["paired_bootstrap"][0]
    assert (t["a"], t["b"]) == ("mine", "oracle") and t["difference"] < 0
    before = (repo / "bench" / "results.jsonl").read_text().splitlines()
    cmd = "./compare --runs --name mine=RUN --against oracle=REF"
    r = results(repo, "compare", str(tmp_path / "cmp"), "--metric", "beam.sacrebleu", "--command", cmd, "--pairs", "mine:oracle")
    assert r.returncode == 0, r.stderr
    after = (repo / "bench" / "results.jsonl").read_text().splitlines()
    assert after[:len(before)] == before and len(after) == len(before) + 1
    line = json.loads(after[-1])
    assert line["bench"] == "quality-compare" and line["metric"] == "beam.sacrebleu" and line["command"] == cmd
    assert (line["a"], line["b"], line["runs"]) == ("mine", "oracle", t["seeds"])
    assert line["diff"] == round(t["difference"], 2) and (line["lo"], line["hi"]) == (round(t["ci_low"], 2), round(t["ci_high"], 2))
    assert line["resamples"] == summary["resamples"]
    assert t["p"] == 0, "against the references no resample reaches zero"
    assert "p" not in line and line["p_below"] == round(1 / summary["resamples"], 3)
    # the page shows the latest command's tests
    assert results(repo, "page").returncode == 0
    page = (repo / "docs" / "results.md").read_text()
    assert f"Command: `{cmd}`" in page and "| mine − oracle | " in page
    assert "distilled − undistilled" not in page, "an older command's tests are still shown"
    # refused: a pair the summary has not, a folder with no summary; the file is left as it was
    r = results(repo, "compare", str(tmp_path / "cmp"), "--metric", "m", "--command", "c", "--pairs", "mine:nobody")
    assert r.returncode != 0 and "no paired test mine:nobody" in r.stderr and "mine:oracle" in r.stderr
    r = results(repo, "compare", str(tmp_path), "--metric", "m", "--command", "c")
    assert r.returncode != 0 and "not a ./compare summary" in r.stderr
    r = results(repo, "compare", str(tmp_path / "cmp"), "--command", "c")
    assert r.returncode != 0 and "usage" in r.stderr
    assert (repo / "bench" / "results.jsonl").read_text().splitlines() == after
    # two runs right on alternate lines (their outputs made from the references): neither wins
    # every resample, so p is a fraction, kept as the summary has it
    refs = (run / "test.ref").read_text().splitlines()
    for name, keep in (("even", 0), ("odd", 1)):
        shutil.copytree(run, tmp_path / name)
        write_lines(tmp_path / name / "test.hyp", [x if i % 2 == keep else "x" for i, x in enumerate(refs)])
    program("compare", "--runs", "--name", f"even={tmp_path / 'even'}", "--name", f"odd={tmp_path / 'odd'}",
            "--outputs", "test.hyp", "--out", tmp_path / "cmp2")
    t = json.loads((tmp_path / "cmp2" / "summary.json").read_text())["paired_bootstrap"][0]
    assert (t["a"], t["b"]) == ("even", "odd") and 0 < t["p"] < 1, t
    r = results(repo, "compare", str(tmp_path / "cmp2"), "--metric", "beam.sacrebleu", "--command", "c2", "--pairs", "even:odd")
    assert r.returncode == 0, r.stderr
    line = json.loads((repo / "bench" / "results.jsonl").read_text().splitlines()[-1])
    assert line["p"] == t["p"] and "p_below" not in line and line["diff"] == round(t["difference"], 2)


def test_students_by_size_reads_its_lines():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import results
    dist, plain = "multi30k-student-6x1-ens4", "multi30k-student-6x1-nodistill"
    q = lambda system, seed, bleu: {"bench": "quality", "system": system, "seed": seed, "beam": {"sacrebleu": bleu}}
    speed = lambda system, models, mode, batch, rate, run="2026-01-02T00:00:00": {
        "bench": "decode_speed", "system": system, "models": models, "params": 6103209 if system == "s" else 56191140,
        "mode": mode, "precision": "int8", "batch": batch, "sent_per_s": rate, "vs_first": 1.0, "run": run}
    cmp = lambda a, b, diff: {"bench": "quality-compare", "a": a, "b": b, "metric": "beam.sacrebleu", "runs": 2, "diff": diff,
                              "lo": diff - 1, "hi": diff + 1, "p": 0.25, "command": "c"}
    lines = [q(dist, 1, 40.0), q(dist, 2, 41.0), q(plain, 1, 39.5), q(plain, 2, 39.0),
             # the student first in its run: the ratios are to the four's cells, not to the first system's
             speed("s", [f"runs/{dist}/avg3.bin"], "greedy", 1, 123.4), speed("s", [f"runs/{dist}/avg3.bin"], "beam", 1, 67.8),
             speed("s", [f"runs/{dist}/avg3.bin"], "greedy", 64, 64.2), speed("s", [f"runs/{dist}/avg3.bin"], "beam", 64, 45.6),
             speed("teacher4", ["runs/t/model.bin"], "greedy", 1, 10.0), speed("teacher4", ["runs/t/model.bin"], "beam", 1, 10.0),
             speed("teacher4", ["runs/t/model.bin"], "greedy", 64, 20.0), speed("teacher4", ["runs/t/model.bin"], "beam", 64, 10.0),
             speed("s", [f"runs/{dist}/avg3.bin"], "beam", 1, 99.0, run="2025-01-01T00:00:00"),  # an older run: not shown
             cmp(dist, plain, 0.5), cmp(dist, "four", -0.75)]
    text = results.students_by_size(lines, results.student_tests(lines))
    row = next(l for l in text.splitlines() if l.startswith(f"| `{dist}` |"))
    # over the seeds: 2 of the 6 splits of {40, 41, 39.5, 39} into pairs are as far apart as +1.25
    assert row == (f"| `{dist}` | 6 / 1 | 256, 512 | 6.10 M | 40.50 ± 0.71 (2) | 39.25 ± 0.35 (2) | "
                   "+0.50 [-0.50, +1.50], p = 0.25 (2) | +1.25, p = 0.333 (2 + 2) | "
                   "-0.75 [-1.75, +0.25], p = 0.25 (2) | 12.3 / 6.8 | 3.2 / 4.6 |")
    assert "(56.19 M parameters)" in text
    tiny = next(l for l in text.splitlines() if l.startswith("| `multi30k-student-tiny-ens4` |"))
    assert tiny.count("—") == 8, "a size with no lines shows no figures"


def test_seed_test_is_the_exact_permutation_p():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import results
    # three seeds a side, every one of a above every one of b: of the 20 splits, this one and its mirror
    assert results.seed_test([3.0, 4.0, 5.0], [0.0, 1.0, 2.0]) == (3.0, 0.1)
    assert results.seed_test([0.0, 1.0, 2.0], [3.0, 4.0, 5.0]) == (-3.0, 0.1)
    # three against two: 10 splits, and only this one has means 3.5 apart
    assert results.seed_test([3.0, 4.0, 5.0], [0.0, 1.0]) == (3.5, 0.1)
    diff, p = results.seed_test([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    assert diff == 0 and p == 1.0, "equal scores: every split is as far apart"
    assert results.seed_test([1.0], [2.0, 3.0]) is None and results.seed_test([1.0, 2.0], []) is None


def test_how_names_every_machine_with_its_seeds():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import results
    run = lambda seed, cpu, fam, model: {"seed": seed, "precision": "bf16", "threads": 2, "quiet": False, "cpu": cpu,
                                          "cpu_family": fam, "cpu_model": model}
    amd, intel = ("AMD EPYC", 26, 2), ("Intel(R) Xeon(R) Processor", 6, 167)
    assert results.how([run(1, *amd), run(2, *amd)]) == "bf16, 2 threads, busy; AMD EPYC (family 26, model 2)"
    assert results.how([run(1, *amd), run(2, *amd), run(3, *intel)]) == (
        "bf16, 2 threads, busy; AMD EPYC (family 26, model 2): seeds 1, 2; "
        "Intel(R) Xeon(R) Processor (family 6, model 167): seed 3")
