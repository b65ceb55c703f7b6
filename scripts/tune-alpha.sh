#!/usr/bin/env bash
# tune-alpha.sh — choose beam search's length normalisation on validation data, never on test:
# translates SRC with each alpha and prints the BLEU ./translate --ref reports, then the best.
#   scripts/tune-alpha.sh --src val.de --ref val.en [--beam K] [--alphas "0 0.5 1 1.5 2"] [--threads N] [--tokenized]
#                         [--lines N] MODEL [MODEL...]
# Several models decode as one ensemble. SRC and REF may be gzip files. A subword model's BLEU
# is sacreBLEU's on the raw text; a word model's, multi-bleu's on its words (--tokenized: SRC and
# REF are already lowercased and tokenised, as data/multi30k/tok's files; without it they are
# raw text and are tokenised first, as ./translate does). --lines N: the first N pairs only (a
# quick look; choose alpha on all of them).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
# the programs of the build under test when S2S_BIN_DIR names it (make test), else the tree's
bin="${S2S_BIN_DIR:-$here}"
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
src="" ref="" beam=5 alphas="0 0.5 1 1.5 2" lines=""
models=() extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --src) src="$2"; shift 2 ;;
    --ref) ref="$2"; shift 2 ;;
    --beam) beam="$2"; shift 2 ;;
    --alphas) alphas="$2"; shift 2 ;;
    --threads) extra+=(--threads "$2"); shift 2 ;;
    --tokenized) extra+=(--tokenized); shift ;;
    --lines) lines="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "tune-alpha: $1: unknown option" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
    esac
done
if [ -z "$src" ] || [ -z "$ref" ] || [ ${#models[@]} -eq 0 ]; then
    echo "usage: tune-alpha.sh --src FILE --ref FILE [--beam K] [--alphas \"A B ...\"] [--threads N] [--tokenized] [--lines N] MODEL [MODEL...]" >&2
    exit 2
fi
if [ -n "$lines" ] && ! [[ "$lines" =~ ^[1-9][0-9]*$ ]]; then echo "tune-alpha: --lines: expected a positive integer, got '$lines'" >&2; exit 2; fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat_any() { case "$1" in *.gz) zcat "$1" ;; *) cat "$1" ;; esac; }
for f in "$src" "$ref"; do [ -r "$f" ] || { echo "tune-alpha: $f: cannot be read" >&2; exit 2; }; done
# the first --lines pairs: head closes the pipe early, which is not the reader's error
first() { if [ -n "$lines" ]; then (set +o pipefail; cat_any "$1" | head -n "$lines"); else cat_any "$1"; fi; }
first "$src" > "$tmp/src"
first "$ref" > "$tmp/ref"
best="" best_bleu=-1
for a in $alphas; do
    "$bin/translate" "${models[@]}" ${extra[@]+"${extra[@]}"} --input "$tmp/src" --ref "$tmp/ref" --beam "$beam" --alpha "$a" \
        > /dev/null 2> "$tmp/score" || true # lines it cannot read count as empty; no BLEU is caught below
    bleu="$(sed -n 's/^BLEU[^=]*= \([0-9.]*\).*/\1/p' "$tmp/score" | head -1)"
    if [ -z "$bleu" ]; then
        echo "tune-alpha: alpha $a gave no BLEU:" >&2
        cat "$tmp/score" >&2
        exit 1
    fi
    printf 'alpha %-4s  BLEU %s\n' "$a" "$bleu"
    if awk -v x="$bleu" -v y="$best_bleu" 'BEGIN { exit !(x > y) }'; then
        best="$a"
        best_bleu="$bleu"
    fi
done
echo "best on $src: alpha $best (BLEU $best_bleu, beam $beam)"
