#!/usr/bin/env python3
"""Data-parallel training over P machines of this kind, predicted from one `make bench` line
(the last such line of bench/results.jsonl, or of the file given; - reads stdin).

A step on P machines = the compute of a share of the global batch + the gradient sum:
    t_c   = (B / P) / R             R: one machine's target tokens/s (the bench's train line)
    t_sum = t_add + 2 (P-1)/P * G / bw + 2 (P-1) * alpha
G is the gradient in bytes (4 per parameter). The sum (src/platform/dist.c) sends each rank's
chunks to their owners (all-to-all) and gathers the sums back: 2 (P-1)/P * G bytes in and out
of every machine, 2 (P-1) messages, one after the other (no pipelining). t_add is the owner's
additions, measured (dist_bench's add_ms: all of G read, G/P written, about the same for any
P), not overlapped with the transfers. bw is the line rate; alpha a
per-message latency (an assumption: kernel TCP on a LAN; the bench's loopback figure is
printed beside it). Efficiency E = t_c / (t_c + t_sum). With the sum overlapped with the
backward pass (train.overlap_sum: buckets of about 4 MB leave as backward finishes them) at
best E = t_c / (t_c + max(t_sum / n_b, t_sum - f t_c)): f is the backward's share of the step,
and the last of the n_b buckets (the embeddings', final only when backward ends) is never
hidden. R is taken as constant: small shares of a batch run slower than the bench's, so the
figures for many machines are optimistic.
"""
import json
import sys

ALPHA = 30e-6          # s per message (assumed)
BACKWARD_SHARE = 0.6   # of a step (assumed, for the overlap bound)
BUCKET_BYTES = 4 << 20  # train.sum_bucket_kb's default
NETWORKS = [(10, "10 Gb/s"), (25, "25 Gb/s"), (100, "100 Gb/s")]
MACHINES = [2, 4, 8, 16, 32, 64]


def t_sum(p, g_bytes, bw, t_add):
    return t_add + 2 * (p - 1) / p * g_bytes / bw + 2 * (p - 1) * ALPHA


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/results.jsonl"
    text = sys.stdin.read() if path == "-" else open(path).read()
    lines = [l for l in text.splitlines() if '"sum_add_ms"' in l]
    if not lines:
        sys.exit("scaling-model: no bench line with the gradient sum's figures (make bench with Open MPI)")
    b = json.loads(lines[-1])
    batch = b["batch_trg_tokens"]
    models = [("the Multi30k model", b["params"], b["train_tok_per_s"], b["sum_add_ms"] / 1e3, b["sum_shm_ms"])]
    if "train_10x_tok_per_s" in b:
        models.append(("10x larger", b["params_10x"], b["train_10x_tok_per_s"], b["sum_add_10x_ms"] / 1e3, b["sum_shm_10x_ms"]))
    print(f"scaling model from bench line of commit {b['commit']} ({b['cpu']}, {b['cores']} cores); "
          f"alpha {ALPHA * 1e6:.0f} us assumed (TCP loopback measured: {b['sum_tcp_latency_ms'] * 1e3:.0f} us a 2-rank sum "
          f"of one float); global batch {batch:.0f} target tokens (the config's 128 sentences)")
    for name, params, rate, t_add, shm_ms in models:
        g = 4.0 * params
        print(f"\n{name}: {params / 1e6:.1f} M parameters ({g / 1e6:.0f} MB gradient), one machine {rate:,.0f} tok/s, "
              f"step {batch / rate * 1e3:.0f} ms; the additions of a sum {t_add * 1e3:.1f} ms (two ranks' whole sum over "
              f"shared memory {shm_ms:.1f} ms)")
        head = "| machines | " + " | ".join(f"{n}: efficiency (overlapped) | {n}: batch for 90 %" for _, n in NETWORKS) + " |"
        print(head)
        print("|" + "---|" * (1 + 2 * len(NETWORKS)))
        for p in MACHINES:
            cells = []
            for gbit, _ in NETWORKS:
                bw = gbit * 1e9 / 8
                ts = t_sum(p, g, bw, t_add)
                tc = batch / p / rate
                e = tc / (tc + ts)
                buckets = max(1.0, g / BUCKET_BYTES)
                eo = tc / (tc + max(ts / buckets, ts - BACKWARD_SHARE * tc))
                need = 9 * p * rate * ts  # t_c >= 9 t_sum
                cells.append(f"{100 * e:.0f} % ({100 * eo:.0f} %)")
                cells.append(f"{need:,.0f} tok ({need / batch:.1f}x)")
            print(f"| {p} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
