#!/usr/bin/env python3
"""Golden values for the Transformer stacks against PyTorch's nn.Transformer (batch_first=False,
dropout 0, training mode so that no fast path is taken): the decoder output of random source
and target states with padding in both and the causal target mask, each decoder layer's
cross-attention weights (head average and per head), and the gradient of every parameter and
of both inputs for loss = sum(out * seed). Computed in float64 from float32 values.

Test data generator, not part of the product. Run: /usr/bin/python3 make_transformer.py
(needs Debian's python3-torch). Writes transformer/stack_*.json."""
import json
import os

import torch
import torch.nn as nn

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

if __name__ == "__main__":
    os.makedirs(os.path.join(HERE, "transformer"), exist_ok=True)
    for name, c in CASES:
        with open(os.path.join(HERE, "transformer", "stack_" + name + ".json"), "w") as f:
            json.dump({"torch": torch.__version__, **case(name, **c)}, f)
        print("wrote", name)
