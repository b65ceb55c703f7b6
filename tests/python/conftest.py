"""Fixtures of the Python package's tests: the programs of this build ($S2S_BIN_DIR) to
compare with, and a tiny reversal model trained once through the package."""

import json
import os
import subprocess

import pytest

import s2s

BIN = os.environ.get("S2S_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))

TINY = {"name": "tiny", "seed": 3,
        "task": {"type": "reverse", "alphabet": "abcd", "min_len": 3, "max_len": 8, "train_size": 400,
                 "valid_size": 40, "test_size": 40, "data_seed": 5},
        "model": {"cell": "gru", "embedding": 16, "encoder_hidden": 32, "decoder_hidden": 32, "attention": "dot"},
        "train": {"lr": 0.01, "batch_size": 32, "epochs": 2, "log_every": 5}}


def program(name, *args, input=None, check=True):
    """Runs a program of this build; its stdout as text."""
    r = subprocess.run([os.path.join(BIN, name), *map(str, args)], input=input, capture_output=True, text=True)
    if check and r.returncode:
        raise AssertionError(f"{name} {' '.join(map(str, args))}: exit {r.returncode}: {r.stderr}")
    return r


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """(run folder, events seen while it trained)"""
    d = tmp_path_factory.mktemp("tiny") / "run"
    events = list(s2s.train(TINY, out=d))
    return d, events


@pytest.fixture(scope="session")
def tiny_model(tiny_run):
    m = s2s.Model(tiny_run[0] / "model.bin", threads=1)
    yield m
    m.close()


def write_lines(path, lines):
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def json_lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
