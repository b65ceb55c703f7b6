#!/usr/bin/env python3
"""A synthetic parallel corpus of N pairs grown from Multi30k's raw training text, for the data
benchmark (make bench-data): deterministic (one seeded stream), varied enough that BPE
learning and deduplication are not trivial, and alike at every size so that sizes compare:
pair i is Multi30k's pair i mod 29,000 with one or two words of each side replaced by other
words of that side's vocabulary (and sometimes two neighbours swapped), or, one time in
twenty, as it was (exact duplicates once the corpus is larger than Multi30k).

usage: make-corpus.py N OUT_DIR [MULTI30K_RAW_DIR]
Writes OUT_DIR/train.{de,en} (N lines each) and copies val and test_2016_flickr (as test: the names
configs/corpus.json reads)."""
import gzip
import os
import random
import shutil
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    n, out = int(sys.argv[1]), sys.argv[2]
    raw = sys.argv[3] if len(sys.argv) == 4 else "data/multi30k/raw"
    with gzip.open(os.path.join(raw, "train.de.gz"), "rt", encoding="utf-8") as f:
        de = f.read().splitlines()
    with gzip.open(os.path.join(raw, "train.en.gz"), "rt", encoding="utf-8") as f:
        en = f.read().splitlines()
    assert len(de) == len(en)
    words = [sorted({w for line in side for w in line.split()}) for side in (de, en)]
    rng = random.Random(2026)
    os.makedirs(out, exist_ok=True)
    tmp = [os.path.join(out, "train.%s.tmp" % lang) for lang in ("de", "en")]
    with open(tmp[0], "w", encoding="utf-8") as fd, open(tmp[1], "w", encoding="utf-8") as fe:
        for i in range(n):
            j = i % len(de)
            pair = [de[j], en[j]]
            if rng.random() >= 0.05:
                for s in range(2):
                    toks = pair[s].split()
                    if not toks:
                        continue
                    for _ in range(rng.randint(1, 2)):
                        toks[rng.randrange(len(toks))] = rng.choice(words[s])
                    if len(toks) > 2 and rng.random() < 0.3:
                        k = rng.randrange(len(toks) - 1)
                        toks[k], toks[k + 1] = toks[k + 1], toks[k]
                    pair[s] = " ".join(toks)
            fd.write(pair[0] + "\n")
            fe.write(pair[1] + "\n")
    for lang, t in zip(("de", "en"), tmp):
        os.replace(t, os.path.join(out, "train." + lang))
    for split, name in (("val", "val"), ("test_2016_flickr", "test")):
        for lang in ("de", "en"):
            shutil.copyfile(os.path.join(raw, "%s.%s.gz" % (split, lang)), os.path.join(out, "%s.%s.gz" % (name, lang)))


if __name__ == "__main__":
    main()
