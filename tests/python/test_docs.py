"""The Python the documentation shows, run: every ```python block of docs/how-to/python.md, in
order, in one namespace; the README's block through the interpreter command the README prints
(from the tree's root); the example of the package's docstring (help(s2s)). Each in a sandbox
holding configs/ and the model the page starts from (runs/r, as the README's tour trains it). A
block that imports the PyTorch loader runs where Debian's python3-torch is installed."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import s2s

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = ["docs/how-to/python.md"]


def blocks(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)


@pytest.fixture(scope="module")
def model_r(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs-model") / "r"
    s2s.train("reverse", out=d, set={"train.max_steps": 300}).run()
    return d


QUICK = pytest.mark.skipif(os.environ.get("S2S_PY_QUICK") == "1",
                           reason="a slow build (sanitized or portable): its calls are test_package's, the other builds run it")


def sandbox(tmp_path, model_r):
    os.symlink(os.path.join(ROOT, "configs"), tmp_path / "configs")
    shutil.copytree(model_r, tmp_path / "runs" / "r")


@QUICK
def test_the_readmes_python_runs_as_printed(model_r, tmp_path):
    """Pasted into the interpreter the README says to start at the tree's root."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    start = re.search(r"at the tree's root,\s+`([^`]+)`", readme)
    assert start, "README.md does not say how to start Python at the tree's root"
    code = blocks("README.md")
    assert len(code) == 1, "README.md: one Python block"
    sandbox(tmp_path, model_r)
    os.symlink(os.path.join(ROOT, "python"), tmp_path / "python")  # the tree's root, as far as the block goes
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # its python3: this one
    r = subprocess.run(start.group(1) + " -", shell=True, cwd=tmp_path, input=code[0], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, f"`{start.group(1)}` with README.md's block: exit {r.returncode}\n{r.stderr}"
    out = r.stdout.splitlines()
    assert out and out[0].startswith("['") and any(l.startswith("test ") for l in out), r.stdout


@QUICK
def test_the_packages_docstring_example_runs(model_r, tmp_path, monkeypatch):
    """help(s2s) shows an example; it runs as shown."""
    example = "\n".join(l[4:] for l in s2s.__doc__.splitlines() if l.startswith("    "))
    assert "s2s.Model(" in example and "s2s.train(" in example, s2s.__doc__
    sandbox(tmp_path, model_r)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "s2s's docstring", "exec"), {})


@QUICK
@pytest.mark.parametrize("page", PAGES)
def test_the_pages_python_runs(page, model_r, tmp_path, monkeypatch):
    code = blocks(page)
    assert code, f"{page}: no Python block"
    sandbox(tmp_path, model_r)
    monkeypatch.chdir(tmp_path)
    scope = {}
    for i, block in enumerate(code):
        if "s2s import pytorch" in block and importlib.util.find_spec("torch") is None:
            continue
        exec(compile(block, f"{page}, Python block {i + 1}", "exec"), scope)
