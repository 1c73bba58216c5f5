"""Checks shared by every loader: finite features, non-empty, exactly two labels, memory limits."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import DatasetError


def check_features(X: np.ndarray, where: str) -> np.ndarray:
    """Return ``X`` as C-contiguous float64 (n, d) after checking shape and finiteness."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise DatasetError(f"{where}: features must form a 2-D table, got shape {X.shape}")
    if X.shape[0] == 0:
        raise DatasetError(f"{where}: zero rows (empty data set); check that the file is complete and non-empty")
    if X.shape[1] == 0:
        raise DatasetError(f"{where}: zero feature columns; check the file format and the label column")
    finite = np.isfinite(X)
    if not finite.all():
        n_nan = int(np.isnan(X).sum())
        n_inf = int(np.isinf(X).sum())
        row = int(np.argwhere(~finite)[0][0])
        raise DatasetError(
            f"{where}: features contain {n_nan} NaN and {n_inf} inf values (first in data row {row}); "
            "remove or impute missing/infinite values before preparing"
        )
    return X


def map_labels(raw: np.ndarray, where: str) -> tuple[np.ndarray, dict[str, float]]:
    """Map exactly two distinct label values to -1.0 (smaller) and +1.0 (larger).

    Numeric labels are ordered numerically (so 0/1 and -1/+1 and 1/2 all map the
    natural way); string labels lexicographically. Returns (y, mapping).
    """
    raw = np.asarray(raw)
    if raw.ndim != 1:
        raise DatasetError(f"{where}: labels must be one column, got shape {raw.shape}")
    if raw.shape[0] == 0:
        raise DatasetError(f"{where}: zero rows (no labels); check that the file is complete and non-empty")
    if raw.dtype.kind in "fc" and not np.isfinite(raw).all():
        raise DatasetError(f"{where}: labels contain NaN or inf; fix or drop those rows")
    values, inverse = np.unique(raw, return_inverse=True)
    if values.shape[0] != 2:
        shown = ", ".join(label_text(v) for v in values[:5]) + (", ..." if values.shape[0] > 5 else "")
        raise DatasetError(
            f"{where}: labels must take exactly two distinct values for binary logistic regression, "
            f"found {values.shape[0]} ({shown}); filter the file to two classes or choose the right label column"
        )
    y = np.where(inverse.reshape(-1) == 0, -1.0, 1.0)
    return y, {label_text(values[0]): -1.0, label_text(values[1]): 1.0}


def label_text(v: Any) -> str:
    """The name of a raw label value: integral floats without the point (0.0 -> '0'), others as str."""
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return str(int(f)) if f.is_integer() else repr(f)
    return str(v)


def label_counts(y: np.ndarray) -> dict[str, int]:
    return {"-1": int(np.sum(y == -1.0)), "+1": int(np.sum(y == 1.0))}


def check_prepared(X: np.ndarray, y: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    X = check_features(X, where)
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.shape != (X.shape[0],):
        raise DatasetError(f"{where}: {y.shape[0]} labels for {X.shape[0]} rows")
    if not np.isin(y, (-1.0, 1.0)).all():
        raise DatasetError(f"{where}: labels must be -1.0/+1.0 after mapping")
    if np.unique(y).shape[0] != 2:
        raise DatasetError(f"{where}: only one label class present; binary classification needs both")
    return X, y


#: share of physical memory one allocation may take (the rest: other copies of the data, the OS)
MEMORY_SHARE = 0.5


def physical_memory() -> int | None:
    """Bytes of physical memory, os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE'); None if unknown."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def memory_budget() -> int | None:
    """The most one allocation may take: :data:`MEMORY_SHARE` of :func:`physical_memory` (None if unknown)."""
    total = physical_memory()
    return None if total is None else int(total * MEMORY_SHARE)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    raise AssertionError("unreachable")


def check_memory(nbytes: float, what: str, fix: str, error: type[Exception] = DatasetError) -> None:
    """Raise ``error`` when allocating ``nbytes`` for ``what`` would exceed :func:`memory_budget`.

    The message gives the estimate, the budget and ``fix``; nothing is checked where the machine's
    memory is unknown.
    """
    total = physical_memory()
    budget = None if total is None else total * MEMORY_SHARE
    if budget is not None and nbytes > budget:
        raise error(f"{what} would allocate about {format_bytes(nbytes)}, more than {format_bytes(budget)} "
                    f"({MEMORY_SHARE:.0%} of this machine's {format_bytes(total)} of memory); {fix}")
