"""The build back end of `pip install .` (pyproject.toml): a wheel of the Python package
python/s2s, written here with the standard library, so that pip needs nothing from an index
(Debian's pip, no network, an isolated build). The package is pure Python over libs2s.so,
which `make install` puts on the system (or S2S_LIBRARY names): the wheel holds no library.
Not part of the product."""

import base64
import hashlib
import os
import re
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "s2s"


def _version():
    with open(os.path.join(ROOT, "include", "s2s", "common.h"), encoding="utf-8") as f:
        m = re.search(r'#define S2S_VERSION "([0-9.]+)"', f.read())
    if not m:
        raise RuntimeError("include/s2s/common.h: no S2S_VERSION")
    return m.group(1)


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: s2s from Python: sequence-to-sequence models with attention, over the C library libs2s\n"
            "Requires-Python: >=3.9\nProvides-Extra: arrays\nRequires-Dist: numpy; extra == \"arrays\"\n")


def _files():
    """(path in the wheel, bytes): the package's modules and its py.typed marker."""
    pkg = os.path.join(ROOT, "python", NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(pkg, name), "rb") as f:
                yield f"{NAME}/{name}", f.read()


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{_version()}.dist-info"
    wheel = f"{NAME}-{_version()}-py3-none-any.whl"
    entries = list(_files()) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: s2s scripts/pep517.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = "".join(f"{p},{_digest(d)},{len(d)}\n" for p, d in entries) + f"{info}/RECORD,,\n"
    path = os.path.join(wheel_directory, wheel)
    with zipfile.ZipFile(path + ".part", "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in entries + [(f"{info}/RECORD", record.encode())]:
            z.writestr(zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0)), d, zipfile.ZIP_DEFLATED)
    os.replace(path + ".part", path)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("s2s has no source distribution: the package comes with the source tree (pip install . there)")
