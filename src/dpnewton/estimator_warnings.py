"""The warnings of :class:`dpnewton.DPLogisticRegression` and the public rules that raise them: the
privacy reminder, the budget rule (:func:`rows_to_beat_constant`) and the projection of the weights onto
the public radius ``max_norm``."""

from __future__ import annotations

import numpy as np


BUDGET_RULE_ROWS = 20.0
"""The public rule of :class:`BudgetWarning`: about 20 x models x d / epsilon_model rows are needed
before a fit beats a constant model (benchmarks/results/raw_data.md, expected-accuracy table)."""
BUDGET_WARNING_ROWS = 10_000
"""Warn when the rule asks for more rows than this (a public constant; n itself is never read)."""

class PrivacyWarning(UserWarning):
    """Reminds that only the optimizer's output is covered by the (epsilon, delta) guarantee."""


class BudgetWarning(UserWarning):
    """By a public rule (epsilon, d and the number of classes only), the budget is likely too small for
    the model to beat a constant prediction on data sets of ordinary size."""


class ProjectionWarning(UserWarning):
    """The optimizer's weights left the public radius ``max_norm`` and were projected back onto it."""


PRIVACY_WARNING_MESSAGE = (
    "DPLogisticRegression: only coef_ and intercept_ are covered by (epsilon, delta). Anything else "
    "fitted on the same private data is not private: a scaler or other preprocessing, "
    "hyper-parameter tuning (e.g. GridSearchCV or the choice of epsilon/iterations by score), and "
    "bounds or a data_norm read off the data. Fit those on public data or account for them separately "
    "(the built-in private feature ranges are covered).")


def rows_to_beat_constant(epsilon: float, d: int, models: int) -> float:
    """The public rule of :class:`BudgetWarning`: BUDGET_RULE_ROWS x models x d / epsilon (models = 1
    for two classes or a softmax model, else the number of one-vs-rest models); epsilon is the model's
    share."""
    return BUDGET_RULE_ROWS * models * d / epsilon


def project(w: np.ndarray, max_norm: float) -> tuple[np.ndarray, bool]:
    """w projected onto the ball ||w|| <= max_norm (Frobenius for a matrix; post-processing); whether it moved."""
    norm = float(np.linalg.norm(w))
    if norm <= max_norm:
        return w, False
    return w * (max_norm / norm), True


def project_rows(W: np.ndarray, max_norm: float) -> tuple[np.ndarray, bool]:
    """Each binary model's weights (a row of W) projected onto ||w|| <= max_norm; whether any moved."""
    rows = [project(w, max_norm) for w in W]
    return np.stack([w for w, _ in rows]), any(moved for _, moved in rows)


__all__ = ["BUDGET_RULE_ROWS", "BUDGET_WARNING_ROWS", "BudgetWarning", "PRIVACY_WARNING_MESSAGE", "PrivacyWarning",
           "ProjectionWarning", "project", "project_rows", "rows_to_beat_constant"]
