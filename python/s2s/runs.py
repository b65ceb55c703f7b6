"""A run folder read back: its resolved config, its log's events, its curves and its test
outputs, as ./train wrote them (docs/reference/run-folder.md)."""

import json
import os


class Run:
    """Run(dir): a run folder ./train or s2s.train wrote."""

    def __init__(self, path):
        self.path = str(path)
        if not os.path.isfile(os.path.join(self.path, "config.json")):
            raise FileNotFoundError(f"{self.path}: not a run folder (no config.json)")

    def _file(self, name):
        return os.path.join(self.path, name)

    @property
    def config(self):
        """The run's resolved config (config.json)."""
        with open(self._file("config.json"), encoding="utf-8") as f:
            return json.load(f)

    def events(self, type=None):
        """The lines of log.jsonl as dicts (only those of one "type": step, epoch, valid, test,
        extend); a line cut by a crash is skipped, as the programs skip it."""
        out = []
        try:
            f = open(self._file("log.jsonl"), encoding="utf-8")
        except FileNotFoundError:
            return out
        with f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if isinstance(e, dict) and (type is None or e.get("type") == type):
                    out.append(e)
        return out

    def curve(self, key, type=None):
        """(steps, values) of a logged key ("loss" of the step lines, "valid_bleu" of the epoch
        lines, ...): the lines of that type (by default the first type holding the key)."""
        events = self.events(type)
        if type is None:
            for t in ("step", "epoch", "valid", "test"):
                if any(e.get("type") == t and key in e for e in events):
                    type = t
                    break
        pts = [(e["step"], e[key]) for e in events if e.get("type") == type and key in e and "step" in e]
        return [p[0] for p in pts], [p[1] for p in pts]

    @property
    def test(self):
        """The test line's metrics, or None before the run has ended."""
        t = self.events("test")
        return t[-1] if t else None

    def test_outputs(self):
        """(hypotheses, references) of the test split (test.hyp, test.ref), or None."""
        try:
            with open(self._file("test.hyp"), encoding="utf-8") as h, open(self._file("test.ref"), encoding="utf-8") as r:
                return h.read().splitlines(), r.read().splitlines()
        except FileNotFoundError:
            return None

    @property
    def model_path(self):
        return self._file("model.bin")

    def __repr__(self):
        return f"<s2s.Run {self.path}>"
