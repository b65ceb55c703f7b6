"""The Python the documentation shows, run: every ```python block of the README and of
docs/how-to/python.md, in order, one namespace a page, in a sandbox holding configs/ and the
model the page starts from (runs/r, as the README's tour trains it). A block that imports the
PyTorch loader runs where Debian's python3-torch is installed."""

import importlib.util
import os
import re
import shutil

import pytest

import s2s

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = ["README.md", "docs/how-to/python.md"]


def blocks(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)


@pytest.fixture(scope="module")
def model_r(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs-model") / "r"
    s2s.train("reverse", out=d, set={"train.max_steps": 300}).run()
    return d


@pytest.mark.skipif(os.environ.get("S2S_PY_QUICK") == "1",
                    reason="a slow build (sanitized or portable): its calls are test_package's, the other builds run it")
@pytest.mark.parametrize("page", PAGES)
def test_the_pages_python_runs(page, model_r, tmp_path, monkeypatch):
    code = blocks(page)
    assert code, f"{page}: no Python block"
    os.symlink(os.path.join(ROOT, "configs"), tmp_path / "configs")
    shutil.copytree(model_r, tmp_path / "runs" / "r")
    monkeypatch.chdir(tmp_path)
    scope = {}
    for i, block in enumerate(code):
        if "s2s import pytorch" in block and importlib.util.find_spec("torch") is None:
            continue
        exec(compile(block, f"{page}, Python block {i + 1}", "exec"), scope)
