#!/usr/bin/env bash
# make bench: the Multi30k model's training and decoding throughput, here and (where Debian's
# python3-torch is installed) PyTorch's baseline of the same model in the same run, with the
# ratios. Appends one JSON line per run to bench/results.jsonl (machine, commit, figures).
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS=${BENCH_ITERS:-60}
WARMUP=${BENCH_WARMUP:-5}
BASE=../shared/bench
[ -d data/multi30k/tok ] || bash scripts/get-multi30k.sh
mkdir -p bench
ours=$(./speed --warmup "$WARMUP" --iters "$ITERS")
echo "$ours"
torch_train=""; torch_decode=""
if /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f "$BASE/torch_seq2seq.py" ]; then
    export MULTI30K_DIR=${MULTI30K_DIR:-$(pwd)/data/multi30k}
    torch_train=$(/usr/bin/python3 "$BASE/torch_seq2seq.py" --impl fused --attn scaled_dot --bench --outsel --bucket \
                  --warmup "$WARMUP" --iters "$ITERS" 2>/dev/null | grep '"event": "bench"' || true)
    torch_decode=$(/usr/bin/python3 "$BASE/torch_seq2seq.py" --impl fused --attn scaled_dot --decode-bench 2>/dev/null \
                   | grep '"event": "decode_bench"' || true)
    echo "pytorch: $torch_train"
    echo "pytorch: $torch_decode"
else
    echo "bench: python3-torch not installed: no PyTorch baseline in this run (apt-get install python3-torch)"
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
# one line: ours, torch's, ratios (awk keeps this free of Python)
line=$(printf '%s\n%s\n%s\n' "$ours" "$torch_train" "$torch_decode" | awk -v commit="$commit" -v cpu="$cpu" -v cores="$(nproc)" '
    function num(s, k,   m) { if (match(s, "\"" k "\": ?[0-9.]+")) { m = substr(s, RSTART, RLENGTH); sub(/.*: ?/, "", m); return m } return "" }
    /"event":"train"/ { tok = num($0, "tok_per_s"); rss = num($0, "peak_rss_mb"); gf = num($0, "gemm_gflops"); sg = num($0, "sgemm_gflops_output_shape") }
    /"event":"decode","beam":1/ { g1 = num($0, "sent_per_s") }
    /"event":"decode","beam":5/ { g5 = num($0, "sent_per_s") }
    /"event": "bench"/ { ttok = num($0, "tok_per_s"); trss = num($0, "peak_rss_mb") }
    /"event": "decode_bench"/ { tg = num($0, "sent_per_s") }
    END {
        printf "{\"commit\":\"%s\",\"cpu\":\"%s\",\"cores\":%s,\"train_tok_per_s\":%s,\"greedy_sent_per_s\":%s,\"beam5_sent_per_s\":%s,\"peak_rss_mb\":%s,\"step_gemm_gflops\":%s,\"sgemm_gflops\":%s", commit, cpu, cores, tok, g1, g5, rss, gf, sg
        if (ttok != "") printf ",\"torch_train_tok_per_s\":%s,\"torch_peak_rss_mb\":%s,\"train_ratio\":%.2f,\"rss_ratio\":%.2f", ttok, trss, tok / ttok, rss / trss
        if (tg != "") printf ",\"torch_greedy_sent_per_s\":%s,\"greedy_ratio\":%.2f,\"beam5_vs_torch_greedy\":%.2f", tg, g1 / tg, g5 / tg
        printf "}\n"
    }')
echo "$line" >> bench/results.jsonl
echo "bench: $line"
