"""``dpnewton.fit``: train one private logistic-regression model on arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .algorithms.optimum import find_optimum
from .experiment import DEFAULT_CONVERSION, check_guarantee, result_record, run_algorithm
from .loss import LogisticProblem
from .privacy import PrivacyLedger
from .privacy.neighbouring import LIBRARY_RELATION, resolve_delta
from .privacy.release import released_ledger, released_record


DATASET_NAME = "user"
"""The dataset name of a seeded run on a user's arrays (part of its seed stream, :mod:`dpnewton.seeding`)."""

EVALUATION_FIELDS = ("excess_loss", "last_iterate_excess_loss", "train_accuracy", "runtime_s", "diverged")
"""What ``excess_loss=True`` adds to :attr:`FitResult.evaluation`: computed from the exact data."""


@dataclass
class FitResult:
    """``weights``, ``ledger`` and ``record`` are what a fit releases (:mod:`dpnewton.privacy.release`);
    ``evaluation`` is computed from the exact data (not private: never publish it with the model)."""

    weights: np.ndarray
    ledger: PrivacyLedger
    record: dict
    evaluation: dict = field(default_factory=dict)


def fit(X, y, algorithm: str, epsilon: float, delta: float | None = None, iterations: int = 10,
        seed: int | None = None, conversion: str = DEFAULT_CONVERSION, dataset: str = DATASET_NAME,
        excess_loss: bool = False, neighbouring: str = LIBRARY_RELATION, **hyper) -> FitResult:
    """Fit ``algorithm`` privately on (X, y), y in {-1, +1}; rows are projected to the unit ball.

    The weights are (epsilon, delta)-DP under ``neighbouring`` (default ``add-remove``: adding or
    removing one row, n private; :mod:`dpnewton.privacy.neighbouring`); delta=None means the
    relation's default (1e-10 under add-remove, n^-2 when n is public). Refused before any data:
    a conversion that can overspend and a protocol with a non-private part
    (:func:`dpnewton.experiment.check_guarantee`), e.g. ``reset=True``.

    Returns the weights (for the projected rows z_i = y_i x_i / max(1, ||x_i||), i.e. predict
    sign(<x, w>)), the released privacy ledger and record (epsilon, delta, conversion, rho where a zCDP
    budget is spent). ``seed=None`` (the default) draws the noise from fresh OS entropy; an integer
    seed makes it a public function of (dataset, algorithm, epsilon, seed, T), for benchmarking only
    (:mod:`dpnewton.seeding`). ``excess_loss=True`` computes the non-private optimum and fills
    ``evaluation`` (not private; evaluation only). :class:`dpnewton.DPLogisticRegression` is the
    estimator interface.
    """
    check_guarantee(algorithm, conversion, hyper)
    problem = LogisticProblem.from_xy(X, y, name=dataset)
    if excess_loss:
        opt = find_optimum(problem)
        problem.set_optimum(opt.w, opt.loss)
    (res,) = run_algorithm(problem, dataset, algorithm, epsilon, [seed], [iterations], delta=delta,
                           conversion=conversion, hyper=hyper, neighbouring=neighbouring)
    record = result_record(res, conversion, epsilon, resolve_delta(delta, neighbouring, problem.n))
    evaluation = {key: record[key] for key in EVALUATION_FIELDS} if excess_loss else {}
    return FitResult(res.w, released_ledger(res.ledger), released_record(record, res.ledger), evaluation)
