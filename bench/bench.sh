#!/usr/bin/env bash
# make bench: the Multi30k model's training and decoding throughput here, in float32 and in
# bf16, and (where Debian's python3-torch is installed) PyTorch's baseline of the same model
# in the same run, with the ratios. Appends one JSON line per run to bench/results.jsonl
# (machine, commit, figures).
#   BENCH_ITERS, BENCH_WARMUP   timed and warm-up batches (60, 5)
#   BENCH_MODEL                 a trained model.bin for decoding with real weights
#                               (default runs/multi30k/model.bin when it exists)
#   BENCH_ONNX_MODEL            the model decoded by ./translate and ONNX Runtime side by side
#                               (default runs/multi30k-best/model.bin when it exists)
#   BENCH_OPENBLAS_CORETYPE     OpenBLAS kernel set for the whole run (default: the fastest of
#                               those this CPU runs, timed first; see below)
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS=${BENCH_ITERS:-60}
WARMUP=${BENCH_WARMUP:-5}
MODEL=${BENCH_MODEL:-runs/multi30k/model.bin}
BASE=../shared/bench
[ -d data/multi30k/tok ] || bash scripts/get-multi30k.sh
mkdir -p bench
out=$(mktemp)
trap 'rm -rf "$out" "$out.err" "$out.py" "$out.de"' EXIT
# PyTorch's float32 baseline (and our gemm=openblas line) run on OpenBLAS, whose kernel set
# comes from OPENBLAS_CORETYPE when the environment sets it (this project's AMD machines set
# Haswell: AVX2 on an AVX-512 CPU), else from its own detection, which can also fall short
# (Debian's 0.3.21 picked Prescott, SSE3, on a Xeon with AMX). So the baseline runs at its
# best: time the output layer's sgemm with OpenBLAS's own pick, the inherited setting, and each
# set the CPU's flags allow, and run the whole bench with the fastest; results.jsonl records
# the rates and the choice. BENCH_OPENBLAS_CORETYPE pins a set instead.
blas_probe() { # $1: a core type, or "" for OpenBLAS's own pick; prints "core gflops"
    local line
    if [ -n "$1" ]; then line=$(OPENBLAS_CORETYPE=$1 ./speed --warmup 1 --iters 2 --no-decode --set gemm=openblas)
    else line=$(env -u OPENBLAS_CORETYPE ./speed --warmup 1 --iters 2 --no-decode --set gemm=openblas); fi
    sed -n 's/.*"sgemm_gflops_output_shape":\([0-9.]*\).*"openblas_core":"\([^"]*\)".*/\2 \1/p' <<<"$line"
}
# a virtual machine may mask the name ("AMD EPYC"): family and model tell the generations apart
# (AMD family 25: Zen 3/4, 26: Zen 5), and the widest matrix instructions say what oneDNN can use
cpu_family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
cpu_model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
cpu_isa=none
for f in avx2 avx512f avx512_bf16 amx_bf16; do case $cpu_flags in *" $f "*) cpu_isa=$f ;; esac; done
env_core=${OPENBLAS_CORETYPE:-} auto_core="" probe=""
if [ -n "${BENCH_OPENBLAS_CORETYPE:-}" ]; then
    export OPENBLAS_CORETYPE=$BENCH_OPENBLAS_CORETYPE
else
    has() { for f in "$@"; do [[ $cpu_flags == *" $f "* ]] || return 1; done; }
    read -r auto_core best_rate < <(blas_probe "") || { echo "bench: the OpenBLAS probe (./speed --set gemm=openblas) failed" >&2; exit 1; }
    best=""
    seen=" $auto_core " probe="$auto_core:$best_rate"
    cands=()
    [ -n "$env_core" ] && cands+=("$env_core")
    has avx512f avx512cd avx512bw avx512dq avx512vl && cands+=(SKYLAKEX)
    has avx2 fma && cands+=(HASWELL)
    tried=" "
    for c in "${cands[@]}"; do
        [[ $tried == *" ${c^^} "* ]] && continue # named twice (the environment's and a flag's)
        tried="$tried${c^^} "
        read -r core rate < <(blas_probe "$c") || { echo "bench: the OpenBLAS probe with OPENBLAS_CORETYPE=$c failed" >&2; exit 1; }
        [[ $seen == *" $core "* ]] && continue # a set already timed under another name
        seen="$seen$core " probe="$probe $core:$rate"
        # more than 5 % faster, or timing noise between equal kernels would decide
        if awk -v a="$rate" -v b="$best_rate" 'BEGIN { exit !(a > 1.05 * b) }'; then best=$c best_rate=$rate; fi
    done
    if [ -n "$best" ]; then export OPENBLAS_CORETYPE=$best; else unset OPENBLAS_CORETYPE; fi
    echo "bench: OpenBLAS sgemm GFLOP/s by kernel set: $probe (own pick: $auto_core; environment: ${env_core:-unset}); running with ${OPENBLAS_CORETYPE:-its own pick}"
fi
# PyTorch's baseline runs right after the line of ours it is compared with, not all at the
# end: these machines' speed drifts by a tenth within minutes, and a ratio of two runs taken
# minutes apart carries that drift (two benches here 25 minutes apart: 1.67x and 1.46x)
torch_ok=false torch_env=()
if /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f "$BASE/torch_seq2seq.py" ]; then
    torch_ok=true
    torch_env=("MULTI30K_DIR=${MULTI30K_DIR:-$(pwd)/data/multi30k}")
    # PyTorch's README measured it with OpenBLAS's OpenMP build: with the pthread build its
    # own OpenMP threads and OpenBLAS's fight (799 against 1,244 tok/s here in one session).
    # Set for its runs only: ours keep the OpenBLAS they were linked with.
    omp=/usr/lib/x86_64-linux-gnu/openblas-openmp
    if [ -f "$omp/libblas.so.3" ]; then torch_env+=("LD_LIBRARY_PATH=$omp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"); torch_blas=openblas-openmp
    else torch_blas=system; echo "bench: PyTorch runs on the system BLAS, not at its best: its ratios are marked \"torch_blas\":\"system\" (apt-get install libopenblas0-openmp)"; fi
    # PyTorch hands a large tensor back to the OS when it is freed (glibc unmaps chunks over
    # 32 MB) and faults it in again at the next step; on a paravirtualised guest that halved its
    # output layer's product (176 against 360 GFLOP/s with the output preallocated). A caching
    # allocator is the usual advice for frameworks on CPUs: tcmalloc kept it at 346.
    tcm=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
    if [ -f "$tcm" ]; then torch_env+=("LD_PRELOAD=$tcm${LD_PRELOAD:+:$LD_PRELOAD}"); torch_malloc=tcmalloc
    else torch_malloc=glibc; echo "bench: PyTorch runs on glibc's allocator, not at its best: its ratios are marked \"torch_malloc\":\"glibc\" (apt-get install libtcmalloc-minimal4)"; fi
else
    echo "bench: python3-torch not installed: no PyTorch baseline in this run (apt-get install python3-torch)"
fi
# torch_train EVENT [ARGS...]: the baseline's training line, renamed to EVENT; its precision
# ("fp32" or "--bf16") put first, as the summary reads it
torch_train() {
    $torch_ok || return 0
    local ev=$1 prec=fp32
    shift
    for a in "$@"; do [ "$a" = --bf16 ] && prec=--bf16; done
    env "${torch_env[@]}" /usr/bin/python3 "$BASE/torch_seq2seq.py" --bench --outsel --bucket "$@" \
        --warmup "$WARMUP" --iters "$ITERS" 2>/dev/null | grep '"event": "bench"' \
        | sed "s/^{/{\"torch\": \"$prec\", /; s/\"event\": \"bench\"/\"event\": \"$ev\"/" | tee -a "$out" || true
}
# torch_decode EVENT [ARGS...]: its greedy decoding (untrained, 50 steps), renamed to EVENT
torch_decode() {
    $torch_ok || return 0
    local ev=$1
    shift
    env "${torch_env[@]}" /usr/bin/python3 "$BASE/torch_seq2seq.py" --impl fused --attn scaled_dot --decode-bench "$@" \
        2>/dev/null | grep '"event": "decode_bench"' | sed "s/\"event\": \"decode_bench\"/\"event\": \"$ev\"/" \
        | tee -a "$out" || true
}
# the most this CPU's vector units give per number format (bench/peak.c), before anything
# warms it: the step's GEMM rates below are also recorded as shares of it
build/bench/peak | tee -a "$out"
# Decoding with random weights: greedy_full (50 steps for every sentence) is the work
# PyTorch's --decode-bench does with its untrained model, which never says <eos>.
./speed --warmup "$WARMUP" --iters "$ITERS" | tee -a "$out"
torch_train bench --impl fused --attn scaled_dot
torch_decode decode_bench
# The same beside one competing busy process (a plain CPU loop): a user's machine is rarely quiet.
# Ours with its default threads and with threads=1, PyTorch with its defaults, in turn while the
# loop runs; the summary gives each against its quiet figure above and ours against PyTorch's.
busy_pid=""
busy_stop() { if [ -n "$busy_pid" ]; then kill "$busy_pid" 2>/dev/null || true; wait "$busy_pid" 2>/dev/null || true; busy_pid=""; fi; }
trap 'busy_stop; rm -rf "$out" "$out.err" "$out.py" "$out.de"' EXIT
sh -c 'while :; do :; done' &
busy_pid=$!
./speed --warmup "$WARMUP" --iters "$ITERS" --decode-modes greedy_full,beam \
    | sed 's/"event":"train"/"event":"train_busy"/; s/"event":"decode"/"event":"decode_busy"/' | tee -a "$out"
./speed --warmup "$WARMUP" --iters "$ITERS" --no-decode --set threads=1 | sed 's/"event":"train"/"event":"train_busy_t1"/' | tee -a "$out"
torch_train bench_busy --impl fused --attn scaled_dot
torch_decode decode_bench_busy
busy_stop
# bf16 needs a CPU on which oneDNN multiplies it (AVX-512 at least): elsewhere ./speed refuses
# it at once (exit 2, saying so) and the bench leaves out every bf16 line, ours and PyTorch's
precs="fp32 bf16"
set +e
./speed --warmup "$WARMUP" --iters "$ITERS" --set precision=bf16 2> "$out.err" | tee -a "$out"
rc=${PIPESTATUS[0]}
set -e
cat "$out.err" >&2
if [ "$rc" -ne 0 ]; then
    grep -q "cannot run bfloat16" "$out.err" || exit "$rc"
    precs="fp32"
    echo "bench: this CPU runs no bfloat16 GEMM: no bf16 line in this run"
else
    torch_train bench --impl fused --attn scaled_dot --bf16
fi
# int8 decodes only: its random weights are not trained first, so only its fixed-length
# greedy (the same work whatever the weights) goes beside the others
./speed --no-train --set precision=int8 | tee -a "$out"
# the other float32 back end, training only (OpenBLAS's kernels as chosen above)
./speed --warmup "$WARMUP" --iters "$ITERS" --no-decode --set gemm=openblas | tee -a "$out"
# the memory settings and what they cost: output layer + loss 512 target rows at a time,
# and a GRU's W_hn h recomputed in backward
./speed --warmup "$WARMUP" --iters "$ITERS" --no-decode --set loss_chunk=512 --set recompute=true \
    | sed 's/"event":"train"/"event":"train_low_memory"/' | tee -a "$out"
# data-parallel (README: MPI): the same steps as 2 ranks of one thread each under mpirun, beside
# the one-process lines above; sum_ms_per_batch is the gradient sum's time after backward
# (waiting for the slower rank included); float32 once more with the sum after backward alone
# (overlap_sum=off; auto, the default, is off on one machine: overlap_sum=on is timed once more)
if command -v mpirun > /dev/null && ldd ./speed | grep -q libmpi; then
    [ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    for prec in $precs; do
        mpirun -np 2 ./speed --warmup "$WARMUP" --iters "$ITERS" --no-decode --set threads=1 --set precision="$prec" 2>/dev/null \
            | grep '"event":"train"' | sed 's/"event":"train"/"event":"train_mpi2"/' | tee -a "$out" || true
    done
    mpirun -np 2 ./speed --warmup "$WARMUP" --iters "$ITERS" --no-decode --set threads=1 --set overlap_sum=on 2>/dev/null \
        | grep '"event":"train"' | sed 's/"event":"train"/"event":"train_mpi2_overlap"/' | tee -a "$out" || true
    # the gradient sum alone, for the scaling model (bench/scaling-model.py): the model's
    # gradient and one float (the latency), over shared memory and over TCP loopback; then a
    # model 10x larger (the same GRU model wider: 175 M parameters), one process, and its sum
    params=$(sed -n 's/.*"event":"train".*"params":\([0-9]*\).*/\1/p' "$out" | head -1)
    for btl in vader tcp; do
        for n in "$params 20" "1 2000"; do
            # shellcheck disable=SC2086
            mpirun -np 2 --mca btl $btl,self build/bench/dist_bench $n 2>/dev/null | sed "s/^{/{\"btl\":\"$btl\",/" | tee -a "$out" || true
        done
    done
    BIG="--set embedding=1024 --set encoder_hidden=2560 --set decoder_hidden=2560 --set kq=2560"
    # shellcheck disable=SC2086
    ./speed --warmup 1 --iters 4 --no-decode $BIG | sed 's/"event":"train"/"event":"train_10x"/' | tee -a "$out"
    big=$(sed -n 's/.*"event":"train_10x".*"params":\([0-9]*\).*/\1/p' "$out" | head -1)
    for btl in vader tcp; do
        mpirun -np 2 --mca btl $btl,self build/bench/dist_bench "$big" 5 2>/dev/null \
            | sed "s/^{/{\"btl\":\"$btl\",\"model\":\"10x\",/" | tee -a "$out" || true
    done
else
    echo "bench: no mpirun or a build without MPI: no data-parallel line"
fi
# the Transformer (model.type) of PyTorch's baseline: nn.Transformer 3+3 layers, d 256, 8 heads,
# ff 512, dropout 0.1, post-norm, sinusoidal positions, on the same word-level batches
TF="--set model.type=transformer --set d_model=256 --set heads=8 --set ff=512 --set layers=3 --set dropout=0.1 --set norm=post"
for prec in $precs; do
    # shellcheck disable=SC2086
    ./speed --warmup "$WARMUP" --iters "$ITERS" --no-decode $TF --set precision="$prec" \
        | sed 's/"event":"train"/"event":"train_transformer"/' | tee -a "$out"
    if [ "$prec" = bf16 ]; then torch_train bench_transformer --arch transformer --bf16
    else torch_train bench_transformer --arch transformer; fi
done
# all of test_2016_flickr as one batch: products of 1,000 rows run nearer the GEMMs' peak
# (PyTorch likewise below, with --bs 1000)
for prec in $precs; do
    ./speed --no-train --decode-batch 1000 --set precision="$prec" | sed 's/"event":"decode"/"event":"decode_b1000"/' | tee -a "$out"
done
torch_decode decode_bench_b1000 --bs 1000
if [ -f "$MODEL" ]; then
    # the precision is set both times: the model's config holds the one it was trained in
    for prec in $precs int8; do
        ./speed --model "$MODEL" --no-train --set precision="$prec" | sed 's/"event":"decode"/"event":"decode_trained"/' | tee -a "$out"
    done
fi
# ONNX Runtime against ./translate on the best configuration's model, trained here (its own lines)
ONNX_MODEL=${BENCH_ONNX_MODEL:-runs/multi30k-best/model.bin}
if [ -f "$ONNX_MODEL" ]; then
    /usr/bin/python3 bench/onnx-speed.py "$ONNX_MODEL" --src data/multi30k/raw/test_2016_flickr.de.gz \
        --system "$(basename "$(dirname "$ONNX_MODEL")")" --record bench/results.jsonl
else
    echo "bench: no $ONNX_MODEL (./train --config multi30k-best makes it): decoding in ONNX Runtime not measured"
fi
# Python (the s2s package over libs2s.so) against ./translate on the 1,000 test sentences,
# greedy and beam 5, the same outputs required: the trained model, or one paused after 30 steps
pymodel=$MODEL
if [ ! -f "$pymodel" ]; then
    ./train --config multi30k --pause-at 30 --out "$out.py" --overwrite > /dev/null
    pymodel=$out.py/last.bin
fi
zcat data/multi30k/raw/test_2016_flickr.de.gz > "$out.de"
for beam in 1 5; do
    /usr/bin/python3 bench/bench-python.py "$pymodel" "$out.de" --beam "$beam" --rounds 3 | tee -a "$out"
done
rm -rf "$out.py" "$out.de"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
# one line: ours, torch's, ratios (awk keeps this free of Python)
line=$(awk -f bench/bench-summary.awk -v commit="$commit" -v cpu="$cpu" -v coretype="${OPENBLAS_CORETYPE:-}" -v autocore="$auto_core" -v envcore="$env_core" -v probe="$probe" -v cores="$(nproc)" -v family="${cpu_family:-0}" -v cmodel="${cpu_model:-0}" -v isa="$cpu_isa" -v torch_blas="${torch_blas:-}" -v torch_malloc="${torch_malloc:-}" "$out")
echo "$line" >> bench/results.jsonl
echo "bench: $line"
# data-parallel training over machines, predicted from this run's figures (README: MPI)
if grep -q '"sum_shm_ms"' <<<"$line" && command -v python3 > /dev/null; then python3 bench/scaling-model.py - <<<"$line"; fi
