"""The package's doors answer as the programs do (issue 74): no call writes onto a file it
reads, no handle crashes when closed during or before a call, every integer and string is
checked before it reaches C (ctypes would wrap an integer, C would cut a string at a NUL)."""

import os
import subprocess
import sys
import textwrap

import pytest

import s2s
from conftest import TINY


def test_export_never_writes_onto_its_model(tiny_run, tmp_path):
    model = tmp_path / "v.bin"
    model.write_bytes((tiny_run[0] / "model.bin").read_bytes())
    before = model.read_bytes()
    os.symlink(model, tmp_path / "v.link")
    for out in (model, tmp_path / "v.link"):
        with pytest.raises(s2s.ConfigError, match="is the file read as"):
            s2s.export(model, out)
        assert model.read_bytes() == before
    s2s.export(model, tmp_path / "v.safetensors")  # another file: written
    assert (tmp_path / "v.safetensors").stat().st_size > 0


def test_onnx_export_makes_a_new_folder_or_nothing(tiny_run, tmp_path):
    model = tiny_run[0] / "model.bin"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "keep").write_text("keep")
    with pytest.raises(s2s.ConfigError, match="exists"):
        s2s.export(model, tmp_path / "old", format="onnx")
    assert os.listdir(tmp_path / "old") == ["keep"]
    with pytest.raises(ValueError, match="expected 'safetensors' or 'onnx'"):
        s2s.export(model, tmp_path / "x", format="tflite")
    with pytest.raises(ValueError, match="float32"):
        s2s.export(model, tmp_path / "x", bf16=True, format="onnx")
    assert s2s.export(model, tmp_path / "onnx", format="onnx") == tmp_path / "onnx"
    assert sorted(os.listdir(tmp_path / "onnx")) == ["decoder.onnx", "encoder.onnx", "s2s.json"]


CLOSE_WHILE_CALLING = textwrap.dedent("""
    import sys, threading, time
    import s2s
    model = s2s.{kind}
    line = {line}
    errors, calls = [], [0]
    def work():
        for _ in range(400):
            try:
                model.{call}
                calls[0] += 1
            except s2s.Error as e:
                errors.append(str(e))
                return
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.02)
    model.close()
    for t in threads:
        t.join()
    assert errors and all("closed" in e for e in errors), errors
    try:
        model.{call}
        sys.exit("a call after close did not raise")
    except s2s.Error:
        pass
    model.close()  # twice: nothing happens
    print("ok", calls[0], len(errors))
""")


def run_script(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_a_subword_model_closed_while_threads_encode_raises_never_crashes(tmp_path):
    text = ["the quick brown fox jumps over the lazy dog " * 4, "a b c abc abcd bcd cd d"] * 20
    s2s.learn_subwords(text, tmp_path / "m.bpe", merges=30, min_count=1)
    line = repr("the quick brown fox " * 3000)
    code = CLOSE_WHILE_CALLING.format(kind=f"Subword({str(tmp_path / 'm.bpe')!r})", line=line, call="encode(line)")
    r = run_script(code)
    assert r.returncode == 0 and r.stdout.startswith("ok"), f"exit {r.returncode}: {r.stdout} {r.stderr[-2000:]}"


def test_a_model_closed_while_threads_translate_raises_never_crashes(tiny_run):
    code = CLOSE_WHILE_CALLING.format(kind=f"Model({str(tiny_run[0] / 'model.bin')!r})", line=repr(["abcd"] * 50),
                                      call="translate(line, beam=2)")
    r = run_script(code)
    assert r.returncode == 0 and r.stdout.startswith("ok"), f"exit {r.returncode}: {r.stdout} {r.stderr[-2000:]}"


def test_a_training_closed_while_it_runs_stops_and_raises_after(tmp_path):
    cfg = dict(TINY, train=dict(TINY["train"], epochs=50))
    run = s2s.train(cfg, out=tmp_path / "run")
    it = iter(run)
    next(it)  # the run is under way
    run.close()  # stops it after its step, waits, frees
    with pytest.raises(s2s.Error, match="closed"):
        run.config
    with pytest.raises(s2s.Error, match="closed"):
        list(it)
    assert (tmp_path / "run" / "last.bin").exists() or (tmp_path / "run" / "config.json").exists()


def test_integers_are_range_checked_before_c(tiny_model, tiny_run, tmp_path):
    for kw in ({"beam": 2**32 + 1}, {"max_len": 2**32 + 5}, {"n_best": 2**32 + 1, "beam": 2}, {"beam": -2**63},
               {"alpha": float("nan")}):
        with pytest.raises((s2s.ConfigError, TypeError)):
            tiny_model.translate("abcd", **kw)
    with pytest.raises(TypeError):
        tiny_model.translate("abcd", beam=2.5)
    with pytest.raises(s2s.ConfigError):
        s2s.Model(tiny_run[0] / "model.bin", threads=2**32 + 1)
    with pytest.raises(s2s.ConfigError):
        s2s.learn_subwords(["a b c"], tmp_path / "x.bpe", merges=2**32 + 3)
    with pytest.raises(s2s.ConfigError):
        s2s.resume(tiny_run[0], epochs=2**32 + 1)
    with pytest.raises(s2s.ConfigError):
        s2s.train(TINY, out=tmp_path / "p", pause_at=2**64)
    assert not (tmp_path / "x.bpe").exists()


def test_a_nul_never_reaches_c(tiny_run, tmp_path):
    model = str(tiny_run[0] / "model.bin")
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.Model(model + "\0junk")
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.Model(model.encode() + b"\0junk")
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.export(model, str(tmp_path / "x") + "\0.safetensors")
    assert not (tmp_path / "x").exists()
    # a config or an override holding a NUL: refused, never cut ("dot\0bogus" trained as dot)
    bad = dict(TINY, model=dict(TINY["model"], attention="dot\0bogus"))
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.train(bad, out=tmp_path / "a")
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.train(dict(TINY, name="ti\0ny/../../x"), out=tmp_path / "b")
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.train(TINY, out=tmp_path / "c", set={"name": "ti\0ny"})
    with pytest.raises(s2s.ConfigError, match="NUL"):
        s2s.train(TINY, out=tmp_path / "d", set={"model.attention": '"dot\\u0000bogus"'})
    with pytest.raises(s2s.ConfigError):
        s2s.sacrebleu(["a b"], ["a b"], tokenize="13a\0x")
    assert not any((tmp_path / n).exists() for n in "abcd")


def shipped_decode_lens():
    """train.max_decode_len of every shipped config, with 0 (2 x the source + 10) and 6 (cuts every line)."""
    import glob
    import json
    here = os.path.dirname(os.path.abspath(__file__))
    lens = {0, 6}
    for path in glob.glob(os.path.join(here, "..", "..", "configs", "*.json")):
        with open(path, encoding="utf-8") as f:
            lens.add(json.load(f).get("train", {}).get("max_decode_len", 0))
    return sorted(lens)


@pytest.mark.parametrize("max_decode_len", shipped_decode_lens())
def test_python_decodes_with_the_model_settings_as_translate(tmp_path, max_decode_len):
    from conftest import program, write_lines
    cfg = dict(TINY, train=dict(TINY["train"], epochs=1, max_decode_len=max_decode_len))
    list(s2s.train(cfg, out=tmp_path / "run"))
    lines = ["abc", "abcdabcdab", "abcd" * 10]
    write_lines(tmp_path / "in.txt", lines)
    with s2s.Model(tmp_path / "run" / "model.bin", threads=1) as m:
        for beam in (1, 3):
            want = program("translate", tmp_path / "run" / "model.bin", "--beam", beam, "--input", tmp_path / "in.txt")
            assert m.translate(lines, beam=beam) == want.stdout.splitlines()
