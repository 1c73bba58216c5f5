"""Small-n audit of the library's guarantee: neighbouring datasets of 3 and 4 rows.

The estimator promises (epsilon, delta)-DP under ``add-remove`` (n private,
:mod:`dpnewton.privacy.neighbouring`). At small n a noise scale computed from n is visible: a run on
D (n = 3) and on D' (n = 4) would use different scales. This audit fits the estimator's mechanism
many times on both datasets and lower-bounds epsilon from how well a statistic of each fit tells
them apart.

Pair (:func:`flipped_label_pair`): D = two rows x = (1, 0) with label 1 and one row x = (0, 1000)
with label 0; D' = D plus the flipped-label canary x = (1, 0) with label 0. Every fit sees the rows
the estimator builds, [x, 1] / data_norm with data_norm = 1, projected to the unit ball (the estimator's
own problem, :func:`dpnewton.training_rows.signed_problems`, which reads X in place), and runs the production
optimizer with fresh OS entropy per fit, as ``random_state=None`` does.

Levels (:data:`LEVELS`), i.e. what the statistic sees:

``output``            the released weights w of :func:`dpnewton.experiment.run_algorithm`, random start;
                      statistic -w_0, the negated weight of the canary's feature (the canary pushes it down).
``likelihood-ratio``  log p_D'/p_D (:mod:`.small_n_releases`): of the releases of a run with its start
                      pinned (dp-gd, precond-dp-gd: count, curvature, first gradient), of the released
                      weights (objpert).

Test (:func:`audit_small_n`): a pilot of ``pilot`` fits per side picks the threshold and direction
(:func:`.distinguisher.threshold_audit` on the pilot alone); a fresh evaluation of ``trials`` fits
per side applies it once, and its Clopper-Pearson counts give the reported 95 % lower bound
(:func:`.bounds.epsilon_lower_bound`), valid because the threshold was fixed before the evaluation.

Variants (:data:`SMALL_N_VARIANTS`): ``none`` is the estimator's mechanism; ``public-n`` the noise
calibrated with n public (the paper's ``add-remove-public-n``, the zCDP methods' former library
behaviour); ``overspend`` the mechanism run at 4 epsilon while claiming epsilon, a break every
mechanism has.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..algorithms import get_algorithm
from ..experiment import run_algorithm
from ..loss import LogisticProblem
from ..privacy.neighbouring import BENCHMARK_RELATION, LIBRARY_RELATION
from ..training_rows import data_norm_map, signed_problems
from .bounds import epsilon_lower_bound
from .distinguisher import threshold_audit
from .small_n_releases import DATASET, objpert_log_ratios, release_log_ratios

SMALL_N_VARIANTS = {"none": (LIBRARY_RELATION, 1.0), "public-n": (BENCHMARK_RELATION, 1.0),
                    "overspend": (LIBRARY_RELATION, 4.0)}
"""variant -> (relation the noise is calibrated for, factor on the epsilon actually spent)."""
LEVELS = ("output", "likelihood-ratio")
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
    """The estimator's problem of (X, y) with data_norm = 1 (it reads X in place)."""
    return next(signed_problems(np.ascontiguousarray(X, dtype=np.float64), data_norm_map(X.shape[1], 1.0, True),
                                [np.where(y == 1, 1.0, -1.0)]))


def audit_pair() -> tuple[LogisticProblem, LogisticProblem]:
    """(D, D') of :func:`flipped_label_pair` as the estimator's problems."""
    (XD, yD), (XP, yP) = flipped_label_pair()
    return _problem(XD, yD), _problem(XP, yP)


def released_statistics(algorithm: str, side: int, fits: int, variant: str = "none", level: str = "output",
                        epsilon: float = EPSILON, delta: float = DELTA, first_seed: int | None = None,
                        chunk: int = 5000) -> np.ndarray:
    """The statistic of ``level`` for ``fits`` independent fits of ``algorithm`` under ``variant`` on
    D (``side`` 0) or D' (1): fresh OS entropy each (``first_seed=None``, as the estimator's default),
    or seeds first_seed, first_seed + 1, ... (a replayable audit: every fit still has its own stream)."""
    if level not in LEVELS:
        raise ValueError(f"level={level!r} is unknown; choose one of {', '.join(LEVELS)}")
    relation, factor = SMALL_N_VARIANTS[variant]
    pair = audit_pair()
    out = []
    for start in range(0, fits, chunk):
        count = min(chunk, fits - start)
        seeds = [None] * count if first_seed is None else list(range(first_seed + start, first_seed + start + count))
        if level == "likelihood-ratio" and get_algorithm(algorithm).iterative:   # releases; one-shot: weights
            out.append(release_log_ratios(algorithm, pair, side, seeds, relation, factor * epsilon, delta))
            continue
        runs = run_algorithm(pair[side], DATASET, algorithm, factor * epsilon, seeds, [ITERATIONS], delta=delta,
                             neighbouring=relation)
        W = np.stack([r.w for r in runs])
        out.append(-W[:, 0] if level == "output" else objpert_log_ratios(pair, W, factor * epsilon, delta, relation))
    return np.concatenate(out)


@dataclass
class SmallNOutcome:
    algorithm: str
    variant: str
    level: str
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


def audit_small_n(algorithm: str, variant: str = "none", level: str = "output", trials: int = 30_000,
                  pilot: int = 10_000, epsilon: float = EPSILON, delta: float = DELTA,
                  seed: int | None = None) -> SmallNOutcome:
    """The small-n audit of one estimator algorithm at one level (module docstring). ``seed``: None
    draws every fit from fresh OS entropy; an integer makes the audit replayable (the four batches of
    fits get disjoint seed ranges from it)."""
    if variant not in SMALL_N_VARIANTS:
        raise ValueError(f"variant={variant!r} is unknown; choose one of {', '.join(SMALL_N_VARIANTS)}")
    block = max(trials, pilot)
    first = [None] * 4 if seed is None else [seed + k * block for k in range(4)]

    def batch(side: int, fits: int, k: int) -> np.ndarray:
        return released_statistics(algorithm, side, fits, variant, level, epsilon, delta, first[k])

    chosen = threshold_audit(batch(0, pilot, 0), batch(1, pilot, 1), delta, n_thresholds=PILOT_THRESHOLDS)
    neg, pos = batch(0, trials, 2), batch(1, trials, 3)
    fp, fn = int(np.sum(neg > chosen.threshold)), int(np.sum(pos <= chosen.threshold))
    bound = epsilon_lower_bound(fp, trials, fn, trials, delta, direction=chosen.direction)
    return SmallNOutcome(algorithm, variant, level, epsilon, float(bound), chosen.threshold, chosen.direction,
                         fp, fn, trials, pilot)


__all__ = ["LEVELS", "SMALL_N_VARIANTS", "SmallNOutcome", "audit_pair", "audit_small_n", "flipped_label_pair",
           "released_statistics"]
