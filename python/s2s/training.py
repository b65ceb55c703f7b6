"""Training runs from Python: a config (a file, a name from configs/, or a dict) with
overrides into a run folder, the log's events as they happen, Ctrl-C leaving a run that
resumes bit for bit.

    run = s2s.train("reverse", out="runs/rev", set={"train.epochs": 2})
    for event in run:                  # the lines of log.jsonl, as dicts, as they are written
        print(event["type"], event.get("loss"))
    run.summary                        # {"epochs": 2, "steps": ..., "tested": True, ...}

The training runs in the C library on a thread of its own; the iterating thread waits for
events and takes Ctrl-C: the run then stops after its step (last.bin saved, resumable with
s2s.resume) and KeyboardInterrupt is raised again.
"""

import ctypes
import json
import queue
import threading

from . import _lib
from ._lib import lib

_DONE = object()


def _sets(overrides):
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        items = overrides.items()
    else:
        items = [tuple(s.split("=", 1)) if isinstance(s, str) else s for s in overrides]
    out = []
    for k, v in items:
        value = v if isinstance(v, str) else json.dumps(v)
        if "\0" in str(k) or "\0" in value:
            raise _lib.ConfigError(f"set: {k!r}: a NUL character, which no setting has", "config")
        out.append(f"{k}={value}")
    return out


class Training(_lib.Handle):
    """A run about to train (s2s.train) or resume (s2s.resume). Iterate it for the events, or
    call run(); either runs it once. close() (or the end of a with block) stops a run in
    progress after its step, waits for it and frees it; a call after close raises."""

    _kind = "training"

    def __init__(self, handle, pause_at=0):
        super().__init__()
        self._h = handle
        self._pause_at = _lib.int_arg(pause_at, "pause_at", 0, _lib.LONG_MAX)
        self._status = None
        self._err = _lib.CError()
        self.dir = self.path = lib.s2s_training_dir(handle).decode()
        self.summary = None

    def _free(self, h):
        lib.s2s_training_free(h)

    @property
    def config(self):
        """The resolved config (after a resume: the run's own)."""
        with self._call() as h:
            return json.loads(_lib.take_string(lib.s2s_training_config(h)))

    def stop(self):
        """Asks the run to stop after its step (from any thread); it stays resumable."""
        with self._call() as h:
            lib.s2s_training_stop(h)

    def close(self):
        with self._cond:
            if self._h and not self._closing:
                lib.s2s_training_stop(self._h)  # a run in progress ends after its step
        super().close()

    def _start(self, on_event, pause_at):
        if self._status is not None or self.summary is not None:
            raise _lib.Error(f"{self.dir}: this training has run; resume the run with s2s.resume", "config")
        held = self._call()
        h = held.__enter__()  # the run holds the handle until it ends: close() waits for it
        self._status = -1

        @_lib.EVENT_FN
        def events(line, _user):
            on_event(json.loads(line.decode("utf-8")))

        def body():
            try:
                self._status = lib.s2s_training_run(h, pause_at, events, None, ctypes.byref(self._err))
            finally:
                held.__exit__(None, None, None)

        self._events_fn = events  # kept alive while C holds it
        t = threading.Thread(target=body, name=f"s2s-train {self.dir}", daemon=True)
        t.start()
        return t

    def _finish(self, thread, raise_error=True):
        thread.join()
        try:
            with self._call() as h:
                self.summary = json.loads(_lib.take_string(lib.s2s_training_summary(h)))
        except _lib.Error:  # closed by another thread meanwhile
            if raise_error:
                raise
            return
        if self._status and raise_error:
            self._err.raise_()

    def __iter__(self):
        q = queue.Queue()
        thread = self._start(q.put, self._pause_at)
        done = threading.Thread(target=lambda: (thread.join(), q.put(_DONE)), daemon=True)
        done.start()
        try:
            while True:
                try:
                    e = q.get(timeout=0.1)  # a timeout: Ctrl-C reaches this thread between waits
                except queue.Empty:
                    continue
                if e is _DONE:
                    break
                yield e
        except BaseException:  # KeyboardInterrupt, or the loop left early: stop, keep the run resumable
            with self._cond:
                if self._h:
                    lib.s2s_training_stop(self._h)
            self._finish(thread, raise_error=False)
            raise
        self._finish(thread)

    def run(self, on_event=None):
        """Trains to the end (or the pause), calling on_event(dict) for each log line; returns
        the summary. Ctrl-C stops the run after its step and raises KeyboardInterrupt."""
        for e in self:
            if on_event:
                on_event(e)
        return self.summary


def train(config, out=None, set=None, overwrite=False, pause_at=0):
    """A new run: config a path or a name as ./train --config takes it (reverse →
    configs/reverse.json), or a dict; set: overrides as ./train --set, a dict ({"train.epochs":
    2}) or a list of "key=value"; out: the run's folder (default runs/NAME). The config is
    checked here: a bad key raises ConfigError with ./train's message ("did you mean")."""
    sets = _sets(set)
    arr, n = _lib.string_array(sets, "set")
    pause_at = _lib.int_arg(pause_at, "pause_at", 0, _lib.LONG_MAX)
    out = _lib.path_arg(out, "out")
    err = _lib.CError()
    if isinstance(config, dict):
        h = lib.s2s_training_new(None, json.dumps(config).encode(), arr, n, out, bool(overwrite), ctypes.byref(err))
    else:
        h = lib.s2s_training_new(_lib.path_arg(config, "config"), None, arr, n, out, bool(overwrite), ctypes.byref(err))
    if not h:
        err.raise_()
    return Training(h, pause_at)


def resume(run_dir, epochs=0, pause_at=0):
    """The run in run_dir continued from its last.bin (epochs > 0: to that many in all)."""
    epochs = _lib.int_arg(epochs, "epochs", 0)
    pause_at = _lib.int_arg(pause_at, "pause_at", 0, _lib.LONG_MAX)
    err = _lib.CError()
    h = lib.s2s_training_resume(_lib.path_arg(run_dir, "run_dir"), epochs, ctypes.byref(err))
    if not h:
        err.raise_()
    return Training(h, pause_at)
