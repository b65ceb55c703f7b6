"""A model file loaded for translating, scoring and looking at its attention.

Every answer is the C library's (./translate's decoding path): the same lines give the same
translations, scores and attention as the programs. A Model may be shared between threads: it
serves one call at a time (a lock makes a second thread wait), and close() waits for the call
in progress; a call after close raises. Two models serve two threads side by side.
"""

import ctypes
import json
import threading
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Union

from . import _lib
from ._lib import lib


@dataclass
class Hypothesis:
    """One output: its text, log p (with <eos>) and log p / length^alpha. Greedy decoding
    computes neither number: both are None there."""
    text: str
    logprob: Optional[float]
    score: Optional[float]


@dataclass
class Attention:
    """A line's attention (greedy decoding's, or beam search's best hypothesis's): weights[k] is
    the distribution over the source tokens when output token k was written (the last row
    <eos>'s when the output ended).
    heads: (layers, heads, n_out, n_src) for a Transformer or a multihead RNN, else None."""
    text: str
    source: List[str]
    output: List[str]
    weights: Any  # numpy.ndarray (n_out, n_src), float32; None for dummy attention
    heads: Any = None

    def draw(self, path, title=None):
        """The weights as a heatmap PNG (rows: the output's tokens; columns: the source's)."""
        from .tools import heatmap
        if self.weights is None:
            raise ValueError("this model's attention has no weights to draw (dummy attention)")
        return heatmap(self.weights, path, self.output, self.source, title)

    def _repr_png_(self):  # a notebook shows the heatmap
        import os
        import tempfile
        if self.weights is None:
            return None
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "attention.png")
            self.draw(p)
            with open(p, "rb") as f:
                return f.read()


@dataclass
class Translation:
    """One line of Model.translate_batch: its hypotheses, best first (one in greedy decoding,
    up to n_best under beam search; none for an empty line or, with errors="empty", a line the
    model cannot read, whose reason is error), and with attention=True the best one's
    Attention."""
    hypotheses: List[Hypothesis] = field(default_factory=list)
    attention: Optional["Attention"] = None
    error: Optional[str] = None

    @property
    def text(self) -> str:
        """The best hypothesis's text ("" when there is none)."""
        return self.hypotheses[0].text if self.hypotheses else ""


@dataclass
class Score:
    """A target's forced decoding: the sum of its tokens' log-probabilities (<eos> last) and
    each one's; with logits=True the model's logits before each token (n, V) and the ids."""
    total: float
    tokens: List[str]
    logprobs: List[float]
    logits: Any = None
    source_ids: Optional[List[int]] = None
    target_ids: Optional[List[int]] = None


def _array(ptr, shape):
    np = _lib.numpy()
    n = 1
    for d in shape:
        n *= d
    if n == 0:
        return np.zeros(shape, dtype=np.float32)
    return np.ctypeslib.as_array(ptr, shape=(n,)).reshape(shape).copy()


class Model(_lib.Handle):
    """Model(path, precision="fp32", threads=0): a model file (model.bin, ./average's,
    ./import's). precision: "fp32", "bf16" or "int8", as ./translate --bf16/--int8; threads:
    GEMM threads (0: the libraries' default)."""

    _kind = "model"

    def __init__(self, path, precision="fp32", threads=0):
        super().__init__()
        self.path = str(path)
        self._lock = threading.Lock()  # the C model serves one call at a time
        err = _lib.CError()
        p = _lib.path_arg(path, "path")
        prec = _lib.encode(precision, "precision")
        self._h = lib.s2s_open_precision(p, prec, _lib.int_arg(threads, "threads", 0, 4096), ctypes.byref(err))
        if not self._h:
            err.raise_()
        self.precision = lib.s2s_model_precision(self._h).decode()
        self.params = int(lib.s2s_model_params(self._h))
        self.config = json.loads(_lib.take_string(lib.s2s_model_config(self._h)))
        self.has_attention = bool(lib.s2s_model_has_attention(self._h))

    def _free(self, h):
        lib.s2s_close(h)

    def __repr__(self):
        m = self.config.get("model", {})
        state = "closed" if not self._h else self.precision
        return f"<s2s.Model {self.path}: {m.get('type', 'rnn')}, {self.params:,} parameters, {state}>"

    # -- translating --
    def _run(self, lines, beam, n_best, alpha, max_len, flags):
        arr, n = _lib.string_array(lines)
        beam = _lib.int_arg(beam, "beam", 1, _lib.INT_MAX)
        n_best = _lib.int_arg(n_best, "n_best", 1, _lib.INT_MAX)
        max_len = _lib.int_arg(max_len, "max_len", 0, _lib.INT_MAX)
        alpha = _lib.float_arg(alpha, "alpha")
        err = _lib.CError()
        with self._call() as h, self._lock:
            r = lib.s2s_translate_lines(h, arr, n, beam, n_best, alpha, max_len, flags, ctypes.byref(err))
        if not r:
            err.raise_()
        return r, n

    @staticmethod
    def _check_line(r, i, errors):
        why = ctypes.c_char_p()
        st = lib.s2s_translations_status(r, i, ctypes.byref(why))
        if st and errors == "raise":
            text = why.value.decode("utf-8", "replace") if why.value else "cannot be read"
            raise _lib.error_of(st, f"line {i + 1}: {text}")
        return st == 0

    def translate(self, lines, beam=1, n_best=1, alpha=1.0, max_len=0, tokenized=False, errors="raise"):
        """Translates a list of lines (or one str) as ./translate: beam 1 is greedy; alpha is
        beam search's length normalisation. Returns a str per line, or with n_best > 1 a list
        of Hypothesis per line, best first. errors="raise" raises for the first line the
        model cannot read; errors="empty" gives "" (or []) for it, as ./translate does."""
        one = isinstance(lines, (str, bytes))
        if one:
            lines = [lines]
        if errors not in ("raise", "empty"):
            raise ValueError('errors: "raise" or "empty"')
        flags = 2 if tokenized else 0
        r, n = self._run(lines, beam, n_best, alpha, max_len, flags)
        try:
            out = []
            for i in range(n):
                ok = self._check_line(r, i, errors)
                if n_best == 1:
                    out.append(lib.s2s_translations_text(r, i, 0).decode("utf-8") if ok else "")
                else:
                    out.append([Hypothesis(lib.s2s_translations_text(r, i, h).decode("utf-8"),
                                           float(lib.s2s_translations_logprob(r, i, h)),
                                           float(lib.s2s_translations_score(r, i, h)))
                                for h in range(lib.s2s_translations_hyps(r, i))] if ok else [])
        finally:
            lib.s2s_translations_free(r)
        return out[0] if one else out

    def translate_batch(self, lines: Sequence[str], *, beam: int = 1, n_best: int = 1, alpha: float = 1.0,
                        max_len: int = 0, tokenized: bool = False, batch_size: int = 256, attention: bool = False,
                        errors: str = "raise") -> List[Translation]:
        """Translates a list of lines as ./translate does, batch_size lines to a call: always a
        list with a Translation per line. beam 1 is greedy decoding; n_best ≤ beam hypotheses
        a line; alpha is beam search's length normalisation; attention=True keeps the best
        hypothesis's attention (under beam search too). errors="raise" raises for the
        first line the model cannot read; "empty" gives it no hypothesis and the reason."""
        if isinstance(lines, (str, bytes)):
            raise TypeError("lines: a list of str (translate_batch takes and gives a list; translate takes one line too)")
        if errors not in ("raise", "empty"):
            raise ValueError('errors: "raise" or "empty"')
        batch_size = _lib.int_arg(batch_size, "batch_size", 1, _lib.INT_MAX)
        lines = list(lines)
        out: List[Translation] = []
        for start in range(0, len(lines), batch_size):
            chunk = lines[start:start + batch_size]
            r, n = self._run(chunk, beam, n_best, alpha, max_len, (1 if attention else 0) | (2 if tokenized else 0))
            try:
                out += [self._translation(r, i, start + i, beam > 1, attention, errors) for i in range(n)]
            finally:
                lib.s2s_translations_free(r)
        return out

    @staticmethod
    def _translation(r, i, line, scored, attention, errors):
        why = ctypes.c_char_p()
        st = lib.s2s_translations_status(r, i, ctypes.byref(why))
        if st:
            text = why.value.decode("utf-8", "replace") if why.value else "cannot be read"
            if errors == "raise":
                raise _lib.error_of(st, f"line {line + 1}: {text}")
            return Translation(error=text)
        hyps = [Hypothesis(lib.s2s_translations_text(r, i, h).decode("utf-8"),
                           float(lib.s2s_translations_logprob(r, i, h)) if scored else None,
                           float(lib.s2s_translations_score(r, i, h)) if scored else None)
                for h in range(lib.s2s_translations_hyps(r, i))]
        return Translation(hyps, Model._attention_of(r, i) if attention else None)

    @staticmethod
    def _attention_of(r, i):
        n_out, n_src = ctypes.c_int(), ctypes.c_int()
        w = lib.s2s_translations_attention(r, i, ctypes.byref(n_out), ctypes.byref(n_src))
        text = lib.s2s_translations_text(r, i, 0).decode("utf-8")
        if not w:
            return Attention(text, [], [], None)
        no, ns = n_out.value, n_src.value
        src = [lib.s2s_translations_src_token(r, i, k).decode("utf-8") for k in range(ns)]
        outs = [lib.s2s_translations_out_token(r, i, k).decode("utf-8") for k in range(no)]
        nl, nh = ctypes.c_int(), ctypes.c_int()
        hp = lib.s2s_translations_heads(r, i, ctypes.byref(nl), ctypes.byref(nh))
        heads = _array(hp, (nl.value, nh.value, no, ns)) if hp else None
        return Attention(text, src, outs, _array(w, (no, ns)), heads)

    def attention(self, lines, max_len=0, tokenized=False):
        """Greedy decoding of a line (or a list) with its attention: an Attention per line
        (weights None for a model without attention weights: dummy attention)."""
        one = isinstance(lines, (str, bytes))
        if one:
            lines = [lines]
        r, n = self._run(lines, 1, 1, 1.0, max_len, 1 | (2 if tokenized else 0))
        try:
            out = []
            for i in range(n):
                self._check_line(r, i, "raise")
                out.append(self._attention_of(r, i))
        finally:
            lib.s2s_translations_free(r)
        return out[0] if one else out

    def score(self, sources, targets, logits=False):
        """Forced decoding of targets given sources, as ./translate --score: a Score per pair
        (logits=True: the logits as ./translate --logits writes them, a (n, V) array)."""
        one = isinstance(sources, (str, bytes))
        if one:
            sources, targets = [sources], [targets]
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources, {len(targets)} targets")
        sa, n = _lib.string_array(sources, "sources")
        ta, _ = _lib.string_array(targets, "targets")
        err = _lib.CError()
        with self._call() as h, self._lock:
            r = lib.s2s_score_pairs(h, sa, ta, n, bool(logits), ctypes.byref(err))
        if not r:
            err.raise_()
        try:
            out = []
            for i in range(n):
                why = ctypes.c_char_p()
                st = lib.s2s_scores_status(r, i, ctypes.byref(why))
                if st:
                    text = why.value.decode("utf-8", "replace") if why.value else "cannot be read"
                    raise _lib.error_of(st, f"pair {i + 1}: {text}")
                lp = _lib.PF()
                k = lib.s2s_scores_tokens(r, i, ctypes.byref(lp))
                s = Score(float(lib.s2s_scores_total(r, i)),
                          [lib.s2s_scores_piece(r, i, j).decode("utf-8") for j in range(k)], [float(lp[j]) for j in range(k)])
                if logits:
                    V = ctypes.c_int()
                    lg = lib.s2s_scores_logits(r, i, ctypes.byref(V))
                    s.logits = _array(lg, (k, V.value))
                    for side in (True, False):
                        c = ctypes.c_int()
                        ids = lib.s2s_scores_ids(r, i, side, ctypes.byref(c))
                        vals = [int(ids[j]) for j in range(c.value)]
                        if side:
                            s.source_ids = vals
                        else:
                            s.target_ids = vals
                out.append(s)
        finally:
            lib.s2s_scores_free(r)
        return out[0] if one else out
