#!/usr/bin/env python3
"""Golden values for single ops and layers against PyTorch, in float64 from float32 inputs so
that the C float32 results are compared with the exact values: layer norm (forward and every
gradient) and nn.MultiheadAttention (output, mean and per-head weights, every gradient).

Test data generator, not part of the product. Run: /usr/bin/python3 make_ops.py
(needs Debian's python3-torch). Writes ops/layer_norm.json, ops/multihead.json and ops/label_smoothing.json."""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def layer_norm_case(name, shape, eps, affine, offset, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g, dtype=torch.float64) * 4 - 2 + offset).float().double()
    x.requires_grad_(True)
    D = shape[-1]
    ln = torch.nn.LayerNorm(D, eps=eps, elementwise_affine=affine).double()
    if affine:
        with torch.no_grad():
            ln.weight.copy_((torch.rand(D, generator=g, dtype=torch.float64) + 0.5).float().double())
            ln.bias.copy_((torch.rand(D, generator=g, dtype=torch.float64) - 0.5).float().double())
    seed_grad = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).float().double()
    y = ln(x)
    (y * seed_grad).sum().backward()
    case = {"name": name, "shape": list(shape), "eps": eps, "affine": affine, "x": flat(x), "seed": flat(seed_grad),
            "y": flat(y), "dx": flat(x.grad)}
    if affine:
        case.update({"gain": flat(ln.weight), "bias": flat(ln.bias), "dgain": flat(ln.weight.grad),
                     "dbias": flat(ln.bias.grad)})
    return case


def main():
    cases = [
        layer_norm_case("affine_3d", (2, 3, 16), 1e-5, True, 0.0, 1),
        layer_norm_case("bare", (5, 7), 1e-5, False, 0.0, 2),
        layer_norm_case("large_mean", (4, 32), 1e-5, True, 1000.0, 3),  # naive E[x²]−E[x]² loses it
        layer_norm_case("wide_eps", (3, 256), 1e-6, True, 0.0, 4),
    ]
    os.makedirs(os.path.join(HERE, "ops"), exist_ok=True)
    with open(os.path.join(HERE, "ops", "layer_norm.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)


def multihead_case(name, T, S, B, E, D, heads, lens, seed):
    """nn.MultiheadAttention(E, heads, kdim=D, vdim=D), batch_first=False, key_padding_mask from
    lens; parameters as PyTorch names them (in_proj_weight when D == E)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, lo=-1.0, hi=1.0):
        return ((torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).float().double())

    mha = torch.nn.MultiheadAttention(E, heads, kdim=D, vdim=D).double()
    params = {}
    with torch.no_grad():
        for pname, p in mha.named_parameters():
            p.copy_(rnd(*p.shape, lo=-0.5, hi=0.5))
            params[pname] = p
    dec = rnd(T, B, E).requires_grad_(True)
    enc = rnd(S, B, D).requires_grad_(True)
    pad = torch.tensor([[s >= lens[b] for s in range(S)] for b in range(B)])  # True: padding
    out, w_mean = mha(dec, enc, enc, key_padding_mask=pad, need_weights=True, average_attn_weights=True)
    _, w_heads = mha(dec, enc, enc, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
    seed_grad = rnd(T, B, E)
    (out * seed_grad).sum().backward()
    return {"name": name, "T": T, "S": S, "B": B, "E": E, "D": D, "heads": heads, "lens": lens,
            "dec": flat(dec), "enc": flat(enc), "seed": flat(seed_grad),
            "params": {k: flat(v) for k, v in params.items()},
            "out": flat(out), "weights": flat(w_mean), "head_weights": flat(w_heads),
            "grads": {"dec": flat(dec.grad), "enc": flat(enc.grad),
                      **{k: flat(v.grad) for k, v in params.items()}}}


def main_multihead():
    cases = [
        multihead_case("separate_kv_dims", 3, 5, 2, 8, 12, 2, [5, 3], 11),  # q/k/v_proj_weight
        multihead_case("fused_in_proj", 4, 6, 3, 12, 12, 4, [6, 1, 4], 12),  # in_proj_weight
        multihead_case("one_head", 2, 3, 2, 6, 10, 1, [2, 3], 13),
    ]
    with open(os.path.join(HERE, "ops", "multihead.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)


def smoothing_case(name, N, V, eps, ignored, seed):
    """nn.CrossEntropyLoss(label_smoothing=eps, ignore_index=0), mean reduction: rows whose
    target is 0 count for nothing, the smoothing mass goes to every class (0 included)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(N, V, generator=g, dtype=torch.float64) * 8 - 4).float().double().requires_grad_(True)
    tg = torch.randint(1, V, (N,), generator=g)
    for r in ignored:
        tg[r] = 0
    loss = torch.nn.CrossEntropyLoss(label_smoothing=eps, ignore_index=0)(x, tg)
    loss.backward()
    plain = torch.nn.CrossEntropyLoss(ignore_index=0)(x.detach(), tg)
    return {"name": name, "N": N, "V": V, "eps": eps, "x": flat(x), "targets": tg.tolist(),
            "loss": float(loss), "nll": float(plain), "dx": flat(x.grad)}


def main_smoothing():
    cases = [
        smoothing_case("eps_0.1", 7, 11, 0.1, [2, 5], 21),
        smoothing_case("eps_0.3_wide", 5, 300, 0.3, [0], 22),
        smoothing_case("eps_0", 4, 9, 0.0, [3], 23),
    ]
    with open(os.path.join(HERE, "ops", "label_smoothing.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)


if __name__ == "__main__":
    main()
    main_multihead()
    main_smoothing()
