#!/usr/bin/env python3
"""Writes docs/reference/programs.md: every program's purpose (docs/man/PROGRAM.txt, as its man
page has it) and its own --help, so the page cannot drift from the code.

  python3 scripts/programs-doc.py BIN_DIR [--check]

--check exits 1, naming the first program whose section differs, when the page is not what
the programs print (make test runs it so). Not part of the product."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "reference", "programs.md")
ORDER = ["train", "translate", "bleu", "subword", "compare", "attend", "average", "export", "import", "serve", "speed"]
HEAD = """# The programs

Every program of s2s, with what it is for and its options as `PROGRAM --help` prints them (this
page is made from the programs: `python3 scripts/programs-doc.py build/bin`). Installed, they are
`s2s-PROGRAM`, each with its man page (`man s2s-train`). Every program answers `--help` and
`--version` (which names the build), takes `--opt value` or `--opt=value`, and writes its outputs
whole or not at all.

## Exit codes

| code | meaning |
|---|---|
| 0 | done (`./train`: or paused by `--pause-at`) |
| 1 | a runtime, IO or numeric error, or a corrupt file (named, with what was wrong) |
| 2 | a usage or config error: an unknown option or key, a value out of range, a run that cannot fit in memory, a folder that holds another run |
| 128 + N | stopped by signal N after saving what it had (129 SIGHUP, 130 SIGINT, 143 SIGTERM): a training resumes with `--resume` |
"""


def section(bindir, prog):
    man = open(os.path.join(ROOT, "docs", "man", prog + ".txt"), encoding="utf-8").read().split("\n")
    purpose = man[0].strip()
    desc = []
    for line in man[2:]:
        if line == "EXAMPLES":
            break
        desc.append(line)
    helptext = subprocess.run([os.path.join(bindir, prog), "--help"], capture_output=True, text=True)
    text = (helptext.stdout + helptext.stderr).rstrip("\n")
    body = " ".join(" ".join(desc).split())
    return f"## {prog}\n\n{purpose[0].upper() + purpose[1:]}. {body}\n\n```\n{text}\n```\n"


def page(bindir):
    progs = sorted(p for p in os.listdir(bindir) if os.path.exists(os.path.join(ROOT, "docs", "man", p + ".txt")))
    progs = [p for p in ORDER if p in progs] + [p for p in progs if p not in ORDER]
    return HEAD + "\n" + "\n".join(section(bindir, p) for p in progs)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: programs-doc.py BIN_DIR [--check]")
    new = page(os.path.abspath(sys.argv[1]))
    if "--check" in sys.argv:
        old = open(PAGE, encoding="utf-8").read() if os.path.exists(PAGE) else ""
        if old != new:
            a, b = old.split("\n"), new.split("\n")
            k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            sys.stderr.write(f"docs/reference/programs.md differs from the programs' --help at line {k + 1}:\n"
                             f"  page:     {a[k] if k < len(a) else '(end)'}\n"
                             f"  programs: {b[k] if k < len(b) else '(end)'}\n"
                             "run: python3 scripts/programs-doc.py build/bin\n")
            sys.exit(1)
        print("programs-doc: the page is the programs'")
        return
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(new)


if __name__ == "__main__":
    main()
