#!/usr/bin/env python3
"""Runs a notebook headless, every cell in order, and fails on the first cell that raises.

  python3 notebooks/run.py [NOTEBOOK]   (default: notebooks/attention.ipynb)

With Debian's python3-nbclient and python3-ipykernel the notebook runs in a Jupyter kernel, as
in Jupyter; without them its code cells run as one script (IPython's display prints). The
outputs are not written back: the notebook in the repository stays without them."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def as_script(path):
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    try:
        import IPython.display  # noqa: F401  (there: the real display)
    except ImportError:  # a stand-in: display prints
        import types
        m = types.ModuleType("IPython.display")
        m.display = print
        m.Image = lambda p: f"<image {p}>"
        sys.modules["IPython"] = types.ModuleType("IPython")
        sys.modules["IPython.display"] = m
    scope = {"__name__": "__main__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        print(f"--- cell {i}")
        exec(compile(src, f"{path} cell {i}", "exec"), scope)


def main():
    path = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "attention.ipynb"))
    os.environ.setdefault("S2S_ROOT", os.path.dirname(HERE))
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError:
        print("run.py: no nbclient (Debian: python3-nbclient python3-ipykernel): the code cells as a script")
        os.chdir(os.path.dirname(path))
        as_script(path)
        return 0
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=1200, resources={"metadata": {"path": os.path.dirname(path)}}).execute()
    n = sum(c.cell_type == "code" for c in nb.cells)
    print(f"run.py: {os.path.basename(path)}: {n} code cells ran")
    for c in nb.cells:  # what the cells printed, for the log
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream":
                sys.stdout.write(o["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
