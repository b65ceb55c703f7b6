"""The shared library (libs2s.so) and the declarations of s2s.h, over ctypes.

Found in this order: $S2S_LIBRARY; the build folder of the source tree this package sits in
(python/s2s → build/libs2s.so.*); the library installed beside the package (make install);
the system's loader (libs2s.so.0). The library's ABI version is checked before any call.
Every call goes through ctypes.CDLL, which releases the GIL for the call's duration.
"""

import contextlib
import ctypes
import glob
import os
import threading

ABI_VERSION = 2  # include/s2s/s2s.h: S2S_ABI_VERSION

STATUS_NAMES = ["ok", "io", "config", "corrupt", "version", "nomem", "data", "numeric"]


class Error(Exception):
    """An error the library reported: `status` names its kind ("io", "config", "corrupt",
    "version", "nomem", "data", "numeric"), the message is the library's own sentence."""

    def __init__(self, message, status="config"):
        super().__init__(message)
        self.status = status


class ConfigError(Error, ValueError):
    """A config, an argument or an option the library refused."""


class DataError(Error, ValueError):
    """Text the model cannot read (not UTF-8, too long, a token outside the vocabulary)."""


class FileError(Error, OSError):
    """A file that cannot be read or written, is not what it should be, or is locked."""


class NumericError(Error, ArithmeticError):
    """A NaN or an infinity appeared (training diverged)."""


def error_of(status, message):
    name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else "config"
    cls = {"config": ConfigError, "data": DataError, "numeric": NumericError}.get(name, FileError)
    return cls(message, name)


class CError(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("msg", ctypes.c_char * 512)]

    def raise_(self):
        raise error_of(self.status, self.msg.decode("utf-8", "replace") or "s2s: an error without a message")


EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)

P = ctypes.c_void_p
S = ctypes.c_char_p
I = ctypes.c_int
F = ctypes.c_float
D = ctypes.c_double
B = ctypes.c_bool
E = ctypes.POINTER(CError)
PI = ctypes.POINTER(ctypes.c_int)
PF = ctypes.POINTER(ctypes.c_float)
PPF = ctypes.POINTER(PF)
PS = ctypes.POINTER(ctypes.c_char_p)
PI32 = ctypes.POINTER(ctypes.c_int32)

# name: (result, arguments); a returned char * the caller frees is declared P (an address)
PROTOTYPES = {
    "s2s_abi_version": (I, []),
    "s2s_version": (S, []),
    "s2s_free_string": (None, [P]),
    "s2s_open_precision": (P, [S, S, I, E]),
    "s2s_close": (None, [P]),
    "s2s_model_config": (P, [P]),
    "s2s_model_params": (ctypes.c_long, [P]),
    "s2s_model_precision": (S, [P]),
    "s2s_model_has_attention": (B, [P]),
    "s2s_export": (I, [S, S, B, E]),
    "s2s_export_onnx": (I, [S, S, B, E]),
    "s2s_translate_lines": (P, [P, PS, I, I, I, F, I, I, E]),
    "s2s_translations_count": (I, [P]),
    "s2s_translations_status": (I, [P, I, PS]),
    "s2s_translations_hyps": (I, [P, I]),
    "s2s_translations_text": (S, [P, I, I]),
    "s2s_translations_score": (F, [P, I, I]),
    "s2s_translations_logprob": (F, [P, I, I]),
    "s2s_translations_attention": (PF, [P, I, PI, PI]),
    "s2s_translations_src_token": (S, [P, I, I]),
    "s2s_translations_out_token": (S, [P, I, I]),
    "s2s_translations_heads": (PF, [P, I, PI, PI]),
    "s2s_translations_free": (None, [P]),
    "s2s_score_pairs": (P, [P, PS, PS, I, B, E]),
    "s2s_scores_count": (I, [P]),
    "s2s_scores_status": (I, [P, I, PS]),
    "s2s_scores_total": (D, [P, I]),
    "s2s_scores_tokens": (I, [P, I, PPF]),
    "s2s_scores_piece": (S, [P, I, I]),
    "s2s_scores_logits": (PF, [P, I, PI]),
    "s2s_scores_ids": (PI32, [P, I, B, PI]),
    "s2s_scores_free": (None, [P]),
    "s2s_training_new": (P, [S, S, PS, I, S, B, E]),
    "s2s_training_resume": (P, [S, I, E]),
    "s2s_training_run": (I, [P, ctypes.c_long, EVENT_FN, P, E]),
    "s2s_training_stop": (None, [P]),
    "s2s_training_dir": (S, [P]),
    "s2s_training_config": (P, [P]),
    "s2s_training_summary": (P, [P]),
    "s2s_training_free": (None, [P]),
    "s2s_attend": (P, [S, E]),
    "s2s_draw_heatmap": (I, [S, PF, I, I, PS, PS, S, E]),
    "s2s_score_corpus": (P, [S, PS, PS, I, I, E]),
    "s2s_subword_learn": (I, [PS, I, I, I, I, S, E]),
    "s2s_subword_open": (P, [S, E]),
    "s2s_subword_encode": (P, [P, S, E]),
    "s2s_subword_decode": (P, [P, S, E]),
    "s2s_subword_free": (None, [P]),
}


def _candidates():
    env = os.environ.get("S2S_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.realpath(__file__))  # a linked python/ still finds its tree's build/
    tree = sorted(glob.glob(os.path.join(here, "..", "..", "build", "libs2s.so.*.*.*")))
    beside = [os.path.join(here, "..", "..", "..", "libs2s.so.0")]  # PREFIX/lib/pythonX.Y/dist-packages/s2s
    return tree + [p for p in beside if os.path.exists(p)] + ["libs2s.so.0"]


# What the programs set before libgomp starts (src/cli/wait_policy.h): its threads sleep when
# they wait instead of spinning 3 ms, which on a busy machine takes the cores the working
# threads need. Set only while the library loads, and only when the user set neither.
_GOMP_SPINCOUNT = "0"


def _cdll(path):
    mine = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
    if mine:
        os.environ["GOMP_SPINCOUNT"] = _GOMP_SPINCOUNT
    try:
        return ctypes.CDLL(path)
    finally:
        if mine:
            del os.environ["GOMP_SPINCOUNT"]


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = _cdll(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        if not hasattr(lib, "s2s_abi_version"):
            raise ImportError(f"{path}: a libs2s without s2s_abi_version (ABI 1); this package needs ABI {ABI_VERSION}")
        lib.s2s_abi_version.restype = ctypes.c_int
        got = lib.s2s_abi_version()
        if got != ABI_VERSION:
            raise ImportError(f"{path}: libs2s of ABI version {got}; this package needs {ABI_VERSION} "
                              "(rebuild with make, or install the package of the same release)")
        for name, (res, args) in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        lib.path = path
        return lib
    raise ImportError("libs2s not found (build it with make, or set S2S_LIBRARY): " + "; ".join(tried))


lib = _load()


def numpy():
    """numpy, which the arrays need (imported when first asked for)."""
    try:
        import numpy as np
    except ImportError:
        raise ImportError("arrays need numpy: " + numpy_hint()) from None
    return np


def numpy_hint(executable=None, prefix=None, base_prefix=None):
    """How this interpreter gets numpy: Debian's python3 from apt, any other (a venv, pyenv,
    conda) from pip. The arguments stand in for sys's, for the tests."""
    import sys
    executable = executable or sys.executable
    prefix = prefix if prefix is not None else sys.prefix
    base_prefix = base_prefix if base_prefix is not None else sys.base_prefix
    if prefix == "/usr" and base_prefix == "/usr" and executable.startswith("/usr/bin/"):
        return "apt install python3-numpy (Debian's python3)"
    return f"{executable} -m pip install numpy"


def take_string(address):
    """A char * the library malloc'd, as str; freed."""
    if not address:
        return None
    try:
        return ctypes.string_at(address).decode("utf-8")
    finally:
        lib.s2s_free_string(address)


def encode(text, what="text"):
    """str (strict UTF-8) or bytes, as bytes for C; a NUL inside is refused here (C would cut it)."""
    if isinstance(text, str):
        try:
            b = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DataError(f"{what}: not UTF-8 text ({e.reason} at {e.start})", "data") from None
    elif isinstance(text, (bytes, bytearray)):
        b = bytes(text)
    else:
        raise TypeError(f"{what}: expected str or bytes, not {type(text).__name__}")
    if b"\0" in b:
        raise DataError(f"{what}: holds a NUL character, which no model reads", "data")
    return b


def string_array(items, what="lines"):
    """A list of str/bytes as a char ** kept alive by the returned tuple's first element."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what}: expected a list of lines, not one {type(items).__name__}")
    enc = [encode(x, f"{what}[{i}]") for i, x in enumerate(items)]
    arr = (ctypes.c_char_p * max(len(enc), 1))(*enc)
    return arr, len(enc)


def path_arg(path, what="path"):
    """A file name for C (str, bytes or os.PathLike); a NUL inside is refused (C would open the
    file named by the part before it)."""
    if path is None:
        return None
    try:
        b = os.fsencode(path)
    except TypeError:
        raise TypeError(f"{what}: expected a file name, not {type(path).__name__}") from None
    if b"\0" in b:
        raise ConfigError(f"{what}: {path!r} holds a NUL character, which no file name has", "config")
    return b


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def int_arg(value, what, lo=-INT_MAX - 1, hi=INT_MAX):
    """An integer for C, range-checked here: ctypes would wrap 2**32 + 1 to 1."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what}: expected an integer, not {type(value).__name__}")
    v = value.__index__()
    if not lo <= v <= hi:
        raise ConfigError(f"{what}: {v} is out of range: expected {lo} to {hi}", "config")
    return v


def float_arg(value, what):
    """A finite float for C."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: expected a number, not {type(value).__name__}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise ConfigError(f"{what}: {v} is not a finite number", "config")
    return v


class Handle:
    """What every object of the package that owns a C object shares: a call runs inside
    `with self._call() as h:` and close() waits for the calls in progress, then frees; a call
    after or during close raises Error, never reaches freed memory. Calls may overlap (the C
    side decides whether they may: a Model serialises its own)."""

    _kind = "object"

    def __init__(self):
        self._h = None
        self._cond = threading.Condition()
        self._active = 0
        self._closing = False

    def _free(self, h):  # pragma: no cover - each owner frees its own kind
        raise NotImplementedError

    @contextlib.contextmanager
    def _call(self):
        with self._cond:
            if not self._h or self._closing:
                raise Error(f"{self._name()}: the {self._kind} is closed", "config")
            self._active += 1
        try:
            yield self._h
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def _name(self):
        return getattr(self, "path", self._kind)

    def close(self):
        """Frees the C object once the calls in progress end; later calls raise."""
        with self._cond:
            if not self._h or self._closing:
                return
            self._closing = True
            while self._active:
                self._cond.wait()
            h, self._h = self._h, None
        self._free(h)

    @property
    def closed(self):
        return not self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:  # at the interpreter's exit the module may be gone already; no call can be running
            h = getattr(self, "_h", None)
            if h:
                self._h = None
                self._free(h)
        except Exception:  # pragma: no cover
            pass


