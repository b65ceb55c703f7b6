#!/usr/bin/env python3
"""Writes tests/golden-extra/sacrebleu.json: sacreBLEU's own text lines for hand-made cases
(the places where BLEU and chrF implementations usually part: empty hypotheses, no 4-gram
match, punctuation, numbers and entities under 13a, Unicode case and whitespace, several
references of different lengths, every smoothing, chrF++), and, where Multi30k is present,
for the raw test_2016_flickr references against two stand-in hypotheses. tests/test_bleu.c
runs ./bleu with the same arguments and expects the same line.

sacreBLEU is run from its source (python3-regex, python3-portalocker, python3-tabulate and
python3-lxml from Debian; no network):
    git --git-dir=REPO archive v2.6.0 | tar -x -C /tmp/sacrebleu   # or any 2.6.0 checkout
    echo '__version__ = "2.6.0"' > /tmp/sacrebleu/sacrebleu/version.py
    SACREBLEU_SRC=/tmp/sacrebleu python3 tests/golden-extra/make_sacrebleu.py
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("SACREBLEU_SRC", "/tmp/sacrebleu")
HERE = os.path.dirname(os.path.abspath(__file__))
MULTI30K = os.environ.get("MULTI30K", os.path.join(HERE, "../../../shared/data/multi30k"))

CASES = [
    # name, hypotheses, references (one list per reference), arguments
    ("basic", ["The cat sat on the mat.", "Hello, world!"], [["The cat sat on a mat.", "Hello world!"]], []),
    ("empty_hypothesis_line", ["", "a small dog runs in the park ."],
     [["Two men are talking.", "A small dog runs in the park."]], []),
    ("all_hypotheses_empty", ["", ""], [["One reference.", "Another one."]], []),
    ("no_4gram_match", ["the the cat cat sat sat", "one two three"],
     [["the cat sat on the mat", "one two four three"]], []),
    ("no_4gram_match_none", ["the the cat cat sat sat", "one two three"],
     [["the cat sat on the mat", "one two four three"]], ["--smooth-method", "none"]),
    ("no_4gram_match_floor", ["the the cat cat sat sat", "one two three"],
     [["the cat sat on the mat", "one two four three"]], ["--smooth-method", "floor"]),
    ("no_4gram_match_floor_02", ["the the cat cat sat sat", "one two three"],
     [["the cat sat on the mat", "one two four three"]], ["--smooth-method", "floor", "--smooth-value", "0.2"]),
    ("add_k", ["the the cat cat sat sat", "one two three"],
     [["the cat sat on the mat", "one two four three"]], ["--smooth-method", "add-k"]),
    ("add_k_2", ["the the cat cat sat sat", "one two three"],
     [["the cat sat on the mat", "one two four three"]], ["--smooth-method", "add-k", "--smooth-value", "2"]),
    ("punctuation_numbers_13a",
     ["It costs $1,000.50 - really? Yes: 3.5-4 km, e.g. U.S.A.", "\"Quoted\" (text) [x] {y} a/b @home #tag 50% a&b",
      "&quot;entities&quot; &amp; &lt;tag&gt; <skipped> end-of-line- 12-13 x-y 1999.", "Dots... and,commas,,here.5 .5 5."],
     [["It costs $1,000.50 -- really ? yes : 3.5 - 4 km , e.g. U.S.A .", "\"Quoted\" (text) [x] {y} a / b @home # tag 50 % a & b",
       "\"entities\" & <tag> end-of-line 12 - 13 x-y 1999 .", "Dots ... and , commas , , here.5 .5 5 ."]], []),
    ("unicode_13a",
     ["Straße – „Zitat“ … café naïve ÄÖÜ ΟΔΟΣ.", "Ein Mann läuft über die Brücke, 2,5 km weit.", "İstanbul'da ΣΑΣ σας"],
     [["Die Straße — „Zitat“… Café naive äöü οδος.", "Ein Mann lauft uber die Brucke , 2,5 km weit .", "istanbul'da σας ΣΑΣ"]], []),
    ("unicode_lowercase", ["Straße – „Zitat“ … café naïve ÄÖÜ ΟΔΟΣ.", "Ein MANN läuft ÜBER die Brücke.", "İSTANBUL ΣΑΣ. ΣΑ̈Σ Σ"],
     [["Die STRASSE — „zitat“… Café naive äöü οδος.", "ein mann LÄUFT über die brücke.", "i̇stanbul σας. σα̈ς σ"]], ["-lc"]),
    ("unicode_whitespace", ["a\u00a0b c\u2003d\u3000", "x\u2028y  z\t", "\u0085lead"],
     [["a b c d", "x y z", "lead"]], []),
    ("several_references", ["the cat is on the mat", "there is a cat here", "short"],
     [["the cat is on the mat", "a cat is here", "this is a much longer reference sentence"],
      ["there is a cat on the mat", "there is a cat here on the mat today", "short one"],
      ["a cat on a mat", "cat here", "sh"]], []),
    ("closest_length_tie", ["a b c d e"], [["a b c d"], ["a b c d e f"]], []),
    ("char_tokenizer", ["Das ist gut.", "café au lait"], [["Das ist nicht gut.", "cafe au lait"]], ["--tokenize", "char"]),
    ("none_tokenizer", ["Hello, world!", "no-tokenise here."], [["Hello , world !", "no-tokenise here ."]], ["--tokenize", "none"]),
    ("intl_tokenizer",
     ["Straße – „Zitat“ … café 1,000.50 $5 €3 2+2=4 ©2024", "Dots... and,commas here.5 (x) ¿Qué? ¡Sí! 50% «a» 1999.",
      "数学、物理。 「引用」 ＡＢＣ！", "emoji 😀 ok; a/b @home #tag"],
     [["Straße — „Zitat“… Café 1,000.50 $ 5 € 3 2 + 2 = 4 © 2024", "Dots ... and , commas here.5 ( x ) ¿ Qué ? ¡ Sí ! 50 % « a » 1999 .",
       "数学 、 物理 。 「 引用 」 ＡＢＣ ！", "emoji 😀 ok ; a / b @ home # tag"]], ["--tokenize", "intl"]),
    ("intl_lowercase", ["İSTANBUL, ΟΔΟΣ. Ünïcödé!"], [["istanbul , οδος . ünïcödé !"]], ["--tokenize", "intl", "-lc"]),
    ("chrf", ["The cat sat on the mat.", "Hello, world!"], [["The cat sat on a mat.", "Hello world!"]], ["--chrf"]),
    ("chrf_plus_plus", ["The cat sat on the mat.", "Hello, world! (yes)", "\"quoted\""],
     [["The cat sat on a mat.", "Hello world! yes", "quoted"]], ["--chrf", "--word-order", "2"]),
    ("chrf_lowercase_unicode", ["Straße ÄÖÜ ΟΔΟΣ", "İstanbul"], [["strasse äöü οδος", "istanbul"]], ["--chrf", "-lc"]),
    ("chrf_whitespace", ["a b c", "one  two"], [["abc", "one two"]], ["--chrf", "--chrf-whitespace"]),
    ("chrf_eps", ["The cat sat on the mat.", "", "x"], [["The cat sat on a mat.", "Hello world!", "xy"]],
     ["--chrf", "--eps-smoothing"]),
    ("chrf_empty", ["", "cat"], [["dog", ""]], ["--chrf"]),
    ("chrf_several_references", ["the cat is on the mat", "there is a cat here"],
     [["the cat is on the mat", "a cat is here"], ["a cat on a mat", "there is a cat here on the mat"]], ["--chrf", "--word-order", "2"]),
    ("chrf_orders_beta", ["The cat sat on the mat.", "Hello, world!"], [["The cat sat on a mat.", "Hello world!"]],
     ["--chrf", "--char-order", "3", "--word-order", "1", "--beta", "1"]),
]


def to_sacrebleu(args):
    """./bleu's arguments → sacreBLEU's."""
    out, metric, i = [], "bleu", 0
    mapping = {"--word-order": "--chrf-word-order", "--char-order": "--chrf-char-order", "--beta": "--chrf-beta",
               "--chrf-whitespace": "--chrf-whitespace", "--eps-smoothing": "--chrf-eps-smoothing"}
    lc = False
    while i < len(args):
        a = args[i]
        if a == "--chrf":
            metric = "chrf"
        elif a == "-lc":
            lc = True
        elif a in ("--chrf-whitespace", "--eps-smoothing"):
            out.append(mapping[a])
        elif a in mapping:
            out += [mapping[a], args[i + 1]]
            i += 1
        else:
            out += [a, args[i + 1]]
            i += 1
        i += 1
    if lc:
        out.append("-lc" if metric == "bleu" else "--chrf-lowercase")
    return ["-m", metric] + out


def run(hyps, refs, args):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for k, r in enumerate(refs):
            p = os.path.join(d, f"ref{k}")
            with open(p, "w", encoding="utf-8", newline="\n") as f:
                f.write("\n".join(r) + "\n")
            paths.append(p)
        hp = os.path.join(d, "hyp")
        with open(hp, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(hyps) + "\n")
        cmd = [sys.executable, "-m", "sacrebleu", *paths, "-i", hp, "-f", "text", "-w", "1", *to_sacrebleu(args)]
        env = dict(os.environ, PYTHONPATH=SRC)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        return r.stdout.strip()


def main():
    cases = []
    for name, hyps, refs, args in CASES:
        cases.append({"name": name, "hyp": hyps, "refs": refs, "args": args, "expected": run(hyps, refs, args)})
    raw = os.path.join(MULTI30K, "raw", "test_2016_flickr.en.gz")
    data = []
    if os.path.exists(raw):
        with gzip.open(raw, "rt", encoding="utf-8") as f:
            ref = [l.rstrip("\n") for l in f]
        with gzip.open(os.path.join(MULTI30K, "raw", "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
            src = [l.rstrip("\n") for l in f]
        with open(os.path.join(MULTI30K, "tok", "test_2016_flickr.lc.norm.tok.en"), encoding="utf-8") as f:
            tok = [l.rstrip("\n") for l in f]
        # stand-in hypotheses: the German sources, and the official lowercased tokenised English
        for hyp_name, hyps in (("source_de", src), ("lc_tok_en", tok)):
            for args in ([], ["-lc"], ["--chrf"], ["--chrf", "--word-order", "2"], ["--tokenize", "char"], ["--tokenize", "intl"]):
                data.append({"hyp": hyp_name, "args": args, "expected": run(hyps, [ref], args)})
    json.dump({"sacrebleu_version": "2.6.0", "cases": cases, "multi30k_test_2016_flickr": data}, sys.stdout,
              ensure_ascii=False, indent=1)
    print()


if __name__ == "__main__":
    main()
