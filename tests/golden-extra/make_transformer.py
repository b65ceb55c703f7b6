#!/usr/bin/env python3
"""Golden values for the Transformer stacks against PyTorch's nn.Transformer (batch_first=False,
dropout 0, training mode so that no fast path is taken): the decoder output of random source
and target states with padding in both and the causal target mask, each decoder layer's
cross-attention weights (head average and per head), and the gradient of every parameter and
of both inputs for loss = sum(out * seed). Computed in float64 from float32 values.

Test data generator, not part of the product. Run: /usr/bin/python3 make_transformer.py
(needs Debian's python3-torch). Writes transformer/stack_*.json, and transformer/model_*.json:
the whole model of model.type = "transformer" (embeddings, positions, nn.Transformer,
generator) on token ids with padding, its logits, loss and every gradient."""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def case(name, d, heads, ff, enc_layers, dec_layers, norm_first, activation, S, T, src_lens, trg_lens, seed):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, lo=-1.0, hi=1.0):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).float().double()

    tf = nn.Transformer(d, heads, enc_layers, dec_layers, ff, dropout=0.0, activation=activation,
                        norm_first=norm_first).double()
    tf.train()
    with torch.no_grad():
        for pname, p in tf.named_parameters():
            if "norm" in pname and pname.endswith("weight"):
                p.copy_(rnd(*p.shape, lo=0.5, hi=1.5))
            else:
                p.copy_(rnd(*p.shape, lo=-0.4, hi=0.4))
    B = len(src_lens)
    src = rnd(S, B, d).requires_grad_(True)
    tgt = rnd(T, B, d).requires_grad_(True)
    src_pad = torch.tensor([[s >= src_lens[b] for s in range(S)] for b in range(B)])
    tgt_pad = torch.tensor([[s >= trg_lens[b] for s in range(T)] for b in range(B)])
    causal = tf.generate_square_subsequent_mask(T).double()
    cross, cross_heads = [], []
    for layer in tf.decoder.layers:  # keep each layer's cross-attention weights
        def mha_block(x, mem, attn_mask, key_padding_mask, layer=layer):
            out, w = layer.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                          need_weights=True, average_attn_weights=False)
            cross_heads.append(w)
            cross.append(w.mean(1))
            return layer.dropout2(out)
        layer._mha_block = mha_block
    out = tf(src, tgt, tgt_mask=causal, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
             memory_key_padding_mask=src_pad)
    seed_grad = rnd(T, B, d)
    (out * seed_grad).sum().backward()
    return {"name": name, "d": d, "heads": heads, "ff": ff, "enc_layers": enc_layers, "dec_layers": dec_layers,
            "norm_first": norm_first, "activation": activation, "S": S, "T": T, "src_lens": src_lens,
            "trg_lens": trg_lens, "src": flat(src), "tgt": flat(tgt), "seed": flat(seed_grad), "out": flat(out),
            "cross": [flat(w) for w in cross], "cross_heads": [flat(w) for w in cross_heads],
            "params": {k: flat(v) for k, v in tf.named_parameters()},
            "grads": {"src": flat(src.grad), "tgt": flat(tgt.grad),
                      **{k: flat(v.grad) for k, v in tf.named_parameters()}}}


CASES = [
    ("post_norm_relu_2x2", dict(d=8, heads=2, ff=16, enc_layers=2, dec_layers=2, norm_first=False, activation="relu",
                                S=5, T=4, src_lens=[5, 3, 1], trg_lens=[4, 2, 3], seed=21)),
    ("pre_norm_gelu_1x2", dict(d=12, heads=3, ff=20, enc_layers=1, dec_layers=2, norm_first=True, activation="gelu",
                               S=6, T=5, src_lens=[2, 6], trg_lens=[5, 1], seed=22)),
    ("pre_norm_relu_2x1", dict(d=8, heads=4, ff=12, enc_layers=2, dec_layers=1, norm_first=True, activation="relu",
                               S=4, T=6, src_lens=[4, 4, 2, 3], trg_lens=[6, 3, 6, 2], seed=23)),
    ("post_norm_gelu_1x1", dict(d=6, heads=1, ff=10, enc_layers=1, dec_layers=1, norm_first=False, activation="gelu",
                                S=3, T=3, src_lens=[3, 2], trg_lens=[2, 3], seed=24)),
]

PAD, SOS, EOS = 0, 2, 3


class TfSeq2Seq(nn.Module):
    """The model of model.type = "transformer": token embeddings scaled by sqrt(d) plus
    positions (sinusoidal, or learned: src_pos / trg_pos), nn.Transformer, a Linear generator."""

    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.d, self.positions = d, c["positions"]
        self.src_embed = nn.Embedding(c["src_vocab"], d)
        self.trg_embed = nn.Embedding(c["trg_vocab"], d)
        if self.positions == "learned":
            self.src_pos = nn.Embedding(c["max_positions"], d)
            self.trg_pos = nn.Embedding(c["max_positions"], d)
        enc, dec = c.get("encoder_layers") or c["layers"], c.get("decoder_layers") or c["layers"]
        self.transformer = nn.Transformer(d, c["heads"], enc, dec, c["ff"], dropout=0.0,
                                          activation=c["activation"], norm_first=c["norm"] == "pre")
        self.generator = nn.Linear(d, c["trg_vocab"])

    def pos(self, table, L, B):
        if self.positions == "learned":
            return table(torch.arange(L)).unsqueeze(1)
        pe = torch.zeros(L, self.d, dtype=torch.float64)
        position = torch.arange(L, dtype=torch.float64).unsqueeze(1)
        rate = torch.exp(-math.log(10000.0) * torch.arange(0, self.d, 2, dtype=torch.float64) / self.d)
        pe[:, 0::2] = torch.sin(position * rate)
        pe[:, 1::2] = torch.cos(position * rate)[:, : self.d // 2]
        return pe.float().double().unsqueeze(1)

    def forward(self, src, trg):
        S, B = src.shape
        T1 = trg.shape[0] - 1
        x = self.src_embed(src) * math.sqrt(self.d) + self.pos(getattr(self, "src_pos", None), S, B)
        y = self.trg_embed(trg[:-1]) * math.sqrt(self.d) + self.pos(getattr(self, "trg_pos", None), T1, B)
        src_pad = (src == PAD).t()
        out = self.transformer(x, y, tgt_mask=self.transformer.generate_square_subsequent_mask(T1).double(),
                               src_key_padding_mask=src_pad, tgt_key_padding_mask=(trg[:-1] == PAD).t(),
                               memory_key_padding_mask=src_pad)
        return self.generator(out)


def ids(g, V, lens, bos_eos):
    L = max(lens) + (2 if bos_eos else 0)
    x = torch.full((L, len(lens)), PAD, dtype=torch.long)
    for b, n in enumerate(lens):
        body = torch.randint(4, V, (n,), generator=g)
        if bos_eos:
            x[0, b], x[n + 1, b] = SOS, EOS
            x[1:n + 1, b] = body
        else:
            x[:n, b] = body
    return x


def model_case(name, c, seed):
    g = torch.Generator().manual_seed(seed)
    m = TfSeq2Seq(c).double()
    m.train()
    with torch.no_grad():
        for pname, p in m.named_parameters():
            lo, hi = (0.5, 1.5) if "norm" in pname and pname.endswith("weight") else (-0.4, 0.4)
            p.copy_((torch.rand(p.shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).float().double())
    src = ids(g, c["src_vocab"], c["src_len"], False)
    trg = ids(g, c["trg_vocab"], c["trg_len"], True)
    logits = m(src, trg)
    V = c["trg_vocab"]
    loss = F.cross_entropy(logits.reshape(-1, V), trg[1:].reshape(-1), ignore_index=PAD)
    loss.backward()
    return {"name": name, "config": c, "src": src.t().tolist(), "trg": trg.t().tolist(), "loss": loss.item(),
            "logits": flat(logits.transpose(0, 1)), "params": {k: flat(p) for k, p in m.named_parameters()},
            "grads": {k: flat(p.grad) for k, p in m.named_parameters()}}


MODEL_CASES = [
    ("model_post_sinusoidal_relu", dict(src_vocab=11, trg_vocab=9, d_model=8, heads=2, ff=12, layers=2, norm="post",
                                        positions="sinusoidal", activation="relu", max_positions=16,
                                        src_len=[5, 2, 4], trg_len=[3, 6, 1]), 31),
    ("model_pre_learned_gelu", dict(src_vocab=7, trg_vocab=10, d_model=12, heads=4, ff=16, layers=1, norm="pre",
                                    positions="learned", activation="gelu", max_positions=10,
                                    src_len=[1, 6], trg_len=[4, 2]), 32),
    # a deep encoder over a shallow decoder (model.encoder_layers, decoder_layers)
    ("model_pre_deep_encoder", dict(src_vocab=9, trg_vocab=8, d_model=8, heads=2, ff=12, layers=2, encoder_layers=3,
                                    decoder_layers=1, norm="pre", positions="sinusoidal", activation="relu",
                                    max_positions=16, src_len=[4, 6, 2], trg_len=[5, 1, 3]), 33),
]

if __name__ == "__main__":
    import sys
    only = sys.argv[1:]  # names to write (default: every case)
    os.makedirs(os.path.join(HERE, "transformer"), exist_ok=True)
    for name, c in CASES:
        if only and name not in only:
            continue
        with open(os.path.join(HERE, "transformer", "stack_" + name + ".json"), "w") as f:
            json.dump({"torch": torch.__version__, **case(name, **c)}, f)
        print("wrote", name)
    for name, c, seed in MODEL_CASES:
        if only and name not in only:
            continue
        with open(os.path.join(HERE, "transformer", name + ".json"), "w") as f:
            json.dump({"torch": torch.__version__, **model_case(name, c, seed)}, f)
        print("wrote", name)
