"""Atomic file writes: write to a temporary file in the target folder, fsync, then rename.

An interrupted write therefore never leaves a file that looks complete under its final name.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _strict(obj):
    """``obj`` with numpy values as Python ones and non-finite floats as None (JSON ``null``)."""
    if isinstance(obj, dict):
        return {key: _strict(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(value) for value in obj]
    if isinstance(obj, np.ndarray):
        return _strict(obj.tolist())
    if isinstance(obj, np.generic):
        return _strict(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def to_json(obj, **kw) -> str:
    """Strict JSON (RFC 8259): NaN and infinities become ``null``, so any parser reads it."""
    return json.dumps(_strict(obj), allow_nan=False, **kw)


def atomic_write_json(path, obj) -> None:
    atomic_write_text(path, to_json(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_npz(path, **arrays) -> None:
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
