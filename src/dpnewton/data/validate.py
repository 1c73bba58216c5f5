"""Checks shared by every loader: finite features, non-empty, exactly two labels."""

from __future__ import annotations

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
