"""Small-n black-box audit of the library's guarantee: neighbouring datasets of 3 and 4 rows.

The estimator promises (epsilon, delta)-DP under ``add-remove`` (n private,
:mod:`dpnewton.privacy.neighbouring`). At small n a noise scale computed from n is visible: a run on
D (n = 3) and on D' (n = 4) would use different scales. This audit fits the estimator's mechanism
many times on both datasets and lower-bounds epsilon from how well the released weight tells them
apart.

Pair (:func:`flipped_label_pair`): D = two rows x = (1, 0) with label 1 and one row x = (0, 1000)
with label 0; D' = D plus the flipped-label canary x = (1, 0) with label 0. Every fit sees the rows
the estimator builds, [x, 1] / data_norm with data_norm = 1, projected to the unit ball
(:func:`dpnewton.estimator._scaled_rows`, :meth:`LogisticProblem.from_xy`), and runs through
:func:`dpnewton.experiment.run_algorithm` with fresh OS entropy per fit, as ``random_state=None``
does. Statistic: -w_0, the negated weight of the canary's feature (the canary pushes it down).

Test (:func:`audit_small_n`): a pilot of ``pilot`` fits per side picks the threshold and direction
(:func:`.distinguisher.threshold_audit` on the pilot alone); a fresh evaluation of ``trials`` fits
per side applies it once, and its Clopper-Pearson counts give the reported 95 % lower bound
(:func:`.bounds.epsilon_lower_bound`), valid because the threshold was fixed before the evaluation.

Variants (:data:`SMALL_N_VARIANTS`): ``none`` is the estimator's mechanism; ``public-n`` the noise
calibrated with n public (the paper's ``add-remove-public-n``, the zCDP methods' former library
behaviour), which this pair must catch; ``overspend`` the mechanism run at 4 epsilon while
claiming epsilon, a break every mechanism has.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..experiment import run_algorithm
from ..loss import LogisticProblem
from ..privacy.neighbouring import BENCHMARK_RELATION, LIBRARY_RELATION
from .bounds import epsilon_lower_bound
from .distinguisher import threshold_audit

SMALL_N_VARIANTS = {"none": (LIBRARY_RELATION, 1.0), "public-n": (BENCHMARK_RELATION, 1.0),
                    "overspend": (LIBRARY_RELATION, 4.0)}
"""variant -> (relation the noise is calibrated for, factor on the epsilon actually spent)."""
EPSILON = 2.0
DELTA = 1e-5
ITERATIONS = 1
PILOT_THRESHOLDS = 4000   # candidate thresholds: pooled pilot quantiles, fine enough for the 0.1 % tails


def flipped_label_pair() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((X_D, y_D), (X_D', y_D')): 3 rows, and the same plus the flipped-label canary."""
    X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1000.0]])
    y = np.array([1, 1, 0])
    return (X, y), (np.vstack([X, [1.0, 0.0]]), np.append(y, 0))


def _problem(X: np.ndarray, y: np.ndarray) -> LogisticProblem:
    from ..estimator import _scaled_rows  # the estimator's rows, imported on use (estimator imports sklearn)

    return LogisticProblem.from_xy(_scaled_rows(X, True, 1.0), np.where(y == 1, 1.0, -1.0))


def released_statistics(algorithm: str, X: np.ndarray, y: np.ndarray, fits: int, variant: str = "none",
                        epsilon: float = EPSILON, delta: float = DELTA, first_seed: int | None = None,
                        chunk: int = 5000) -> np.ndarray:
    """-w_0 of ``fits`` independent fits of ``algorithm`` under ``variant``: fresh OS entropy each
    (``first_seed=None``, as the estimator's default), or seeds first_seed, first_seed + 1, ... (a
    replayable audit: every fit still has its own stream)."""
    relation, factor = SMALL_N_VARIANTS[variant]
    problem = _problem(X, y)
    out = []
    for start in range(0, fits, chunk):
        count = min(chunk, fits - start)
        seeds = [None] * count if first_seed is None else list(range(first_seed + start, first_seed + start + count))
        runs = run_algorithm(problem, "small-n-audit", algorithm, factor * epsilon, seeds, [ITERATIONS],
                             delta=delta, neighbouring=relation)
        out.extend(-float(r.w[0]) for r in runs)
    return np.asarray(out)


@dataclass
class SmallNOutcome:
    algorithm: str
    variant: str
    claimed_epsilon: float
    epsilon_lb: float          # 95 % lower bound from the evaluation fits
    threshold: float
    direction: str
    false_pos: int
    false_neg: int
    trials: int                # evaluation fits per side
    pilot: int                 # pilot fits per side (threshold selection only)

    @property
    def violates_claim(self) -> bool:
        return self.epsilon_lb > self.claimed_epsilon

    def as_dict(self) -> dict:
        return {**asdict(self), "violates_claim": self.violates_claim}


def audit_small_n(algorithm: str, variant: str = "none", trials: int = 30_000, pilot: int = 10_000,
                  epsilon: float = EPSILON, delta: float = DELTA, seed: int | None = None) -> SmallNOutcome:
    """The small-n audit of one estimator algorithm (module docstring). ``seed``: None draws every fit
    from fresh OS entropy; an integer makes the audit replayable (the four batches of fits get
    disjoint seed ranges from it)."""
    if variant not in SMALL_N_VARIANTS:
        raise ValueError(f"variant={variant!r} is unknown; choose one of {', '.join(SMALL_N_VARIANTS)}")
    (XD, yD), (XP, yP) = flipped_label_pair()
    block = max(trials, pilot)
    first = [None] * 4 if seed is None else [seed + k * block for k in range(4)]
    chosen = threshold_audit(released_statistics(algorithm, XD, yD, pilot, variant, epsilon, delta, first[0]),
                             released_statistics(algorithm, XP, yP, pilot, variant, epsilon, delta, first[1]),
                             delta, n_thresholds=PILOT_THRESHOLDS)
    neg = released_statistics(algorithm, XD, yD, trials, variant, epsilon, delta, first[2])
    pos = released_statistics(algorithm, XP, yP, trials, variant, epsilon, delta, first[3])
    fp, fn = int(np.sum(neg > chosen.threshold)), int(np.sum(pos <= chosen.threshold))
    bound = epsilon_lower_bound(fp, trials, fn, trials, delta, direction=chosen.direction)
    return SmallNOutcome(algorithm, variant, epsilon, float(bound), chosen.threshold, chosen.direction,
                         fp, fn, trials, pilot)


__all__ = ["SMALL_N_VARIANTS", "SmallNOutcome", "audit_small_n", "flipped_label_pair", "released_statistics"]
