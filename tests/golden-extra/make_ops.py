#!/usr/bin/env python3
"""Golden values for single ops against PyTorch: layer norm (forward and every gradient),
in float64 so that the C float32 results are compared with the exact values.

Test data generator, not part of the product. Run: /usr/bin/python3 make_ops.py
(needs Debian's python3-torch). Writes ops/layer_norm.json."""
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


if __name__ == "__main__":
    main()
