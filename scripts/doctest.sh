#!/usr/bin/env bash
# doctest.sh — runs the commands README.md shows, in a sandbox, in order; fails on the first
# that fails, naming it.
#   scripts/doctest.sh BIN_DIR [FILE]       (FILE: README.md)
# The commands: the indented lines of FILE that start with ./PROGRAM or `python3 scripts/`, and
# the `code` of its table rows whose first word is ./PROGRAM (the text after " # " is a comment);
# `make` lines are the set-up CI runs itself.
# Short variants, so the whole tour runs in seconds, applied in the sandbox only:
#   ./train with --config   gets --set train.max_steps=30 --set train.warmup_steps=10
#                           --set train.max_decode_len=8
#   precision=bf16          becomes fp32 on a CPU without avx512_bf16 (the command would refuse)
#   ./serve                 on any free port (--port 0), stopped once it says where it listens
#                           (a server does not return; 30 s at most)
# The files the README's lines read but do not make (src.txt, ref.txt, out.txt) are made first,
# from Multi30k's test set. Exit 77: no Multi30k to run them on (the caller skips).
set -euo pipefail
bin=$(cd "$1" && pwd)
file=${2:-README.md}
root=$(pwd)
box=$(mktemp -d)
trap 'rm -rf "$box"' EXIT
for p in "$bin"/*; do ln -s "$p" "$box/$(basename "$p")"; done
ln -s "$root/configs" "$box/configs"
ln -s "$root/scripts" "$box/scripts"
[ -d "$root/data/multi30k/raw" ] || bash "$root/scripts/get-multi30k.sh" > /dev/null || {
    echo "doctest: no Multi30k (scripts/get-multi30k.sh); the README's commands need it"; exit 77; }
ln -s "$root/data" "$box/data"
mkdir -p "$box/runs" "$root/runs/.cache"
ln -s "$root/runs/.cache" "$box/runs/.cache" # prepared data: made once, for every doctest
test_src=data/multi30k/raw/test_2016_flickr
if [ -f "$test_src.de.gz" ]; then
    zcat "$test_src.de.gz" | sed -n '1,20p' > "$box/src.txt"
    zcat "$test_src.en.gz" | sed -n '1,20p' > "$box/ref.txt"
    zcat "$test_src.en.gz" | sed -n '21,40p' > "$box/out.txt"
fi
bf16=yes
grep -qw avx512_bf16 /proc/cpuinfo || bf16=no
# the commands, in order of appearance
cmds=$(awk '
    /^```/ { fenced = !fenced; next }
    fenced { next }
    /^    (\.\/|python3 scripts\/)/ { sub(/^    /, ""); sub(/ +# .*$/, ""); print; next }
    /^\|/ { line = $0
            while (match(line, /`\.\/[^`]*`/)) { print substr(line, RSTART + 1, RLENGTH - 2); line = substr(line, RSTART + RLENGTH) } }
' "$file")
n=0
cd "$box"
while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    run=$cmd
    case "$run" in
    ./train*--config*) run="$run --set train.max_steps=30 --set train.warmup_steps=10 --set train.max_decode_len=8" ;;
    esac
    case "$run" in
    ./serve*) run="$run --port 0" ;;
    esac
    [ "$bf16" = yes ] || run=${run//precision=bf16/precision=fp32}
    n=$((n + 1))
    echo "doctest: $run"
    case "$run" in
    ./serve*) # until it says where it listens (30 s at most), then stopped as a user stops it
        bash -c "exec $run" > serve.out 2>&1 < /dev/null &
        pid=$!
        for _ in $(seq 300); do grep -q "listening" serve.out && break; kill -0 $pid 2> /dev/null || break; sleep 0.1; done
        listening=no
        grep -q "listening" serve.out && listening=yes
        kill -TERM $pid 2> /dev/null || true
        wait $pid || true
        if [ $listening = no ]; then echo "doctest: FAILED (not listening): $cmd"; cat serve.out; exit 1; fi ;;
    *)
        if ! bash -c "$run" > out.log 2>&1 < /dev/null; then
            echo "doctest: FAILED: $cmd"; tail -5 out.log; exit 1
        fi ;;
    esac
done <<< "$cmds"
echo "doctest: $n commands of $file ran"
