"""The backtracking line search on the exact loss, shared by DP-GD-Oracle and damped Newton.

Rule (the official code's ``backtracking_ls``, V1/V2 ``gd_priv_optls``; docs/algorithms.md §3.2, and
§4.1 for damped Newton's V1 ``step_rule=line-search``): along a direction p from w, with
phi(t) = l(w - t p) + (reg/2)||w - t p||^2 (the regularised exact loss) and slope = <p, grad>,
accept the first t_k = 100 * 0.95^k (k = 0, 1, ...) with

    phi(t_k) < phi(0) - 0.4 t_k slope         (Armijo constant 0.4)

while t_k >= 1e-6; if none passes, the first t_k below the floor 1e-6. The step uses the exact
loss, so it is **not private**: both callers mark their runs non-private in the ledger.

:func:`armijo_step` returns exactly that scan's step with O(log K) evaluations of phi (bisection
over the K = 360 candidates); :func:`ridge_line` builds phi in O(n) per trial from the margins
m = Z w and Z p.
"""

from __future__ import annotations

import numpy as np

from ..loss import LogisticProblem

ARMIJO_START, ARMIJO_SHRINK, ARMIJO_ALPHA, ARMIJO_FLOOR = 100.0, 0.95, 0.4, 1e-6


def _armijo_candidates() -> tuple[float, ...]:
    """The official scan's trial steps t_k = 100 * 0.95^k (by repeated multiplication, as the scan
    computes them) while t_k >= 1e-6, followed by the first t below the floor (the scan's result when
    no t_k passes)."""
    ts = [ARMIJO_START]
    while ts[-1] >= ARMIJO_FLOOR:
        ts.append(ts[-1] * ARMIJO_SHRINK)
    return tuple(ts)


ARMIJO_CANDIDATES = _armijo_candidates()


def armijo_step(phi, phi0: float, slope: float) -> float:
    """Official backtracking: the first t_k = 100 * 0.95^k with phi(t_k) < phi0 - 0.4 t_k slope
    (module docstring); the first t below the floor 1e-6 if none passes.

    phi(t) = l(w - t p) is convex in t (logistic loss plus ridge along a line), so
    h(t) = phi(t) - phi0 + 0.4 t slope is convex with h(0) = 0 and h'(0) = -0.6 slope: the t that
    pass form an interval (0, t*) (empty if slope <= 0). The first passing t_k of the decreasing scan
    is therefore found by bisection over k with O(log K) evaluations of phi instead of O(K).
    """
    cands = ARMIJO_CANDIDATES

    def passes(k: int) -> bool:
        return phi(cands[k]) < phi0 - ARMIJO_ALPHA * cands[k] * slope

    last = len(cands) - 2  # the smallest candidate above the floor
    if passes(0):
        return cands[0]
    if not passes(last):
        return cands[-1]
    lo, hi = 0, last  # passes(lo) is False, passes(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return cands[hi]


def ridge_line(problem: LogisticProblem, m: np.ndarray, zp: np.ndarray, w: np.ndarray, p: np.ndarray,
               reg: float):
    """phi(t) = l(w - t p) + (reg/2)||w - t p||^2 from m = Z w and zp = Z p, O(n) per evaluation."""
    wn2, wp, pp = w @ w, w @ p, p @ p

    def phi(t):
        return float(problem.loss_from_margins(m - t * zp)) + 0.5 * reg * (wn2 - 2 * t * wp + t * t * pp)

    return phi
