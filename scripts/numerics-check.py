#!/usr/bin/env python3
"""Rebuilds s2s models in PyTorch from docs/numerics.md alone and checks their logits.

  /usr/bin/python3 scripts/numerics-check.py MODEL.bin... --src FILE [--n 20] [--tol 1e-4]

For each model: ./export writes it as safetensors (weights and config); the model is built
here from the formulas of docs/numerics.md (float64, one sentence at a time, no code shared
with the tests' references), ./translate decodes the first N lines of FILE and scores its own
outputs (--score --logits), and the logits computed here are compared with those: the largest
absolute difference is printed, and over --tol the check fails (exit 1). Needs Debian's
python3-torch; exits 0 with a message where it is missing. Not part of the product."""
import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("numerics-check: PyTorch is not installed (Debian: python3-torch); nothing checked")
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("S2S_BIN_DIR", ROOT)
F = torch.float64


def read_safetensors(path):
    """scripts/torch-check.py's reader: (tensors in float64, metadata)."""
    spec = importlib.util.spec_from_file_location("torch_check", os.path.join(ROOT, "scripts", "torch-check.py"))
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    return tc.read_safetensors(path)


def linear(x, W, b=None):
    y = x @ W.T
    return y + b if b is not None else y


# ---- the RNN encoder-decoder ----

def cell(kind, x, h, c, w):
    """One step of the page's GRU or LSTM; w = (W_ih, W_hh, b_ih, b_hh)."""
    W_ih, W_hh, b_ih, b_hh = w
    gi, gh = linear(x, W_ih, b_ih), linear(h, W_hh, b_hh)
    if kind == "gru":
        H = h.shape[-1]
        r = torch.sigmoid(gi[:H] + gh[:H])
        z = torch.sigmoid(gi[H:2 * H] + gh[H:2 * H])
        n = torch.tanh(gi[2 * H:] + r * gh[2 * H:])
        return (1 - z) * n + z * h, None
    H = h.shape[-1]
    g = gi + gh
    i, f, gg, o = torch.sigmoid(g[:H]), torch.sigmoid(g[H:2 * H]), torch.tanh(g[2 * H:3 * H]), torch.sigmoid(g[3 * H:])
    c2 = f * c + i * gg
    return o * torch.tanh(c2), c2


class Rnn:
    def __init__(self, m, P):
        self.m, self.P = m, P
        self.kind, self.L = m["cell"], m["layers"]
        self.bi = m["bidirectional"]
        self.H, self.He = m["decoder_hidden"], m["encoder_hidden"]
        tie = m.get("tie_embeddings", "none")
        self.out_w = P["decoder.out.weight"]
        self.src_emb = self.out_w if tie == "all" else P.get("encoder.embedding.weight")
        self.trg_emb = self.out_w if tie != "none" else P.get("decoder.embedding.weight")

    def enc_weights(self, k, d):
        sfx = f"_l{k}" + ("_reverse" if d else "")
        return [self.P[f"encoder.rnn.{n}{sfx}"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def dec_weights(self, k):
        sfx = "" if self.L == 1 else f"_l{k}"
        return [self.P[f"decoder.rnn.{n}{sfx}"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def encode(self, x):
        S, finals = x.shape[0], []
        for k in range(self.L):
            outs, last = [], []
            for d in range(2 if self.bi else 1):
                h, c = torch.zeros(self.He, dtype=F), torch.zeros(self.He, dtype=F)
                ys = [None] * S
                for t in (range(S) if d == 0 else reversed(range(S))):
                    h, c = cell(self.kind, x[t], h, c, self.enc_weights(k, d))
                    ys[t] = h
                outs.append(torch.stack(ys))
                last.append((h, c))
            x = torch.cat(outs, dim=1)
            finals.append(last)
        return x, finals

    def start(self, finals):
        hs, cs = [], []
        for k in range(self.L):
            if self.bi:  # ReLU(fc([h_fwd_last ; h_bwd_first])), one fc for all layers; cells at 0
                hs.append(torch.relu(linear(torch.cat([finals[k][0][0], finals[k][1][0]]), self.P["encoder.fc.weight"],
                                            self.P["encoder.fc.bias"])))
                cs.append(torch.zeros(self.H, dtype=F))
            else:
                hs.append(finals[k][0][0])
                cs.append(finals[k][0][1] if finals[k][0][1] is not None else torch.zeros(self.H, dtype=F))
        return hs, cs

    def attend(self, h, enc):
        a, P, kind = "decoder.attention.", self.P, self.m["attention"]
        if kind == "dummy":
            return torch.zeros(enc.shape[1], dtype=F)
        if kind == "meanpool":
            return enc.mean(0)
        if kind == "multihead":
            return self.multihead(h, enc)
        if kind == "dot":
            s = enc @ h
        elif kind == "scaled_dot":
            q = linear(h, P[a + "W_q.weight"], P[a + "W_q.bias"])
            k = linear(enc, P[a + "W_k.weight"], P[a + "W_k.bias"])
            s = k @ q / math.sqrt(self.m["kq"])
        elif kind == "general":
            s = linear(enc, P[a + "W.weight"]) @ h
        elif kind == "additive":
            q = linear(h, P[a + "W_q.weight"])
            k = linear(enc, P[a + "W_k.weight"], P[a + "W_k.bias"])
            s = torch.tanh(q + k) @ P[a + "v"]
        else:
            raise SystemExit(f"numerics-check: attention {kind!r} is not on the page")
        return torch.softmax(s, 0) @ enc

    def multihead(self, h, enc):
        a, P, H, n = "decoder.attention.", self.P, self.H, self.m["heads"]
        if a + "in_proj_weight" in P:
            Wq, Wk, Wv = P[a + "in_proj_weight"].split(H)
        else:
            Wq, Wk, Wv = P[a + "q_proj_weight"], P[a + "k_proj_weight"], P[a + "v_proj_weight"]
        bq, bk, bv = P[a + "in_proj_bias"].split(H)
        q, k, v = linear(h, Wq, bq), linear(enc, Wk, bk), linear(enc, Wv, bv)
        dh, ctx = H // n, []
        for j in range(n):
            sl = slice(j * dh, (j + 1) * dh)
            w = torch.softmax(k[:, sl] @ q[sl] / math.sqrt(dh), 0)
            ctx.append(w @ v[:, sl])
        return linear(torch.cat(ctx), P[a + "out_proj.weight"], P[a + "out_proj.bias"])

    def logits(self, src, trg):
        enc, finals = self.encode(self.src_emb[src])  # one-hot embeddings are the identity in the file
        hs, cs = self.start(finals)
        rows = []
        for y in [2] + trg[:-1]:  # <sos>, then the target: teacher-forced
            x = self.trg_emb[y]
            for k in range(self.L):
                hs[k], c = cell(self.kind, x, hs[k], cs[k], self.dec_weights(k))
                cs[k] = c if c is not None else cs[k]
                x = hs[k]
            a = self.attend(x, enc)
            both = torch.cat([a, x])
            if self.m["combine"] == "luong":
                both = torch.tanh(linear(both, self.P["decoder.W_c.weight"]))
            rows.append(linear(both, self.out_w, self.P["decoder.out.bias"]))
        return torch.stack(rows)


# ---- the Transformer ----

class Tf:
    def __init__(self, m, P):
        self.m, self.P, d = m, P, m["d_model"]
        self.net = torch.nn.Transformer(d_model=d, nhead=m["heads"], num_encoder_layers=m.get("encoder_layers") or m["layers"],
                                        num_decoder_layers=m.get("decoder_layers") or m["layers"], dim_feedforward=m["ff"], dropout=0.0,
                                        activation=m["activation"], norm_first=m["norm"] == "pre",
                                        layer_norm_eps=1e-5).to(F).eval()
        own = {k: v for k, v in self.net.state_dict().items()}
        with torch.no_grad():
            for k, v in own.items():
                v.copy_(P["transformer." + k])
        tie = m.get("tie_embeddings", "none")
        g = P["generator.weight"]
        self.src_emb = g if tie == "all" else P["src_embed.weight"]
        self.trg_emb = g if tie != "none" else P["trg_embed.weight"]

    def positions(self, n, table):
        d = self.m["d_model"]
        if self.m["positions"] == "learned":
            return self.P[table][[min(p, self.P[table].shape[0] - 1) for p in range(n)]]
        P = torch.zeros(n, d, dtype=F)
        for pos in range(n):
            for j in range(0, d, 2):
                angle = pos / 10000 ** (j / d)
                P[pos, j] = float(torch.tensor(math.sin(angle), dtype=torch.float32))
                if j + 1 < d:
                    P[pos, j + 1] = float(torch.tensor(math.cos(angle), dtype=torch.float32))
        return P

    def logits(self, src, trg):
        d = self.m["d_model"]
        ys = [2] + trg[:-1]
        x = math.sqrt(d) * self.src_emb[src] + self.positions(len(src), "src_pos.weight")
        y = math.sqrt(d) * self.trg_emb[ys] + self.positions(len(ys), "trg_pos.weight")
        mask = self.net.generate_square_subsequent_mask(len(ys)).to(F)
        out = self.net(x.unsqueeze(1), y.unsqueeze(1), tgt_mask=mask).squeeze(1)
        return linear(out, self.P["generator.weight"], self.P["generator.bias"])


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"numerics-check: {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def check(model, src_file, n, tmp):
    st = os.path.join(tmp, "m.safetensors")
    run([os.path.join(BIN, "export"), model, "--out", st])
    P, meta = read_safetensors(st)
    m = json.loads(meta["s2s.config"])["model"]
    net = Tf(m, P) if m.get("type", "rnn") == "transformer" else Rnn(m, P)
    with open(src_file, encoding="utf-8") as f:
        lines = [l for _, l in zip(range(n), f)]
    src = os.path.join(tmp, "src.txt")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(lines)
    tr = os.path.join(BIN, "translate")
    hyp = run([tr, model, "--input", src])
    with open(os.path.join(tmp, "hyp.txt"), "w", encoding="utf-8") as f:
        f.write(hyp)
    out = os.path.join(tmp, "logits.json")
    run([tr, model, "--input", src, "--score", os.path.join(tmp, "hyp.txt"), "--logits", out])
    worst = 0.0
    with torch.no_grad():
        for line in open(out):
            j = json.loads(line)
            ref = torch.tensor(j["logits"], dtype=F)
            got = net.logits(torch.tensor(j["src"]), j["trg"])
            worst = max(worst, (got - ref).abs().max().item() / max(1.0, ref.abs().max().item()))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--src", required=True)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    bad = 0
    for model in a.models:
        with tempfile.TemporaryDirectory() as tmp:
            worst = check(model, a.src, a.n, tmp)
        ok = worst <= a.tol
        bad += not ok
        print(f"numerics-check: {model}: largest logit difference {worst:.2e} (relative to the row's largest) "
              f"{'ok' if ok else 'OVER ' + str(a.tol)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
