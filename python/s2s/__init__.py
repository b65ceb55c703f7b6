"""s2s from Python: the C library's models, training, attention calculator, metrics and
subword models, over ctypes (no compiler, nothing from outside Debian). Python is the front
door; translating and training run in C, and every answer is the programs' own.

    import s2s
    model = s2s.Model("runs/r/model.bin")          # ./train --config reverse --out runs/r
    model.translate(["abcd", "aabbccdd"])          # ['dcba', 'ddccbbaa'] once it has learned
    for t in model.translate_batch(["abcd"], beam=5, n_best=2):   # always a list of Translation
        print(t.text, [(h.text, h.score) for h in t.hypotheses])
    a = model.attention("abcd")                    # a.weights: (n_out, n_src) numpy array
    run = s2s.train("reverse", out="runs/rev2", set={"train.epochs": 1})
    for event in run: print(event["type"])

Thread safety: a Model serves one call at a time (others wait on its lock); different
models, subword models and trainings are independent. Long calls release the GIL.
"""

from ._lib import ABI_VERSION, ConfigError, DataError, Error, FileError, NumericError, lib
from .model import Attention, Hypothesis, Model, Score, Translation
from .runs import Run
from .tools import (CorpusScore, Subword, attend, bleu, chrf, export, heatmap, learn_subwords, sacrebleu,
                    score_corpus)
from .training import Training, resume, train


__version__ = lib.s2s_version().decode()
library = lib.path

__all__ = ["ABI_VERSION", "Attention", "ConfigError", "CorpusScore", "DataError", "Error", "FileError", "Hypothesis",
           "Model", "NumericError", "Run", "Score", "Subword", "Training", "Translation", "attend", "bleu", "chrf", "export", "heatmap",
           "learn_subwords", "resume", "sacrebleu", "score_corpus", "train"]
