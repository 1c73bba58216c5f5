"""Units of the cost models on the algorithm cards, in gradient passes over Z.

One gradient pass (margins Z w and Z^T r: one DP-GD update) = 1; a Gram pass Z^T diag(c) Z costs
:func:`gram` = GRAM_PER_D x d passes; a d x d eigendecomposition :func:`eigh` = EIGH_PER_D2_OVER_N x
d^2 / n passes. The constants are measured in benchmarks/pass_costs.py (benchmarks/results/pass_costs.md;
numpy 2.4 / OpenBLAS 0.3.30, one thread, x86_64; per-element fits t = a n d, b n d^2, c d^3, medians over
six shapes, within a factor ~2-3 of each shape's own ratio). A card's model is an estimate, not a
measurement: BLAS efficiency depends on the shape, and a fused pass can be cheaper than its parts.
"""

from __future__ import annotations

import math

GRAM_PER_D = 0.131
EIGH_PER_D2_OVER_N = 2.166


def gram(d: int) -> float:
    """Passes of one Gram pass Z^T diag(c) Z."""
    return GRAM_PER_D * d


def eigh(n: int, d: int) -> float:
    """Passes of one d x d eigendecomposition (or Cholesky factorisation, counted as one: an upper bound)."""
    return EIGH_PER_D2_OVER_N * d * d / n


def batch_fraction(size, n: int, frac: float) -> float:
    """Expected batch / n: ``size`` / n (capped at 1) when a batch size is given, else ``frac``."""
    return min(1.0, float(size) / n) if size is not None else float(frac)


def solve_passes(steps, n: int, d: int) -> float:
    """Passes of a one-shot Newton solve (:func:`dpnewton.algorithms.aop.minimize_objective`) of k steps:
    k + 1 fused gradient-and-Hessian passes (1 + G each: one at the start and one per iterate), k d x d
    Cholesky factorisations (counted as an eigh E each, an upper bound) and the final gradient check (1):
    (k + 1)(1 + G) + k E + 1. The damped phase's line search evaluates the loss (half a pass each) a
    number of times that the run does not record: not counted. NaN for missing steps (None, NaN, NA)."""
    try:
        k = float(steps)
    except (TypeError, ValueError):
        return float("nan")
    if math.isnan(k):
        return k
    return (k + 1.0) * (1.0 + gram(d)) + k * eigh(n, d) + 1.0
