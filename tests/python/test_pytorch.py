"""s2s.pytorch against the programs: for the RNN with every attention variant (and layers,
directions, cells, combine, tied and one-hot embeddings) and the Transformer pre- and
post-norm, a model trained here, loaded into PyTorch from its model file and from its
safetensors export: logits equal to ./translate --logits within 1e-4, greedy outputs equal to
./translate's. Skipped where Debian's python3-torch is not installed."""

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import s2s  # noqa: E402
from s2s import pytorch  # noqa: E402
from conftest import json_lines, program, write_lines  # noqa: E402

BASE = {"name": "t", "seed": 1,
        "task": {"type": "reverse", "alphabet": "abcdef", "min_len": 2, "max_len": 9, "train_size": 300,
                 "valid_size": 20, "test_size": 20},
        "model": {"cell": "gru", "bidirectional": True, "embedding": 16, "encoder_hidden": 16, "decoder_hidden": 32,
                  "attention": "dot", "kq": 8},
        "train": {"epochs": 1, "batch_size": 16, "log_every": 100}}

CASES = {
    "gru-bi-dot": {},
    "lstm-uni-meanpool": {"cell": "lstm", "bidirectional": False, "encoder_hidden": 24, "decoder_hidden": 24,
                          "attention": "meanpool"},
    "gru-bi2-scaled_dot": {"attention": "scaled_dot", "layers": 2},
    "lstm-bi2-general-luong": {"cell": "lstm", "attention": "general", "layers": 2, "combine": "luong",
                               "decoder_hidden": 20},
    "gru-uni-additive-luong-tied": {"bidirectional": False, "decoder_hidden": 16, "attention": "additive",
                                    "combine": "luong", "tie_embeddings": "decoder"},
    "gru-bi-multihead": {"attention": "multihead", "heads": 4},
    "lstm-bi-multihead-kdim": {"cell": "lstm", "encoder_hidden": 12, "decoder_hidden": 16, "attention": "multihead",
                               "heads": 2},
    "gru-bi-dummy": {"attention": "dummy"},
    "gru-uni3-onehot": {"bidirectional": False, "encoder_hidden": 12, "decoder_hidden": 12, "layers": 3,
                        "embedding_type": "onehot"},
    "transformer-post": {"type": "transformer", "d_model": 16, "heads": 2, "ff": 24, "layers": 2, "norm": "post"},
    "transformer-pre-learned-gelu-tied": {"type": "transformer", "d_model": 16, "heads": 4, "ff": 24, "layers": 1,
                                          "norm": "pre", "positions": "learned", "max_positions": 8,
                                          "activation": "gelu", "tie_embeddings": "all"},
    "transformer-deep-encoder-3x1": {"type": "transformer", "d_model": 16, "heads": 2, "ff": 24, "encoder_layers": 3,
                                     "decoder_layers": 1, "norm": "pre", "tie_embeddings": "all"},
}

SRC = ["abcd", "fedcbaabc", "ab", "eeeeeeee", "cafe", "bdfbdfbdf"]
TRG = ["dcba", "cbaabcdef", "ba", "eeeeeeee", "efac", "fdbfdbfdb"]


@pytest.mark.parametrize("name", list(CASES))
def test_logits_and_greedy_equal_translates(name, tmp_path):
    cfg = copy.deepcopy(BASE)
    cfg["model"].update(CASES[name])
    run = tmp_path / "run"
    s2s.train(cfg, out=run).run()
    write_lines(tmp_path / "src", SRC), write_lines(tmp_path / "trg", TRG)
    model = run / "model.bin"
    greedy = program("translate", model, "--input", tmp_path / "src").stdout.splitlines()
    program("translate", model, "--input", tmp_path / "src", "--score", tmp_path / "trg", "--logits", tmp_path / "l.jsonl")
    program("export", model, "--out", tmp_path / "model.safetensors")
    for net in (pytorch.load(model), pytorch.load(tmp_path / "model.safetensors", dtype=torch.float64)):
        assert not net.training and net.config["model"]["type"] == cfg["model"].get("type", "rnn")
        pairs = json_lines(tmp_path / "l.jsonl")
        assert len(pairs) == len(SRC)
        for r in pairs:
            theirs = net.logits(r["src"], r["trg"]).double().numpy()
            ours = np.array(r["logits"], dtype=np.float64)
            assert theirs.shape == ours.shape
            worst = float(np.abs(theirs - ours).max())
            assert worst <= 1e-4, f"line {r['line']}: logits differ by {worst:.3g}"
            assert "".join(net.tokens(net.greedy(r["src"]))) == greedy[r["line"]], f"line {r['line']}"


def test_a_file_of_another_architecture_is_refused(tmp_path):
    cfg = copy.deepcopy(BASE)
    run = tmp_path / "run"
    s2s.train(cfg, out=run).run()
    st = tmp_path / "m.safetensors"
    program("export", run / "model.bin", "--out", st)
    tensors, meta = pytorch.read_safetensors(st)
    conf = json.loads(meta["s2s.config"])
    conf["model"]["attention"] = "general"
    net = pytorch.S2sModule(conf, json.loads(meta["s2s.src_vocab"]), json.loads(meta["s2s.trg_vocab"]))
    with pytest.raises(ValueError, match="decoder.attention.W"):
        net.load_tensors(tensors, "m.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\0\0\0\0\0\0\0{}")
    with pytest.raises(ValueError, match="junk.safetensors"):
        pytorch.load(tmp_path / "junk.safetensors")
    (tmp_path / "junk.bin").write_bytes(b"S2SMODEL" + bytes(100))
    with pytest.raises(s2s.Error, match="junk.bin"):
        pytorch.load(tmp_path / "junk.bin")
