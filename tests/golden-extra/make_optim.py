#!/usr/bin/env python3
"""Golden values for the learning-rate schedules with warmup: torch.optim.Adam driven by
torch.optim.lr_scheduler.LambdaLR over 100 steps, for each schedule with and without a
warmup, on fixed random gradients: the lr of every step and the parameters after each 10.
The schedule functions written here are the documented definitions (include/s2s/optim.h),
so the test checks our code against them through PyTorch's own optimiser and scheduler.

Test data generator, not part of the product. Run: /usr/bin/python3 make_optim.py
(needs Debian's python3-torch). Writes optim/schedules.json, and optim/adam_keys.json: Adam
and AdamW with other betas, eps and weight decay (train.adam_beta1 ...), SGD with weight decay."""
import json
import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 100


def factor(schedule, progress, step, warmup):
    p = min(max(progress, 0.0), 1.0)
    s = max(step, 1)
    warm = s / warmup if warmup > 0 and s < warmup else 1.0
    if schedule == "constant":
        return warm
    if schedule == "linear":
        return warm * (1.0 - p)
    if schedule == "cosine":
        return warm * 0.5 * (1.0 + math.cos(math.pi * p))
    if schedule == "inverse_sqrt":
        return (warm if s < warmup else math.sqrt(warmup / s)) if warmup > 0 else 1.0 / math.sqrt(s)
    raise ValueError(schedule)


def case(schedule, warmup, seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.nn.Parameter((torch.rand(6, generator=g, dtype=torch.float64) * 2 - 1).float().double())
    p0 = p.detach().clone()
    grads = [(torch.rand(6, generator=g, dtype=torch.float64) * 2 - 1).float().double() for _ in range(STEPS)]
    opt = torch.optim.Adam([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    # LambdaLR's index i is the number of updates made: update i + 1, progress i / STEPS
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: factor(schedule, i / STEPS, i + 1, warmup))
    lrs, snaps = [], []
    for k in range(STEPS):
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        p.grad = grads[k].clone()
        opt.step()
        sched.step()
        if (k + 1) % 10 == 0:
            snaps.append([float(v) for v in p.detach().tolist()])
    return {"schedule": schedule, "warmup": warmup, "base_lr": 0.01, "p0": p0.tolist(),
            "grads": [x.tolist() for x in grads], "lrs": lrs, "params_every_10": snaps}


def key_case(optimizer, b1, b2, eps, wd, seed):
    """torch.optim.Adam / AdamW / SGD over 100 steps of fixed random gradients, lr 0.01 with the
    inverse square root schedule after 16 warmup steps (so the decoupled decay sees the lr
    change): the parameters after every 10 steps."""
    g = torch.Generator().manual_seed(seed)
    p = torch.nn.Parameter((torch.rand(6, generator=g, dtype=torch.float64) * 2 - 1).float().double())
    p0 = p.detach().clone()
    grads = [(torch.rand(6, generator=g, dtype=torch.float64) * 2 - 1).float().double() for _ in range(STEPS)]
    if optimizer == "sgd":
        opt = torch.optim.SGD([p], lr=0.01, weight_decay=wd)
    else:
        cls = torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam
        opt = cls([p], lr=0.01, betas=(b1, b2), eps=eps, weight_decay=wd)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: factor("inverse_sqrt", i / STEPS, i + 1, 16))
    snaps = []
    for k in range(STEPS):
        opt.zero_grad()
        p.grad = grads[k].clone()
        opt.step()
        sched.step()
        if (k + 1) % 10 == 0:
            snaps.append([float(v) for v in p.detach().tolist()])
    return {"optimizer": optimizer, "beta1": b1, "beta2": b2, "eps": eps, "weight_decay": wd, "base_lr": 0.01,
            "warmup": 16, "p0": p0.tolist(), "grads": [x.tolist() for x in grads], "params_every_10": snaps}


if __name__ == "__main__":
    cases, seed = [], 41
    for schedule in ("constant", "linear", "cosine", "inverse_sqrt"):
        for warmup in (0, 16):
            cases.append(case(schedule, warmup, seed))
            seed += 1
    os.makedirs(os.path.join(HERE, "optim"), exist_ok=True)
    with open(os.path.join(HERE, "optim", "schedules.json"), "w") as f:
        json.dump({"torch": torch.__version__, "steps": STEPS, "cases": cases}, f)
    print("wrote", len(cases), "cases")
    keys = [key_case("adam", 0.8, 0.99, 1e-6, 0.01, 51), key_case("adamw", 0.9, 0.999, 1e-8, 0.1, 52),
            key_case("adamw", 0.85, 0.98, 1e-9, 0.01, 53), key_case("sgd", 0, 0, 0, 0.05, 54)]
    with open(os.path.join(HERE, "optim", "adam_keys.json"), "w") as f:
        json.dump({"torch": torch.__version__, "steps": STEPS, "cases": keys}, f)
    print("wrote", len(keys), "optimiser cases")
