#!/usr/bin/env python3
"""Writes the tensor tables of docs/reference/model-files.md from the programs themselves.

  python3 scripts/model-files.py BIN_DIR [--check]

For each architecture below it trains a tiny reversal model for one step (sizes chosen so that
every dimension of a shape names one size), exports it with ./export and reads the
safetensors header: every tensor's name and shape, the shape written in the sizes of
docs/numerics.md. The tables replace the text between the page's tensors:begin and
tensors:end markers; --check exits 1, naming the difference, when the page is not what the
programs give (make test runs it so). Not part of the product."""
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "reference", "model-files.md")
TASK = {"type": "reverse", "alphabet": "abcd", "min_len": 2, "max_len": 6, "train_size": 16, "valid_size": 4,
        "test_size": 4}
RNN = {"cell": "gru", "bidirectional": True, "embedding": 11, "encoder_hidden": 19, "decoder_hidden": 23,
       "attention": "scaled_dot", "kq": 29, "combine": "concat"}
TF = {"type": "transformer", "d_model": 13, "heads": 1, "ff": 31, "layers": 1}
# (title, a sentence on it, model keys, the names shown: all, or those holding one of these)
MODELS = [
    ("RNN: bidirectional GRU, scaled-dot attention, `combine: concat`", "The kind of configs/multi30k.json.", RNN, None),
    ("RNN: LSTM, dot attention, `combine: luong`", "The kind of configs/reverse.json (unidirectional: `D = Hₑ`).",
     {"cell": "lstm", "bidirectional": False, "embedding": 11, "encoder_hidden": 19, "decoder_hidden": 19,
      "attention": "dot", "combine": "luong"}, None),
    ("RNN: two layers", "The encoder's layer 1 reads both directions of layer 0; the decoder's names become "
     "torch.nn.GRU's.", dict(RNN, layers=2), ("rnn.",)),
    ("RNN: the other attention variants", "Only the attention's tensors, beside the first table's others: general, "
     "additive and multi-head (here `D ≠ H`: separate projections; one `in_proj_weight` (3H × H) when "
     "`D = H`); dummy and meanpool have none.", None, None),
    ("", "`general`:", dict(RNN, attention="general"), ("attention.",)),
    ("", "`additive`:", dict(RNN, attention="additive"), ("attention.",)),
    ("", "`multihead`:", dict(RNN, attention="multihead", heads=1), ("attention.",)),
    ("Transformer: pre-norm, sinusoidal positions", "The kind of configs/multi30k-transformer.json, one layer a stack.",
     dict(TF, norm="pre", positions="sinusoidal"), None),
    ("Transformer: learned positions", "Two tables more, beside the others above (post-norm has the same names).",
     dict(TF, norm="post", positions="learned", max_positions=17), ("_pos.",)),
    ("Transformer: `tie_embeddings: all`", "The one matrix is kept under the generator's name; the embeddings' "
     "names go.", dict(TF, norm="pre", tie_embeddings="all"), ("embed", "generator")),
]


def sizes(m):
    """The symbols of docs/numerics.md and their values in model m."""
    if m.get("type") == "transformer":
        s = {"d": m["d_model"], "ff": m["ff"], "V": 8, "P": m.get("max_positions", 0)}
        return [("3d", 3 * s["d"]), ("d", s["d"]), ("ff", s["ff"]), ("V", 8), ("P", s["P"])]
    e, he, h = m.get("embedding", 0), m["encoder_hidden"], m["decoder_hidden"]  # a one-hot model has no embedding width
    dirs = 2 if m.get("bidirectional") else 1
    gates = 3 if m["cell"] == "gru" else 4
    D = dirs * he
    C = h if m["attention"] == "multihead" else D
    out = [("V", 8), ("E", e)]
    enc = [(f"{gates}Hₑ", gates * he), ("Hₑ", he), ("D", D)]
    dec = [(f"{gates}H", gates * h), ("H", h), ("3H", 3 * h), ("C + H", C + h), ("D", D), ("kq", m.get("kq", 0))]
    return out, enc, dec


def symbol(name, n, m):
    if m.get("type") == "transformer":
        table = sizes(m)
    else:
        out, enc, dec = sizes(m)
        table = (enc + out + dec) if name.startswith("encoder.") else (dec + out + enc)
    for sym, v in table:
        if v == n:
            return sym
    return str(n)


def tensors(bindir, m, work):
    cfg = {"name": "t", "seed": 1, "task": TASK, "model": m,
           "train": {"epochs": 1, "batch_size": 4, "max_steps": 1, "threads": 1}}
    with open(os.path.join(work, "m.json"), "w") as f:
        json.dump(cfg, f)
    run = lambda *a: subprocess.run(a, cwd=work, check=True, capture_output=True)
    run(os.path.join(bindir, "train"), "--config", "m.json", "--out", "r", "--overwrite")
    run(os.path.join(bindir, "export"), "r/model.bin", "--out", "m.safetensors")
    with open(os.path.join(work, "m.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    # in the file's order of data (the model's own order)
    return sorted(((k, v["shape"], v["data_offsets"][0]) for k, v in header.items()), key=lambda t: t[2])


def tables(bindir):
    out = []
    with tempfile.TemporaryDirectory() as work:
        for title, what, m, only in MODELS:
            if title:
                out.append(f"### {title}\n")
            if what:
                out.append(what + "\n")
            if m is None:
                continue
            out.append("| tensor | shape |\n|---|---|")
            for name, shape, _ in tensors(bindir, m, work):
                if only and not any(o in name for o in only):
                    continue
                dims = " × ".join(f"({x})" if " " in x and len(shape) > 1 else x for x in
                                  (symbol(name, d, m) for d in shape))
                out.append(f"| `{name}` | ({dims}) |")
            out.append("")
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: model-files.py BIN_DIR [--check]")
    bindir = os.path.abspath(sys.argv[1])
    text = open(PAGE, encoding="utf-8").read()
    begin, end = "<!-- tensors:begin -->\n", "<!-- tensors:end -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    new = tables(bindir) + "\n"
    if "--check" in sys.argv:
        if text[i:j] != new:
            sys.stderr.write("docs/reference/model-files.md is not what the programs export; run "
                             "python3 scripts/model-files.py build/bin. They give:\n" + new)
            sys.exit(1)
        print("model-files: the page's tables are the programs'")
        return
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text[:i] + new + text[j:])


if __name__ == "__main__":
    main()
