#!/usr/bin/env python3
"""Checks a model against PyTorch, both ways, through safetensors.

  /usr/bin/python3 scripts/torch-check.py MODEL.bin --src FILE [--n 100] [--train-steps 30]
                   [--write-fixture DIR]

1. here -> PyTorch: ./export writes MODEL.bin as safetensors; the PyTorch reference model of
   the same architecture (s2s.pytorch, the package's loader, in float64) loads it; for the first N lines
   of FILE, ./translate's greedy outputs are scored (--score --logits) and PyTorch computes
   the logits of the same (source, output) ids: the largest absolute difference is printed,
   and PyTorch's own greedy decoding must give the same outputs.
2. PyTorch -> here: the PyTorch model, trained for a few Adam steps on those pairs, is saved
   as safetensors (every state_dict key, tied copies included) with the exported metadata;
   ./import makes a model file of it, and the same two comparisons run again.
With --write-fixture DIR the second model is kept for make test, which has no torch:
DIR/torch.safetensors, DIR/src.txt and DIR/expected.json (greedy outputs, the first lines'
logits). Needs Debian's python3-torch; exits 0 with a message where torch is missing.
Not part of the product: a check, run by hand or by the tests where torch is installed."""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch-check: PyTorch is not installed (Debian: python3-torch); nothing checked")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def _loader():
    """python/s2s/pytorch.py, the package's PyTorch loader, as a module of its own: its models
    need PyTorch alone, not the C library the package loads at import."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "python", "s2s", "pytorch.py")
    spec = importlib.util.spec_from_file_location("s2s_pytorch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pytorch = _loader()
PAD, UNK, SOS, EOS = 0, 1, 2, 3


def read_safetensors(path):
    """(tensors in float64, metadata)"""
    tensors, meta = pytorch.read_safetensors(path)
    return {k: v.double() for k, v in tensors.items()}, meta


def write_safetensors(path, tensors, meta):
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        raw = t.detach().float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def build(cfg, src_vocab, trg_vocab):
    """The package's PyTorch module of the config (python/s2s/pytorch.py), in float64."""
    return pytorch.S2sModule(cfg, src_vocab, trg_vocab).double().eval()


def names(model):
    """The model's tensors under the file's names (a tied tensor once)."""
    own = model.net.state_dict(keep_vars=True)
    return {f: own[k] for k, f in model.net.file_names().items() if k == f or f not in own}


def load(model, tensors):
    model.load_tensors({k: v.double() for k, v in tensors.items()}, "the exported file")


def logits(model, src, trg):
    """The logits (len(trg), V) before each of trg (<eos> last), with gradients."""
    s = torch.tensor(src).unsqueeze(1)
    out, _ = model(s, torch.tensor([len(src)]), torch.tensor([SOS] + trg).unsqueeze(1))
    return out.squeeze(1)


def greedy(model, src, max_len):
    return model.greedy(src, max_len)


def detokenize(cfg, vocab, ids):
    """Output ids as ./translate writes them: a subword model's pieces joined ("\u2581" a space,
    <0xHH> a byte), the reversal's characters joined, else the words with spaces."""
    toks = [vocab[i] for i in ids]
    task = cfg["task"]
    if task.get("subword", "none") != "none":
        out = bytearray()
        for t in toks:
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                out.append(int(t[3:5], 16))
            else:
                out += t.replace("\u2581", " ").encode()
        return out.decode("utf-8", "replace").strip()
    return "".join(toks) if task["type"] == "reverse" else " ".join(toks)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"torch-check: {' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def compare(bin_dir, model_bin, model, cfg, vocab, src_file, tmp, tag):
    """./translate's greedy outputs and logits against the PyTorch model's."""
    hyp = os.path.join(tmp, tag + ".hyp")
    cap = cfg["train"].get("max_decode_len", 0)
    with open(hyp, "w") as f:  # without a configured cap, 2 x source + 10 of each line alone
        f.write(run([os.path.join(bin_dir, "translate"), model_bin, "--input", src_file] + ([] if cap else ["--batch", "1"])))
    lj = os.path.join(tmp, tag + ".logits.jsonl")
    run([os.path.join(bin_dir, "translate"), model_bin, "--input", src_file, "--score", hyp, "--logits", lj])
    worst, same, rows, ties = 0.0, 0, [], 0
    with open(hyp, encoding="utf-8") as f:
        ours_text = f.read().split("\n")
    with open(lj) as f:
        for line in f:
            r = json.loads(line)
            ours = torch.tensor(r["logits"], dtype=torch.float64)
            with torch.no_grad():
                theirs = logits(model, r["src"], r["trg"][:-1] + [EOS])
            worst = max(worst, float((ours - theirs).abs().max()))
            # greedy: PyTorch's output text against ours
            max_len = cap or 2 * len(r["src"]) + 10
            g = greedy(model, r["src"], max_len)
            text = detokenize(cfg, vocab, g)
            mine = ours_text[r["line"]]
            same += text == mine
            if text != mine:
                # where PyTorch's own logits are within 1e-4 between its choice and ours: a tie
                # that float32 and float64 break differently, not a different model
                ids = r["trg"][:-1]
                k = next((i for i in range(min(len(g), len(ids))) if g[i] != ids[i]), None)
                if k is not None:
                    with torch.no_grad():
                        row = logits(model, r["src"], g[:k] + [PAD])[-1]
                    ties += float(row[g[k]] - row[ids[k]]) < 1e-4
                if os.environ.get("TORCH_CHECK_VERBOSE"):
                    print(f"  line {r['line']}: PyTorch {text!r}\n  here    {mine!r}")
            rows.append(r)
    n = len(rows)
    print(f"{tag}: {n} sentences: max |logit difference| {worst:.3g}; greedy outputs identical {same}/{n}"
          + (f" ({ties} of the others at a near-tie, < 1e-4 between the two tokens)" if same < n else ""))
    return worst, same, n, rows, hyp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--src", required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--train-steps", type=int, default=30)
    ap.add_argument("--bin", default=ROOT)
    ap.add_argument("--write-fixture")
    a = ap.parse_args()
    torch.manual_seed(1)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src.txt")
        with open(a.src, encoding="utf-8") as f, open(src, "w", encoding="utf-8") as g:
            for i, line in enumerate(f):
                if i >= a.n:
                    break
                g.write(line)
        st = os.path.join(tmp, "model.safetensors")
        run([os.path.join(a.bin, "export"), a.model, "--out", st])
        tensors, meta = read_safetensors(st)
        cfg = json.loads(meta["s2s.config"])
        vocab = json.loads(meta["s2s.trg_vocab"])
        model = build(cfg, json.loads(meta["s2s.src_vocab"]), vocab)
        load(model, tensors)
        w1, s1, n1, rows, _ = compare(a.bin, a.model, model, cfg, vocab, src, tmp, "here -> PyTorch")
        # PyTorch trains a little on those pairs, then its weights come here
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for step in range(a.train_steps):
            r = rows[step % len(rows)]
            out = logits(model, r["src"], r["trg"][:-1] + [EOS])
            loss = torch.nn.functional.cross_entropy(out, torch.tensor(r["trg"]))
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        st2 = os.path.join(tmp, "torch.safetensors")
        write_safetensors(st2, names(model), meta)
        bin2 = os.path.join(tmp, "torch.bin")
        run([os.path.join(a.bin, "import"), st2, "--out", bin2])
        w2, s2, n2, rows2, hyp2 = compare(a.bin, bin2, model, cfg, vocab, src, tmp, "PyTorch -> here")
        if a.write_fixture:
            os.makedirs(a.write_fixture, exist_ok=True)
            write_safetensors(os.path.join(a.write_fixture, "torch.safetensors"), names(model), meta)
            with open(src, encoding="utf-8") as f, open(os.path.join(a.write_fixture, "src.txt"), "w", encoding="utf-8") as g:
                g.write(f.read())
            with open(hyp2, encoding="utf-8") as f:
                outs = f.read().splitlines()
            with torch.no_grad():
                exp = [logits(model, r["src"], r["trg"][:-1] + [EOS]).float().tolist() for r in rows2[:3]]
            with open(os.path.join(a.write_fixture, "expected.json"), "w") as f:
                json.dump({"greedy": outs, "logits": exp, "src_ids": [r["src"] for r in rows2[:3]],
                           "trg_ids": [r["trg"] for r in rows2[:3]]}, f)
            print("wrote", a.write_fixture)
    ok = w1 <= 1e-4 and w2 <= 1e-4 and s1 == n1 and s2 == n2
    print("torch-check:", "OK" if ok else "differences above (goal: logits within 1e-4, identical greedy outputs)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
