"""The course notebook (notebooks/attention.ipynb) end to end, headless: in a Jupyter kernel
where Debian's python3-nbclient and python3-ipykernel are installed, else its cells as a script
(notebooks/run.py). Its cells assert the practical's own numbers."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.mark.skipif(os.environ.get("S2S_PY_QUICK") == "1",
                    reason="a slow build (sanitized or portable): its calls are test_package's, the other builds run it")
def test_the_attention_notebook_runs(tmp_path):
    if not os.path.isdir(os.path.join(ROOT, "data", "multi30k", "tok")):
        r = subprocess.run(["bash", "scripts/get-multi30k.sh"], cwd=ROOT, capture_output=True, text=True)
        if r.returncode:
            pytest.skip(f"Multi30k is missing and cannot be fetched: {r.stderr.strip()[-200:]}")
    env = dict(os.environ, S2S_ROOT=ROOT, S2S_NOTEBOOK_RUNS=str(tmp_path / "runs"))
    env.pop("S2S_MULTI30K_MODEL", None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "notebooks", "run.py")], env=env, capture_output=True,
                       text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "reverse-ist: test exact match" in r.stdout
    assert (tmp_path / "runs" / "reverse-ist" / "model.bin").exists()
