#!/usr/bin/env python3
"""Runs the commands a documentation page shows, in a sandbox, in order; fails on the first that
fails or prints other than the page says, naming it.

  python3 scripts/doctest.py BIN_DIR PAGE [PAGE...]

The commands are the lines of the page's indented code blocks whose first word is a program
(./PROGRAM, scripts/…, DIR/bin/… of a venv the page made, or one on PATH); a line that follows
a command and is not one is that command's expected output, compared with what it printed. Fenced blocks (```) are examples of
output or files, not run. Every command runs exactly as the page prints it: nothing is added to it. Markers, HTML comments
that the rendered page does not show:
  <!-- doctest: before: COMMAND -->      run COMMAND here (a model the page's commands use)
  <!-- doctest: not run: REASON -->      the next block is not run; the log says so, and why
  <!-- doctest: long -->                 the next block trains for long and is not run; each of its
                                         commands must come again later on the page as its short
                                         form, the same text with options added after it (the page
                                         says "to try it in a minute"), which runs; a long command
                                         without one fails the page
`make` lines are the set-up the tests themselves run, and are listed as not run.
What the sandbox changes around the commands, each said in the log as it applies:
  precision=bf16          becomes fp32 on a CPU without avx512_bf16 (the command would refuse)
  ./serve …               runs on a free port in the background until the page ends; the page's
                          localhost:8080 becomes that port
  scripts/get-…           runs in the tree, whose data/ the sandbox links (fetched once for
                          every page); a page on Debian's descriptions is not run, and says why,
                          where no Debian mirror answers (exit 77 when no page is left)
  Multi30k                the sandbox's data/multi30k has the whole training set and the first
                          50 pairs of the validation and test sets (evaluating a model is most of
                          a short run's time); scripts/get-multi30k.sh checks the tree's own data
The sandbox holds links to the programs, configs/, scripts/, bench/, tests/, data/, the prepared
data (runs/.cache) and what `pip install .` reads (pyproject.toml, python/, include/), and nothing
else: a page makes what it uses. It is the commands' HOME too. Exit 77 when Multi30k is
missing and cannot be fetched (the caller skips)."""
import gzip
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILTINS = {"cd", "export", "for", "if", "test", "set", "echo", "printf", "mkdir", "cat", "cmp", "zcat", "head",
            "sed", "diff", "ls", "rm"}
EVAL_LINES = 50
LONG = object()  # parse's mark for the block after <!-- doctest: long -->
TIMEOUT = 600


def is_command(line):
    words = line.split()
    if not words:
        return False
    w = words[0]
    while "=" in w and not w.startswith(("./", "/")) and len(words) > 1:  # VAR=value prefixes
        words = words[1:]
        w = words[0]
    return (w.startswith(("./", "scripts/", "bench/", "/usr/bin/")) or re.match(r"[\w.-]+/bin/", w) is not None  # a venv's
            or w in BUILTINS or shutil.which(w) is not None)


def strip_comment(line):
    """The command without a trailing ` # comment` (not inside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i > 0 and line[i - 1] == " " and (i + 1 == len(line) or line[i + 1] == " "):
            return line[:i].rstrip()
    return line.rstrip()


def parse(page):
    """The page as steps: ("run", command, expected output lines, origin), ("skip", command,
    reason), ("long", command), in order of appearance."""
    steps, fenced, pending_skip, block = [], False, None, []
    lines = open(page, encoding="utf-8").read().split("\n")

    def flush():
        nonlocal block, pending_skip
        joined, cur = [], ""
        for l in block:
            if cur:
                cur += " " + l.strip()
            else:
                cur = l
            if cur.endswith("\\"):
                cur = cur[:-1].rstrip()
                continue
            joined.append(cur)
            cur = ""
        if cur:
            joined.append(cur)
        for l in joined:
            if not l.strip():
                continue
            if pending_skip == LONG:
                steps.append(("long", strip_comment(l.strip())))
            elif pending_skip is not None:
                steps.append(("skip", l.strip(), pending_skip))
            elif l.startswith("make ") or l == "make":
                steps.append(("skip", strip_comment(l), "the set-up the tests themselves run"))
            elif is_command(l):
                steps.append(["run", strip_comment(l), [], page])
            elif steps and steps[-1][0] == "run":
                steps[-1][2].append(l.rstrip())
        block, pending_skip = [], None

    prev_blank = True
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
            prev_blank = False
            continue
        if fenced:
            continue
        m = re.match(r"<!-- doctest: (before|not run): (.*?) -->\s*$", line) or \
            re.match(r"<!-- doctest: (long)() -->\s*$", line)
        if m:
            if block:
                flush()
            if m.group(1) == "long":
                pending_skip = LONG
            elif m.group(1) == "before":
                steps.append(["run", m.group(2).strip(), [], page + " (before)"])
            else:
                pending_skip = m.group(2).strip()
            prev_blank = True
            continue
        if line.startswith("    ") and (block or prev_blank):
            block.append(line[4:])
            continue
        if block and not line.strip():
            block.append("")
            continue
        if block:
            flush()
        prev_blank = not line.strip()
    if block:
        flush()
    return steps


def variant(cmd, bf16):
    """The command as the sandbox runs it: as printed, but where this machine cannot (bf16), and
    the notes of what changed."""
    notes, run = [], cmd
    if run.startswith(("scripts/get-multi30k.sh", "scripts/get-debian-descriptions.sh")):
        run = f"cd {shlex.quote(ROOT)} && {run}"
        notes.append("the tree's data")
    if not bf16 and "precision=bf16" in run:
        run = run.replace("precision=bf16", "precision=fp32")
        notes.append("fp32: no avx512_bf16 here")
    return run, notes


def short_form(long_cmd, cmd):
    """Whether cmd is long_cmd's short form: its text, then options added after it."""
    return cmd.startswith(long_cmd + " ") and cmd[len(long_cmd) + 1:].lstrip().startswith("-")


def sandbox(bindir):
    box = tempfile.mkdtemp(prefix="s2s-doctest-")
    for p in os.listdir(bindir):
        os.symlink(os.path.join(bindir, p), os.path.join(box, p))
    for d in ("configs", "scripts", "bench", "tests", "python", "include", "pyproject.toml"):  # pip install . too
        os.symlink(os.path.join(ROOT, d), os.path.join(box, d))
    data = os.path.join(box, "data")
    os.makedirs(data)
    for d in os.listdir(os.path.join(ROOT, "data")):
        if d != "multi30k":
            os.symlink(os.path.join(ROOT, "data", d), os.path.join(data, d))
    for sub in ("raw", "tok"):  # the training set whole, the first pairs of the others
        src, dst = os.path.join(ROOT, "data", "multi30k", sub), os.path.join(data, "multi30k", sub)
        os.makedirs(dst)
        for f in os.listdir(src):
            if f.startswith("train"):
                os.symlink(os.path.join(src, f), os.path.join(dst, f))
            elif f.endswith(".gz"):
                with gzip.open(os.path.join(src, f), "rt", encoding="utf-8") as i, \
                        gzip.open(os.path.join(dst, f), "wt", encoding="utf-8") as o:
                    o.writelines(l for _, l in zip(range(EVAL_LINES), i))
            else:
                with open(os.path.join(src, f), encoding="utf-8") as i, open(os.path.join(dst, f), "w", encoding="utf-8") as o:
                    o.writelines(l for _, l in zip(range(EVAL_LINES), i))
    os.makedirs(os.path.join(ROOT, "runs", ".cache"), exist_ok=True)
    os.makedirs(os.path.join(box, "runs"))
    os.symlink(os.path.join(ROOT, "runs", ".cache"), os.path.join(box, "runs", ".cache"))
    return box


class Server:
    def __init__(self):
        self.proc = self.port = None

    def start(self, cmd, box, log):
        self.stop(log)
        run = re.sub(r"--port \d+", "--port 0", cmd)
        if "--port" not in run:
            run += " --port 0"
        out = open(os.path.join(box, "serve.out"), "w")
        self.proc = subprocess.Popen(["bash", "-c", "exec " + run], cwd=box, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(600):
            text = open(os.path.join(box, "serve.out")).read()
            m = re.search(r"listening on http://[0-9.]+:(\d+)", text)
            if m:
                self.port = m.group(1)
                return None
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        text = open(os.path.join(box, "serve.out")).read()
        self.stop(log)
        return text or "(no output)"

    def stop(self, log):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "killed"
        log(f"doctest:   the server stopped (exit {rc})")
        self.proc = self.port = None


def environment(bindir, cmd):
    env = dict(os.environ)
    env["S2S_BIN_DIR"] = bindir  # the scripts a page runs use the programs under test
    if os.geteuid() == 0:  # mpirun refuses root unless told (CI runs as root); the tests tell it so
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if "mpirun" in cmd or "--ranks" in cmd:  # under ASan: Open MPI's own allocations are not ours (as tests/test_dist.c)
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def run_page(bindir, page, bf16, log):
    box = sandbox(bindir)
    server = Server()
    ran = checked = 0
    skipped = []
    done_before = set()
    waiting = []  # long commands whose short form has not come yet
    try:
        for step in parse(page):
            if step[0] == "long":
                waiting.append(step[1])
                log(f"doctest: long, not run (its short form follows): {step[1]}")
                continue
            if step[0] == "skip":
                skipped.append((step[1], step[2]))
                log(f"doctest: not run ({step[2]}): {step[1]}")
                continue
            _, cmd, expect, origin = step
            if origin.endswith("(before)"):
                if cmd in done_before:
                    continue
                done_before.add(cmd)
            waiting = [w for w in waiting if not short_form(w, cmd)]
            run, notes = variant(cmd, bf16)
            if server.port:
                run = re.sub(r"(localhost|127\.0\.0\.1):8080", r"\g<1>:" + server.port, run)
            log(f"doctest: {run}" + (f"   [{', '.join(notes)}]" if notes else ""))
            if re.match(r"\./serve\b", run):
                err = server.start(run, box, log)
                if err:
                    return f"FAILED (the server did not listen): {cmd}\n{err}"
                ran += 1
                continue
            t0 = time.monotonic()
            try:
                p = subprocess.run(["bash", "-c", run], cwd=box, capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, timeout=TIMEOUT, env=environment(bindir, run))
            except subprocess.TimeoutExpired:
                return f"FAILED (over {TIMEOUT} s): {cmd}"
            log(f"doctest:   {time.monotonic() - t0:.1f} s")
            ran += 1
            if p.returncode != 0:
                tail = "\n".join((p.stdout + p.stderr).strip().split("\n")[-8:])
                return f"FAILED (exit {p.returncode}): {cmd}\n{tail}"
            if expect and not notes:
                got = [l.rstrip() for l in p.stdout.rstrip("\n").split("\n")]
                if got != expect:
                    return ("FAILED (printed other than the page shows): " + cmd + "\n  page:\n    " +
                            "\n    ".join(expect) + "\n  printed:\n    " + "\n    ".join(got))
                checked += 1
        server.stop(log)
        if waiting:
            return ("FAILED (a long command without its short form: the same command with options added "
                    "after it, later on the page): " + "; ".join(waiting))
    finally:
        server.stop(log)
        shutil.rmtree(box, ignore_errors=True)
    log(f"doctest: {ran} commands of {os.path.relpath(page, ROOT)} ran, {checked} outputs compared, "
        f"{len(skipped)} not run")
    return None


def has_corpus(page, log):
    """Whether the corpora a page fetches are in the tree (fetched now where they are not): a
    page on Debian's descriptions is not run on a machine that cannot reach a Debian mirror."""
    fetch = "scripts/get-debian-descriptions.sh"
    if fetch not in open(page, encoding="utf-8").read() or os.path.isfile("data/debian-descriptions/SOURCE"):
        return True
    r = subprocess.run(["bash", fetch], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"doctest: {page} not run: {fetch} failed: {r.stderr.strip()}")
        return False
    return True


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: doctest.py BIN_DIR PAGE [PAGE...]")
    bindir = os.path.abspath(sys.argv[1])
    os.chdir(ROOT)
    if not os.path.isdir("data/multi30k/raw"):
        if subprocess.run(["bash", "scripts/get-multi30k.sh"], capture_output=True).returncode != 0:
            print("doctest: no Multi30k (scripts/get-multi30k.sh): the pages' commands need it")
            sys.exit(77)
    bf16 = "avx512_bf16" in open("/proc/cpuinfo").read()
    log = lambda s: print(s, flush=True)
    pages = [p for p in sys.argv[2:] if has_corpus(p, log)]
    if not pages:
        sys.exit(77)
    for page in pages:
        err = run_page(bindir, os.path.abspath(page), bf16, log)
        if err:
            log(f"doctest: {page}: {err}")
            sys.exit(1)


if __name__ == "__main__":
    main()
