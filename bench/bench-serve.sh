#!/usr/bin/env bash
# make bench-serve: ./serve under load (bench/serve_load: kept-alive connections, one sentence
# a request), with 1 connection and with 64, against each model that exists:
#   BENCH_SERVE_MODELS   model files (default runs/reverse/model.bin runs/multi30k-best/model.bin)
#   BENCH_SERVE_SECONDS  seconds a measurement (default 30)
# Sentences: the reversal test strings made here, or test_2016_flickr's German side.
# Appends one JSON line per measurement to bench/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${BENCH_SERVE_SECONDS:-30}
MODELS=${BENCH_SERVE_MODELS:-"runs/reverse/model.bin runs/multi30k-best/model.bin"}
tmp=$(mktemp -d)
trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
for model in $MODELS; do
    [ -f "$model" ] || { echo "bench-serve: $model not found: skipped"; continue; }
    if grep -aq '"type":[[:space:]]*"reverse"' "$model"; then # the config inside the model file
        awk 'BEGIN { srand(7); for (i = 0; i < 1000; i++) { n = 3 + int(rand() * 20); s = ""; for (k = 0; k < n; k++) s = s substr("abcd", 1 + int(rand() * 4), 1); print s } }' > "$tmp/in.txt"
    else
        zcat data/multi30k/raw/test_2016_flickr.de.gz 2>/dev/null > "$tmp/in.txt" || cp data/multi30k/tok/test_2016_flickr.lc.norm.tok.de "$tmp/in.txt"
    fi
    ./serve "$model" --port 0 > "$tmp/serve.txt" 2>&1 &
    echo $! > "$tmp/pid"
    port=""
    for _ in $(seq 1 200); do port=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.txt"); [ -n "$port" ] && break; sleep 0.05; done
    [ -n "$port" ] || { echo "bench-serve: serve did not start: $(cat "$tmp/serve.txt")" >&2; exit 1; }
    for conns in 1 64; do
        line=$(build/bench/serve_load --port "$port" --input "$tmp/in.txt" --connections $conns --seconds "$SECONDS_EACH" --pid "$(cat "$tmp/pid")" || true)
        line="{\"commit\":\"$commit\",\"cpu\":\"$cpu\",\"model\":\"$model\",${line#\{}"
        echo "$line" | tee -a bench/results.jsonl
    done
    kill -TERM "$(cat "$tmp/pid")"
    wait "$(cat "$tmp/pid")" || true
    rm -f "$tmp/pid"
done
