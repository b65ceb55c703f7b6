#!/usr/bin/env bash
# Puts Multi30k task 1 (German–English: train, val, test_2016_flickr) into data/multi30k/:
# raw/<split>.<lang>.gz and tok/<split>.lc.norm.tok.<lang>, then verifies line counts and
# SHA-256 checksums. Takes a local copy when one is given (MULTI30K_DIR, or
# ../shared/data/multi30k when it exists); downloads from the public Multi30k dataset
# repository otherwise. Safe to run again: verified files are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=data/multi30k
BASE_URL=${MULTI30K_URL:-https://raw.githubusercontent.com/multi30k/dataset/master/data/task1}
SRC_DIR=${MULTI30K_DIR:-}
if [ -z "$SRC_DIR" ] && [ -d ../shared/data/multi30k ]; then SRC_DIR=../shared/data/multi30k; fi

SHA256="
9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8  raw/test_2016_flickr.de.gz
611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9  raw/test_2016_flickr.en.gz
726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6  raw/train.de.gz
d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f  raw/train.en.gz
f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a  raw/val.de.gz
14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28  raw/val.en.gz
c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4  tok/test_2016_flickr.lc.norm.tok.de
5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2  tok/test_2016_flickr.lc.norm.tok.en
cb5a23529b65ec2061f1dc446192a9c37382b63cc75f81a0be59d34894b3a505  tok/train.lc.norm.tok.de
08925f8e0572bcd5a006702fc5fe20e2d77c6917d4eebd576fc20de6693c2119  tok/train.lc.norm.tok.en
97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00  tok/val.lc.norm.tok.de
46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec  tok/val.lc.norm.tok.en
"
LINES="train 29000
val 1014
test_2016_flickr 1000"

mkdir -p "$DEST/raw" "$DEST/tok"
fetch() { # relative path → $DEST/path
    local rel=$1 tmp="$DEST/$1.part"
    if [ -n "$SRC_DIR" ]; then
        [ -f "$SRC_DIR/$rel" ] || { echo "get-multi30k: $SRC_DIR/$rel is missing" >&2; return 1; }
        cp "$SRC_DIR/$rel" "$tmp"
    elif command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 3 -o "$tmp" "$BASE_URL/$rel"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$tmp" "$BASE_URL/$rel"
    else
        echo "get-multi30k: neither curl nor wget is installed" >&2; return 1
    fi
    mv -f "$tmp" "$DEST/$rel"
}

echo "$SHA256" | while read -r sum rel; do
    [ -n "$rel" ] || continue
    if [ -f "$DEST/$rel" ] && echo "$sum  $DEST/$rel" | sha256sum -c --quiet - 2>/dev/null; then continue; fi
    fetch "$rel" || { echo "get-multi30k: cannot get $rel" >&2; exit 1; }
    if ! echo "$sum  $DEST/$rel" | sha256sum -c --quiet - >/dev/null 2>&1; then
        echo "get-multi30k: $DEST/$rel: checksum mismatch (damaged or different file)" >&2
        rm -f "$DEST/$rel"; exit 1
    fi
done
echo "$LINES" | while read -r split n; do
    for lang in de en; do
        got=$(wc -l < "$DEST/tok/$split.lc.norm.tok.$lang")
        [ "$got" -eq "$n" ] || { echo "get-multi30k: $split.$lang has $got lines, expected $n" >&2; exit 1; }
        got=$(zcat "$DEST/raw/$split.$lang.gz" | wc -l)
        [ "$got" -eq "$n" ] || { echo "get-multi30k: raw $split.$lang has $got lines, expected $n" >&2; exit 1; }
    done
done
echo "get-multi30k: $DEST ready (train 29000, val 1014, test_2016_flickr 1000 pairs, verified)"
