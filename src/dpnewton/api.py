"""``dpnewton.fit``: train one private logistic-regression model on arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .algorithms import RunResult
from .algorithms.optimum import find_optimum
from .experiment import DEFAULT_CONVERSION, result_record, run_algorithm
from .loss import LogisticProblem
from .privacy import PrivacyLedger
from .privacy.neighbouring import LIBRARY_RELATION, resolve_delta


DATASET_NAME = "user"
"""The dataset name of a seeded run on a user's arrays (part of its seed stream, :mod:`dpnewton.seeding`)."""


@dataclass
class FitResult:
    weights: np.ndarray
    ledger: PrivacyLedger
    record: dict
    run: RunResult


def fit(X, y, algorithm: str, epsilon: float, delta: float | None = None, iterations: int = 10,
        seed: int | None = None, conversion: str = DEFAULT_CONVERSION, dataset: str = DATASET_NAME,
        excess_loss: bool = True, neighbouring: str = LIBRARY_RELATION, **hyper) -> FitResult:
    """Fit ``algorithm`` privately on (X, y), y in {-1, +1}; rows are projected to the unit ball.

    The weights are (epsilon, delta)-DP under ``neighbouring`` (default ``add-remove``: adding or
    removing one row, n private; :mod:`dpnewton.privacy.neighbouring`); delta=None means the
    relation's default (1e-5 under add-remove, n^-2 when n is public).

    Returns the weights (for the projected rows z_i = y_i x_i / max(1, ||x_i||), i.e. predict
    sign(<x, w>)), the privacy ledger and a record with epsilon, delta, rho and the conversion.
    ``seed=None`` (the default) draws the noise from fresh OS entropy; an integer seed makes it a
    public function of (dataset, algorithm, epsilon, seed, T), for benchmarking only
    (:mod:`dpnewton.seeding`). With ``excess_loss=True`` the non-private optimum is computed (not
    private; evaluation only). :class:`dpnewton.DPLogisticRegression` is the estimator interface.
    """
    problem = LogisticProblem.from_xy(X, y, name=dataset)
    if excess_loss:
        opt = find_optimum(problem)
        problem.set_optimum(opt.w, opt.loss)
    (res,) = run_algorithm(problem, dataset, algorithm, epsilon, [seed], [iterations], delta=delta,
                           conversion=conversion, hyper=hyper, neighbouring=neighbouring)
    delta_used = resolve_delta(delta, neighbouring, problem.n)
    return FitResult(res.w, res.ledger, result_record(res, conversion, epsilon, delta_used), res)
