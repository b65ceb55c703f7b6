"""The Python package against the programs on the same inputs: translations, n-best lists,
attention, scores and logits equal to ./translate's; the calculator, metrics and subwords
equal to ./attend's, ./bleu's and ./subword's; training's events equal to its log; hostile
input raising, never crashing; Ctrl-C leaving a run that resumes bit for bit."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import s2s
from conftest import TINY, json_lines, program, write_lines

LINES = ["abcd", "dcba", "aabbc", "", "abcdabcd", "cab", "bbbbbd"]
TARGETS = ["dcba", "abcd", "cbbaa", "a", "dcbadcba", "bac", "dbbbbb"]


def test_the_events_are_the_log(tiny_run):
    d, events = tiny_run
    assert events == json_lines(d / "log.jsonl")
    assert {e["type"] for e in events} >= {"step", "epoch", "test"}
    run = s2s.Run(d)
    assert run.config["model"]["attention"] == "dot"
    assert run.test == events[-1]
    steps, losses = run.curve("loss")
    assert steps == [e["step"] for e in events if e["type"] == "step"] and len(losses) == len(steps)
    hyp, ref = run.test_outputs()
    assert len(hyp) == len(ref) == 40


def test_model_reports_its_config_and_size(tiny_model):
    assert tiny_model.config["model"]["encoder_hidden"] == 32
    assert tiny_model.params > 1000 and tiny_model.precision == "fp32" and tiny_model.has_attention
    assert "parameters" in repr(tiny_model)


def test_translations_are_translates(tiny_run, tiny_model, tmp_path):
    src = write_lines(tmp_path / "in.txt", LINES)
    model = tiny_run[0] / "model.bin"
    assert tiny_model.translate(LINES) == program("translate", model, "--input", src).stdout.splitlines()
    nbest = program("translate", model, "--input", src, "--beam", "3", "--n-best", "3", "--alpha", "0.6").stdout
    got = [f"{i} ||| {h.text} ||| F0= {h.logprob:.4f} ||| {h.score:.4f}"
           for i, hs in enumerate(tiny_model.translate(LINES, beam=3, n_best=3, alpha=0.6)) for h in hs]
    assert got == nbest.splitlines()
    beam = program("translate", model, "--input", src, "--beam", "4").stdout.splitlines()
    assert tiny_model.translate(LINES, beam=4) == beam
    assert tiny_model.translate("abcd") == tiny_model.translate(["abcd"])[0]


def test_translate_batch_is_translates_in_one_type(tiny_run, tiny_model, tmp_path):
    """A list of Translation whatever the settings: greedy (no score: greedy computes none),
    beam with n-best (./translate's n-best list), attention (attention()'s), any batch size."""
    src = write_lines(tmp_path / "in.txt", LINES)
    model = tiny_run[0] / "model.bin"
    greedy = tiny_model.translate_batch(LINES)
    assert [t.text for t in greedy] == program("translate", model, "--input", src).stdout.splitlines()
    assert all(isinstance(t, s2s.Translation) for t in greedy)
    assert all(h.logprob is None and h.score is None for t in greedy for h in t.hypotheses)
    assert greedy[LINES.index("")].hypotheses == [] and greedy[LINES.index("")].text == ""
    nbest = program("translate", model, "--input", src, "--beam", "3", "--n-best", "3", "--alpha", "0.6").stdout
    for batch in (1, 2, 256):
        got = tiny_model.translate_batch(LINES, beam=3, n_best=3, alpha=0.6, batch_size=batch)
        assert [f"{i} ||| {h.text} ||| F0= {h.logprob:.4f} ||| {h.score:.4f}"
                for i, t in enumerate(got) for h in t.hypotheses] == nbest.splitlines(), f"batch_size {batch}"
    with_attention = tiny_model.translate_batch([x for x in LINES if x], attention=True, batch_size=3)
    for t, a in zip(with_attention, tiny_model.attention([x for x in LINES if x])):
        assert t.attention.output == a.output and np.array_equal(t.attention.weights, a.weights)
    # under beam search, the best hypothesis's attention: where it is greedy's output, greedy's
    # attention, bit for bit (its tokens fed back as decoding fed them)
    texts = [x for x in LINES if x]
    beamed = tiny_model.translate_batch(texts, beam=3, attention=True)
    same = 0
    for t, g in zip(beamed, with_attention):
        assert t.attention.output[:len(t.hypotheses[0].text)] == list(t.text) and t.hypotheses[0].score is not None
        assert np.allclose(t.attention.weights.sum(axis=1), 1, atol=1e-5)
        if t.text == g.text:
            same += 1
            assert np.array_equal(t.attention.weights, g.attention.weights)
    assert same > 0, "no line where beam search found greedy's output: no test"
    with pytest.raises(TypeError, match="a list of str"):
        tiny_model.translate_batch("abcd")
    with pytest.raises(s2s.DataError, match="line 3: 'x'"):
        tiny_model.translate_batch(["abcd", "ab", "x"], batch_size=2)  # numbered across batches
    bad = tiny_model.translate_batch(["abcd", "x"], errors="empty")
    assert bad[1].hypotheses == [] and "'x'" in bad[1].error and bad[0].error is None
    with pytest.raises(ValueError, match="batch_size"):
        tiny_model.translate_batch(["abcd"], batch_size=0)


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="no mypy here (Debian: apt install mypy)")
def test_the_annotations_check_a_users_code(tmp_path):
    """mypy accepts code that uses the typed API as documented, and refuses a wrong use of it."""
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""
        from typing import List, Optional
        import s2s
        m = s2s.Model("m.bin")
        res: List[s2s.Translation] = m.translate_batch(["abcd"], beam=5, n_best=2, batch_size=64)
        text: str = res[0].text
        score: Optional[float] = res[0].hypotheses[0].score
        att: Optional[s2s.Attention] = res[0].attention
    """))
    bad = tmp_path / "bad.py"
    bad.write_text("import s2s\nn: int = s2s.Model('m.bin').translate_batch(['abcd'])[0].text\n")
    env = dict(os.environ, MYPYPATH=os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    run = lambda f: subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(f)],
                                   capture_output=True, text=True, env=env, cwd=tmp_path)
    ok = run(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = run(bad)
    assert wrong.returncode == 1 and "Incompatible types in assignment" in wrong.stdout, wrong.stdout + wrong.stderr


def test_attention_is_translates(tiny_run, tiny_model, tmp_path):
    src = write_lines(tmp_path / "in.txt", [x for x in LINES if x])
    program("translate", tiny_run[0] / "model.bin", "--input", src, "--attention", tmp_path / "a.jsonl")
    want = json_lines(tmp_path / "a.jsonl")
    got = tiny_model.attention([x for x in LINES if x])
    assert len(got) == len(want)
    for a, w in zip(got, want):
        assert a.source == w["source"] and a.output == w["target"]
        assert a.weights.dtype == np.float32
        assert np.array_equal(a.weights, np.array(w["weights"], dtype=np.float32))
        assert np.allclose(a.weights.sum(axis=1), 1, atol=1e-5)
        assert a.heads is None


def test_scores_and_logits_are_translates(tiny_run, tiny_model, tmp_path):
    src, trg = LINES[:3] + LINES[4:], TARGETS[:3] + TARGETS[4:]
    write_lines(tmp_path / "s", src), write_lines(tmp_path / "t", trg)
    out = program("translate", tiny_run[0] / "model.bin", "--input", tmp_path / "s", "--score", tmp_path / "t",
                  "--logits", tmp_path / "l.jsonl").stdout.splitlines()
    scores = tiny_model.score(src, trg, logits=True)
    for s, line, lj in zip(scores, out, json_lines(tmp_path / "l.jsonl")):
        total, tokens = line.split(" ||| ")
        assert f"{s.total:.4f}" == total
        assert " ".join(f"{t}={p:.4f}" for t, p in zip(s.tokens, s.logprobs)) == tokens
        assert s.source_ids == lj["src"] and s.target_ids == lj["trg"]
        assert np.array_equal(s.logits, np.array(lj["logits"], dtype=np.float32))
    with pytest.raises(s2s.DataError, match="pair 1"):
        tiny_model.score([""], ["a"])


def test_attend_is_attends(tmp_path):
    spec = {"X": [[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 1, 1]], "W_q": np.eye(4).tolist(), "heads": 2, "causal": True}
    (tmp_path / "q.json").write_text(json.dumps(spec))
    want = json.loads(program("attend", tmp_path / "q.json", "--json").stdout)
    got = s2s.attend(**spec)
    assert len(got["heads"]) == 2
    for g, w in zip(got["heads"], want["heads"]):
        for k in ("Q", "K", "V", "scores", "weights", "output"):
            assert np.array_equal(g[k], np.array(w[k], dtype=np.float32))
    assert np.array_equal(got["output"], np.array(want["output"], dtype=np.float32))
    assert got["heads"][0]["weights"][0, 1] == 0  # the causal mask
    with pytest.raises(s2s.ConfigError, match="K"):
        s2s.attend(Q=[[1, 2]], K=[[1]], V=[[1]])


HYP = ["the cat sat on the mat .", "a dog runs", "Ünïcode wörds here", "tHe End"]
REF = ["the cat sat on a mat .", "a dog runs fast", "Ünïcode wörds here", "the end"]
REF2 = ["a cat sat on the mat .", "the dog runs", "unicode words here", "The End"]


@pytest.mark.parametrize("call,args", [
    (lambda h, r: s2s.bleu(h, r), []),
    (lambda h, r: s2s.sacrebleu(h, r), ["--sacrebleu"]),
    (lambda h, r: s2s.sacrebleu(h, r, tokenize="intl", lowercase=True), ["--tokenize", "intl", "-lc"]),
    (lambda h, r: s2s.sacrebleu(h, r, smooth_method="add-k", smooth_value=0.5, width=3),
     ["--sacrebleu", "--smooth-method", "add-k", "--smooth-value", "0.5", "--width", "3"]),
    (lambda h, r: s2s.chrf(h, r), ["--chrf"]),
    (lambda h, r: s2s.chrf(h, r, word_order=2, lowercase=True), ["--chrf", "--word-order", "2", "-lc"]),
])
def test_scores_are_bleus(call, args, tmp_path):
    write_lines(tmp_path / "h", HYP), write_lines(tmp_path / "r", REF)
    got = call(HYP, REF)
    assert str(got) == program("bleu", *args, tmp_path / "r", tmp_path / "h").stdout.strip()
    if args:
        assert got.line.startswith(got.signature + " = ")


def test_several_references_are_bleus(tmp_path):
    write_lines(tmp_path / "h", HYP), write_lines(tmp_path / "r", REF), write_lines(tmp_path / "r2", REF2)
    want = program("bleu", "--sacrebleu", "--ref", tmp_path / "r2", tmp_path / "r", tmp_path / "h").stdout.strip()
    assert s2s.sacrebleu(HYP, [REF, REF2]).line == want
    with pytest.raises(ValueError, match="stream 2"):
        s2s.sacrebleu(HYP, [REF, REF2[:2]])
    with pytest.raises(s2s.ConfigError, match="sacreBLEU"):
        s2s.score_corpus(HYP, REF, "bleu", tokenize="13a")
    with pytest.raises(s2s.ConfigError, match="sacreBLEU"):
        s2s.score_corpus(HYP, REF, "bleu", lowercase=True)
    with pytest.raises(s2s.ConfigError, match="unknown key"):
        s2s.sacrebleu(HYP, REF, smoothing="exp")


def test_subwords_are_subwords(tmp_path):
    corpus = ["lower lowest newer newest", "wider widest low new", "the newest and the lowest"] * 3
    write_lines(tmp_path / "c.txt", corpus)
    program("subword", "learn", "--input", tmp_path / "c.txt", "--merges", "15", "--out", tmp_path / "cli.bpe")
    assert s2s.learn_subwords(corpus, tmp_path / "py.bpe", merges=15) == 15
    assert (tmp_path / "cli.bpe").read_bytes() == (tmp_path / "py.bpe").read_bytes()
    text = "the widest newer thing ünï"
    with s2s.Subword(tmp_path / "py.bpe") as sw:
        pieces = sw.encode(text)
        assert " ".join(pieces) == program("subword", "encode", "--model", tmp_path / "cli.bpe", input=text + "\n").stdout.strip()
        assert sw.decode(pieces) == text
        with pytest.raises(s2s.DataError):
            sw.encode(b"\xc3")
    with pytest.raises(s2s.Error, match="closed"):
        sw.encode("a")
    with pytest.raises(s2s.FileError, match="nope.model"):
        s2s.Subword(tmp_path / "nope.model")


def test_hostile_input_raises(tiny_run, tiny_model, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"S2SM" + os.urandom(200))
    with pytest.raises(s2s.Error, match="junk.bin"):
        s2s.Model(junk)
    cut = tmp_path / "cut.bin"
    cut.write_bytes((tiny_run[0] / "model.bin").read_bytes()[:-100])
    with pytest.raises(s2s.Error, match="cut.bin"):
        s2s.Model(cut)
    with pytest.raises(s2s.FileError, match="missing.bin"):
        s2s.Model(tmp_path / "missing.bin")
    with pytest.raises(s2s.ConfigError, match="fp16"):
        s2s.Model(tiny_run[0] / "model.bin", precision="fp16")
    with pytest.raises(s2s.ConfigError, match='did you mean "model.attention"'):
        s2s.train(dict(TINY, model={"atention": "dot"}), out=tmp_path / "x")
    with pytest.raises(s2s.ConfigError, match="lr"):
        s2s.train(TINY, out=tmp_path / "x", set={"train.lr": -1})
    with pytest.raises(s2s.DataError, match="UTF-8"):
        tiny_model.translate(["ab\udcffcd"])
    with pytest.raises(s2s.DataError, match="line 2"):
        tiny_model.translate(["abcd", b"ab\xffcd"])
    assert tiny_model.translate(["abcd", b"ab\xffcd"], errors="empty")[1] == ""
    with pytest.raises(s2s.DataError, match="NUL"):
        tiny_model.translate(["ab\0cd"])
    with pytest.raises(s2s.DataError, match="1 MiB"):
        tiny_model.translate(["ab" * (1 << 20)])
    with pytest.raises(s2s.DataError, match="1 MiB"):
        tiny_model.score(["abcd"], ["ab" * (1 << 20)])
    with pytest.raises(s2s.ConfigError, match="beam"):
        tiny_model.translate(["abcd"], beam=0)
    with pytest.raises(s2s.ConfigError, match="n_best"):
        tiny_model.translate(["abcd"], beam=2, n_best=3)
    with pytest.raises(TypeError):
        tiny_model.translate([3])


def test_calls_after_close_raise(tiny_run):
    m = s2s.Model(tiny_run[0] / "model.bin")
    m.close()
    m.close()
    for call in (lambda: m.translate("abc"), lambda: m.attention("abc"), lambda: m.score("abc", "cba")):
        with pytest.raises(s2s.Error, match="closed"):
            call()


def test_a_locked_run_folder_names_its_holder(tmp_path):
    import fcntl
    d = tmp_path / "held"
    d.mkdir()
    with open(d / ".lock", "w") as f:
        f.write(f"{os.getpid()}\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(s2s.FileError, match=f"pid {os.getpid()}"):
            s2s.train(TINY, out=d).run()


def test_another_abi_version_is_refused(tmp_path):
    (tmp_path / "old.c").write_text("int s2s_abi_version(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", tmp_path / "libold.so", tmp_path / "old.c"], check=True)
    env = dict(os.environ, S2S_LIBRARY=str(tmp_path / "libold.so"))
    r = subprocess.run([sys.executable, "-c", "import s2s"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "ABI version 1" in r.stderr and "needs 2" in r.stderr


@pytest.mark.skipif(os.environ.get("S2S_SANITIZED") == "1", reason="ASan keeps freed memory in quarantine: RSS grows")
def test_a_thousand_loads_keep_memory_flat(tiny_run):
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    path = tiny_run[0] / "model.bin"
    for _ in range(100):
        s2s.Model(path).close()
    before = rss()
    for _ in range(1000):
        with s2s.Model(path) as m:
            m.translate("abcd")
    grown = rss() - before
    assert grown < 4 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1,000 loads"


INTERRUPT = textwrap.dedent("""
    import json, os, signal, sys
    import s2s
    # Ctrl-C as a terminal gives it: Python's handler, even where the test runs in the background
    # of a shell without job control, which starts its children with SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run = s2s.train(json.loads(sys.argv[1]), out=sys.argv[2])
    try:
        for e in run:
            if e["type"] == "step":
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, at the first step line
    except KeyboardInterrupt:
        print(json.dumps(run.summary))
        sys.exit(0)
    sys.exit("no KeyboardInterrupt")
""")


def test_ctrl_c_leaves_a_run_that_resumes_bit_exactly(tiny_run, tmp_path):
    d = tmp_path / "part"
    r = subprocess.run([sys.executable, "-c", INTERRUPT, json.dumps(TINY), str(d)], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["interrupted"] and not summary["tested"] and summary["steps"] < 14
    assert (d / "last.bin").exists()
    events = list(s2s.resume(d))
    assert events[-1]["type"] == "test"
    full, part = s2s.Model(tiny_run[0] / "model.bin"), s2s.Model(d / "model.bin")
    for a, b in zip(full.score(LINES[:3], TARGETS[:3], logits=True), part.score(LINES[:3], TARGETS[:3], logits=True)):
        assert np.array_equal(a.logits, b.logits)
    assert json.loads((d / "log.jsonl").read_text().splitlines()[-1])["test_loss"] == tiny_run[1][-1]["test_loss"]


def test_attention_draws_as_translate_heatmap_does(tiny_run, tiny_model, tmp_path):
    model = tiny_run[0] / "model.bin"
    write_lines(tmp_path / "in.txt", ["abcd"])
    program("translate", model, "--input", tmp_path / "in.txt", "--heatmap", tmp_path / "maps")
    a = tiny_model.attention("abcd")
    a.draw(tmp_path / "mine.png", title=f"{model} - dot attention - line 0")
    assert (tmp_path / "mine.png").read_bytes() == (tmp_path / "maps" / "0000.png").read_bytes()
    assert a._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(ValueError, match="labels"):
        s2s.heatmap(a.weights, tmp_path / "x.png", row_labels=["a"])
    with pytest.raises(s2s.Error, match="finite"):
        s2s.heatmap(np.full((2, 2), np.nan), tmp_path / "x.png")


def test_threads_share_a_model_and_run_models_side_by_side(tiny_run, tiny_model):
    from concurrent.futures import ThreadPoolExecutor
    want = tiny_model.translate(LINES, beam=3)
    other = s2s.Model(tiny_run[0] / "model.bin")
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda m: m.translate(LINES, beam=3), [tiny_model, other] * 4))
    assert got == [want] * 8
    other.close()


def test_the_numpy_hint_fits_the_interpreter():
    """Debian's python3 gets numpy from apt; a venv, pyenv or conda interpreter from its pip."""
    from s2s import _lib
    assert "apt install python3-numpy" in _lib.numpy_hint("/usr/bin/python3", "/usr", "/usr")
    venv = _lib.numpy_hint("/home/u/venv/bin/python", "/home/u/venv", "/usr")
    assert venv == "/home/u/venv/bin/python -m pip install numpy"
    pyenv = _lib.numpy_hint("/root/.pyenv/versions/3.11.7/bin/python3", "/root/.pyenv/versions/3.11.7",
                            "/root/.pyenv/versions/3.11.7")
    assert "apt" not in pyenv and "-m pip install numpy" in pyenv


def _spincount(env):
    """GOMP_SPINCOUNT as libgomp read it when the package loaded the library, and whether
    the package left its own setting in os.environ."""
    code = "import os, s2s; print('left', os.environ.get('GOMP_SPINCOUNT'))"
    full = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    r = subprocess.run([sys.executable, "-c", code], env={**full, **env, "OMP_DISPLAY_ENV": "verbose"},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    read = [line.split("'")[1] for line in r.stderr.splitlines() if "GOMP_SPINCOUNT =" in line]
    return read[0] if read else None, r.stdout.split()[-1]


def test_loading_makes_openmp_threads_sleep_when_they_wait_unless_the_user_says():
    assert _spincount({}) == ("0", "None")
    assert _spincount({"GOMP_SPINCOUNT": "77"}) == ("77", "77")
    read, left = _spincount({"OMP_WAIT_POLICY": "active"})
    assert int(read) > 1000000 and left == "None"
