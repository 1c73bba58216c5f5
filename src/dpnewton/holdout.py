"""Holdout split: the rows of a dataset split once into a training and a test part.

With a holdout fraction F (0 < F < 1) the n rows of a prepared dataset are permuted by a Generator
seeded from the dataset's name (:func:`dpnewton.seeding.dataset_generator`, stream ``holdout``);
the first round(F n) rows of the permutation are the test split, the others the training split,
each kept in the original row order. The split is a pure function of (dataset, F, n), and for one
(dataset, n) a larger F holds out a superset of the rows.

The optimizers, the non-private optimum and the excess loss see only the training rows (so
delta = n^-2 uses the training n); the test rows give the held-out metrics of a run's output
(:func:`heldout_metrics`).
"""

from __future__ import annotations

import numpy as np

from .loss import LogisticProblem
from .seeding import dataset_generator


def holdout_fraction(value) -> float | None:
    """A holdout setting as a fraction in (0, 1), or None when it is off (None or 0)."""
    if value is None or (not isinstance(value, bool) and value == 0):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise ValueError(f"holdout={value!r} must be a number in [0, 1) (null or 0 = off)")
    fraction = float(value)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"holdout={value!r} must be in [0, 1) (null or 0 = off)")
    return fraction


def holdout_label(fraction: float) -> str:
    """Text form of a fraction in file names: the shortest repr of the float (0.2 -> '0.2')."""
    return repr(float(fraction))


def holdout_split(dataset: str, fraction: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, test rows) of a dataset of n rows: sorted, disjoint index arrays covering 0..n-1.

    The test split has round(fraction x n) rows; ValueError if that leaves either split empty.
    """
    fraction = holdout_fraction(fraction)
    if fraction is None:
        raise ValueError("holdout_split needs a fraction in (0, 1)")
    n = int(n)
    n_test = int(round(fraction * n))
    if not 0 < n_test < n:
        raise ValueError(f"holdout={fraction!r} of the {n} rows of {dataset!r} gives {n_test} test rows; "
                         f"both splits need at least one row")
    order = dataset_generator(dataset, "holdout").permutation(n)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def split_problems(X: np.ndarray, y: np.ndarray, name: str,
                   fraction: float | None) -> tuple[LogisticProblem, LogisticProblem | None]:
    """(training problem, test problem) of records (X, y); (all rows, None) when ``fraction`` is None.

    Rows are projected one by one (:meth:`LogisticProblem.from_xy`), so the training problem's Z is
    exactly the training rows of the full data's Z.
    """
    if fraction is None:
        return LogisticProblem.from_xy(X, y, name=name), None
    train, test = holdout_split(name, fraction, len(y))
    return (LogisticProblem.from_xy(X[train], y[train], name=name),
            LogisticProblem.from_xy(X[test], y[test], name=f"{name}-test"))


def heldout_metrics(test: LogisticProblem, w: np.ndarray) -> dict:
    """``test_accuracy`` and ``test_log_loss`` (mean logistic loss) of w on the test rows: one pass."""
    m = test.margins(np.asarray(w, dtype=np.float64))
    return {"test_accuracy": test.accuracy_from_margins(m), "test_log_loss": float(test.loss_from_margins(m))}
