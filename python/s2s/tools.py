"""The programs' tools as functions: the attention calculator (./attend), corpus scores
(./bleu: multi-bleu.perl's BLEU, sacreBLEU's BLEU and chrF with their signatures) and
subword models (./subword learn, encode, decode). Same numbers as the programs: the same C.
"""

import ctypes
import json
from dataclasses import dataclass
from typing import Optional

from . import _lib
from ._lib import lib


def _matrix(m, name):
    if m is None:
        return None
    if hasattr(m, "tolist"):
        m = m.tolist()
    if not isinstance(m, (list, tuple)):
        raise TypeError(f"{name}: expected a matrix (a list of rows or an array)")
    return [list(map(float, row)) if isinstance(row, (list, tuple)) else row for row in m]


def attend(Q=None, K=None, V=None, X=None, W_q=None, W_k=None, W_v=None, W_o=None, heads=None, scaled=True,
           causal=False):
    """Attention of queries Q over keys K and values V (or X for all three), as ./attend:
    optional projections X·W, heads (a number to split into, or a list of dicts with their
    own Q, K, V, X, W_q, W_k, W_v), an output projection W_o, scaling by √d_k, a causal
    mask. Returns {"heads": [{"Q", "K", "V", "scores", "weights", "output"}...], "output"} as
    float32 arrays: each head's queries, keys and values as scored (projected, split), the
    scores before the mask, the weights, the head's output; the output (heads side by side,
    times W_o when given)."""
    np = _lib.numpy()
    spec = {"scaled": bool(scaled), "causal": bool(causal)}
    for k, v in (("Q", Q), ("K", K), ("V", V), ("X", X), ("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o)):
        if v is not None:
            spec[k] = _matrix(v, k)
    if isinstance(heads, (list, tuple)):
        spec["heads"] = [{k: _matrix(v, f"heads[{i}].{k}") for k, v in h.items()} for i, h in enumerate(heads)]
    elif heads is not None:
        spec["heads"] = _lib.int_arg(heads, "heads", 1)
    err = _lib.CError()
    out = _lib.take_string(lib.s2s_attend(json.dumps(spec).encode(), ctypes.byref(err)))
    if out is None:
        err.raise_()
    r = json.loads(out)
    arr = lambda m: np.array(m, dtype=np.float32)  # noqa: E731 - the JSON holds every float exactly
    return {"heads": [{k: arr(h[k]) for k in ("Q", "K", "V", "scores", "weights", "output")} for h in r["heads"]],
            "output": arr(r["output"])}


@dataclass
class CorpusScore:
    """A corpus score: the number, ./bleu's line, and for sacreBLEU's metrics its signature."""
    score: float
    line: str
    signature: Optional[str] = None

    def __str__(self):
        return self.line

    def __float__(self):
        return self.score


def _refs(refs, n):
    if refs and isinstance(refs[0], (str, bytes)):
        refs = [refs]  # one stream
    for r, s in enumerate(refs):
        if len(s) != n:
            raise ValueError(f"reference stream {r + 1} has {len(s)} lines, the hypotheses {n}")
    return [x for s in refs for x in s], len(refs)


def score_corpus(hypotheses, references, metric="bleu", **options):
    """hypotheses against references (one list, or a list of reference streams) with ./bleu's
    options as keywords: tokenize, lowercase, smooth_method, smooth_value, word_order,
    char_order, beta, whitespace, eps_smoothing, normalize, width."""
    opts = dict(options, metric=metric)
    ha, n = _lib.string_array(hypotheses, "hypotheses")
    flat, nrefs = _refs(list(references), n)
    ra, _ = _lib.string_array(flat, "references")
    err = _lib.CError()
    out = _lib.take_string(lib.s2s_score_corpus(json.dumps(opts).encode(), ha, ra, n, nrefs, ctypes.byref(err)))
    if out is None:
        err.raise_()
    r = json.loads(out)
    return CorpusScore(r["score"], r["line"], r.get("signature"))


def bleu(hypotheses, references, normalize=None):
    """BLEU as multi-bleu.perl on whitespace tokens (./bleu REF HYP)."""
    return score_corpus(hypotheses, references, "bleu", **({"normalize": normalize} if normalize else {}))


def sacrebleu(hypotheses, references, tokenize="13a", lowercase=False, **options):
    """BLEU as sacreBLEU 2.x on raw text (./bleu --tokenize T [-lc])."""
    return score_corpus(hypotheses, references, "sacrebleu", tokenize=tokenize, lowercase=lowercase, **options)


def chrf(hypotheses, references, word_order=0, **options):
    """chrF (word_order 2: chrF++) as sacreBLEU (./bleu --chrf)."""
    return score_corpus(hypotheses, references, "chrf", word_order=word_order, **options)


class Subword(_lib.Handle):
    """A subword model file: ours (./subword learn, byte-pair encoding) or SentencePiece's. It
    may be shared between threads: encoding and decoding run side by side, and close() waits
    for the calls in progress; a call after close raises."""

    _kind = "subword model"

    def __init__(self, path):
        super().__init__()
        self.path = str(path)
        err = _lib.CError()
        self._h = lib.s2s_subword_open(_lib.path_arg(path, "path"), ctypes.byref(err))
        if not self._h:
            err.raise_()

    def _free(self, h):
        lib.s2s_subword_free(h)

    def _code(self, fn, text):
        b = _lib.encode(text)
        err = _lib.CError()
        with self._call() as h:
            out = _lib.take_string(fn(h, b, ctypes.byref(err)))
        if out is None:
            err.raise_()
        return out

    def encode(self, line):
        """Raw text → its pieces as a list (▁ marks a word's start)."""
        s = self._code(lib.s2s_subword_encode, line)
        return s.split(" ") if s else []

    def decode(self, pieces):
        """Pieces (a list, or a str with spaces between) → raw text."""
        if not isinstance(pieces, (str, bytes)):
            pieces = " ".join(pieces)
        return self._code(lib.s2s_subword_decode, pieces)


def learn_subwords(lines, out, merges=0, vocab_size=0, min_count=2):
    """Learns a byte-pair-encoding model from lines of raw text into the file out (merges, or
    vocab_size: every piece counted); returns the merges learned (./subword learn)."""
    arr, n = _lib.string_array(lines)
    merges = _lib.int_arg(merges, "merges", 0)
    vocab_size = _lib.int_arg(vocab_size, "vocab_size", 0)
    min_count = _lib.int_arg(min_count, "min_count", 0)
    err = _lib.CError()
    k = lib.s2s_subword_learn(arr, n, merges, vocab_size, min_count, _lib.path_arg(out, "out"), ctypes.byref(err))
    if k < 0:
        err.raise_()
    return k


def heatmap(weights, path, row_labels=None, col_labels=None, title=None):
    """Draws a matrix (rows × columns, values in 0..1: attention weights) as a PNG at path, as
    ./translate --heatmap draws attention; returns path."""
    np = _lib.numpy()
    w = np.ascontiguousarray(np.asarray(weights, dtype=np.float32))
    if w.ndim != 2:
        raise ValueError(f"heatmap: a matrix, not an array of {w.ndim} dimensions")
    rows, cols = w.shape
    labels = []
    for name, lab, n in (("row_labels", row_labels, rows), ("col_labels", col_labels, cols)):
        if lab is not None and len(lab) != n:
            raise ValueError(f"heatmap: {len(lab)} {name} for {n}")
        labels.append(_lib.string_array([str(x) for x in lab], name)[0] if lab is not None else None)
    err = _lib.CError()
    st = lib.s2s_draw_heatmap(_lib.path_arg(path, "path"), w.ctypes.data_as(_lib.PF), rows, cols, labels[0], labels[1],
                              _lib.encode(title) if title else None, ctypes.byref(err))
    if st:
        err.raise_()
    return path


def export(model_path, out_path, bf16=False, format="safetensors", int8=False):
    """A model file as safetensors under its PyTorch names, as ./export; or with format="onnx", the
    folder out_path of ONNX graphs, as ./export --format onnx (int8: --int8; docs/how-to/onnx.md).
    Returns out_path."""
    err = _lib.CError()
    if format not in ("safetensors", "onnx"):
        raise ValueError(f"format: {format!r}: expected 'safetensors' or 'onnx'")
    if format == "onnx":
        if bf16:
            raise ValueError("bf16 is for safetensors; the ONNX graphs are float32")
        if lib.s2s_export_onnx(_lib.path_arg(model_path, "model_path"), _lib.path_arg(out_path, "out_path"),
                               bool(int8), ctypes.byref(err)):
            err.raise_()
        return out_path
    if int8:
        raise ValueError("int8 is for format='onnx'")
    if lib.s2s_export(_lib.path_arg(model_path, "model_path"), _lib.path_arg(out_path, "out_path"), bool(bf16),
                      ctypes.byref(err)):
        err.raise_()
    return out_path
