"""bench/decode-speed.py on the tiny model: one line a measurement with the build and the run,
the systems' parameters from the package, the first system's ratio 1; and the results page's
table made from those lines."""

import os
import re
import subprocess
import sys

from conftest import BIN, json_lines, program, write_lines

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "bench", "decode-speed.py")


def test_every_cell_is_a_line(tiny_run, tmp_path):
    model = tiny_run[0] / "model.bin"
    src = write_lines(tmp_path / "src", ["abcdabcd", "dcbaab", "aabbccdd", "cab"] * 500)
    rec = tmp_path / "speed.jsonl"
    r = subprocess.run([sys.executable, SCRIPT, "--src", str(src), "--lines", "2000", "--rounds", "1", "--threads", "1",
                        "--modes", "greedy,beam", "--precisions", "fp32,int8", "--batches", "1", "--bin", BIN,
                        "--record", str(rec), f"one={model}", f"two={model}+{model}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = json_lines(rec)
    assert [(x["system"], x["mode"], x["precision"]) for x in lines] == [
        (s, m, p) for m in ("greedy", "beam") for p in ("fp32", "int8") for s in ("one", "two")]
    build = re.search(r"build (\S+)\)", program("translate", "--version").stdout).group(1)
    one = next(x for x in lines if x["system"] == "one")
    for x in lines:
        assert x["commit"] == build and x["run"] == lines[0]["run"] and x["lines"] == 2000 and x["sent_per_s"] > 0
        assert x["params"] == (1 if x["system"] == "one" else 2) * one["params"]
        assert x["beam"] == (5 if x["mode"] == "beam" else 1)
        if x["system"] == "one":
            assert x["vs_first"] == 1
    # the printed table holds the recorded rates (printed to 0.1, recorded to 0.01)
    rows = [row.split(" | ") for row in r.stdout.splitlines() if row.startswith(("| one |", "| two |"))]
    printed = {(c[0][2:], c[2], c[3]): float(c[5]) for c in rows}
    assert printed.keys() == {(x["system"], x["mode"], x["precision"]) for x in lines}
    for x in lines:
        assert abs(printed[(x["system"], x["mode"], x["precision"])] - x["sent_per_s"]) <= 0.051

    # the benchmarks page shows the latest run's lines
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import results
    older = dict(lines[0], run="2000-01-01T00:00:00", sent_per_s=123456.0)
    page = results.benchmarks_page([older] + lines, str(tmp_path / "b.svg"))
    assert "## Decoding: a student against its teacher" in page
    assert "123456.0" not in page and build not in page  # the docs name no commit: the lines keep it
    assert all(f"{x['sent_per_s']:.1f}" in page for x in lines)
    assert all(f"{x['sent_per_s']:.1f}" in page for x in lines)
