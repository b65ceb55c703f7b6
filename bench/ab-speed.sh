#!/usr/bin/env bash
# ab-speed.sh — compares two builds' ./speed on a machine whose speed drifts: runs A and B in
# turn ROUNDS times with the same arguments (swapping which goes first every round), then
# prints, per build and measurement (event, precision, mode), the median of every figure
# (tok_per_s or sent_per_s) with its count and range, and B's median over A's.
#   bench/ab-speed.sh [--rounds 3] SPEED_A SPEED_B [speed arguments...]
# For example, decoding only, each run four times:
#   bench/ab-speed.sh /tmp/old/speed ./speed --model runs/multi30k/model.bin --no-train \
#       --decode-modes greedy_full --repeat 4 --set precision=bf16
set -euo pipefail
rounds=3
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
if [ $# -lt 2 ] || ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: ab-speed.sh [--rounds N] SPEED_A SPEED_B [speed arguments...]" >&2
    exit 2
fi
a="$1" b="$2"
shift 2
for bin in "$a" "$b"; do
    if ! [ -x "$bin" ]; then echo "ab-speed: $bin: not an executable" >&2; exit 2; fi
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < rounds; r++)); do
    order=("A $a" "B $b")
    ((r % 2)) && order=("B $b" "A $a")
    for o in "${order[@]}"; do
        name="${o%% *}" bin="${o#* }"
        if ! "$bin" "$@" > "$tmp/out" 2> "$tmp/err"; then
            echo "ab-speed: $bin failed (round $((r + 1))):" >&2
            cat "$tmp/err" >&2
            exit 1
        fi
        # one row per figure: build, measurement, value
        sed -n 's/.*"event":"\([a-z_0-9]*\)".*"precision":"\([a-z0-9]*\)".*/\1 \2 &/p' "$tmp/out" |
            while read -r ev prec line; do
                mode=$(printf '%s' "$line" | sed -n 's/.*"mode":"\([a-z_0-9]*\)".*/\1/p')
                val=$(printf '%s' "$line" | sed -n 's/.*"\(tok_per_s\|sent_per_s\)":\([0-9.]*\).*/\2/p')
                [ -n "$val" ] && echo "$name $ev/$prec${mode:+/$mode} $val"
            done >> "$tmp/rows"
    done
done
[ -s "$tmp/rows" ] || { echo "ab-speed: no tok_per_s or sent_per_s figure in the output" >&2; exit 1; }
sort -k2,2 -k1,1 -k3,3g "$tmp/rows" | awk '
    function flush() {
        if (n == 0) return
        med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        printf "%-40s %s  n %d  median %.1f  (%.1f - %.1f)", key, build, n, med, v[1], v[n]
        if (build == "A") amed[key] = med
        else if (key in amed) printf "  B/A %.3f", med / amed[key]
        printf "\n"
        n = 0
    }
    { if ($2 != key || $1 != build) flush(); key = $2; build = $1; v[++n] = $3 }
    END { flush() }'
