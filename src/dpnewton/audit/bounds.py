"""Clopper-Pearson bounds and the (epsilon, delta) lower bound implied by a distinguishing test.

A test that says "D'" on an event S has false-positive rate FPR = P_D(S) and false-negative rate
FNR = P_D'(not S). (epsilon, delta)-DP for both orders of the pair (D, D') implies

    1 - FNR <= e^eps FPR + delta      and      1 - FPR <= e^eps FNR + delta,

so eps >= log((1 - delta - FNR)/FPR) and eps >= log((1 - delta - FPR)/FNR). Replacing both rates
by one-sided Clopper-Pearson upper bounds that hold *jointly* with probability >= 1 - alpha (each
at level alpha/2, union bound) gives a lower bound on epsilon valid with confidence 1 - alpha.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..privacy.conversions import _gdp_epsilon


def clopper_pearson_upper(k, n, alpha: float = 0.05):
    """One-sided (1 - alpha) exact upper bound on a binomial proportion from k successes in n trials.

    Beta(1 - alpha; k + 1, n - k); equals 1 when k = n. Vectorised over k.
    """
    k = np.asarray(k, dtype=np.float64)
    if n <= 0:
        raise ValueError(f"n={n!r} must be >= 1")
    if np.any((k < 0) | (k > n)):
        raise ValueError(f"k must lie in [0, n={n}]")
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(1.0 - alpha, k + 1.0, np.maximum(n - k, 1e-300))
    out = np.where(k >= n, 1.0, out)
    return float(out) if out.ndim == 0 else out


def clopper_pearson_lower(k, n, alpha: float = 0.05):
    """One-sided (1 - alpha) exact lower bound Beta(alpha; k, n - k + 1) = 1 - upper(n - k); 0 at k = 0."""
    k = np.asarray(k, dtype=np.float64)
    return 1.0 - clopper_pearson_upper(n - k, n, alpha)


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided exact interval (each tail (1 - confidence)/2), as scipy's binomtest 'exact'."""
    a = 1.0 - confidence
    return clopper_pearson_lower(k, n, a / 2.0), clopper_pearson_upper(k, n, a / 2.0)


def _log_ratio(num, den):
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(num > 0, np.log(np.maximum(num, 1e-300)) - np.log(den), -np.inf)
    return out


def epsilon_lower_bound(false_pos, n_neg: int, false_neg, n_pos: int, delta: float,
                        alpha: float = 0.05, direction: str = "both"):
    """95% (for alpha = 0.05) lower bound on epsilon from counts of a fixed test.

    ``false_pos`` of ``n_neg`` trials on D said "D'"; ``false_neg`` of ``n_pos`` trials on D' said "D".
    ``direction``: "fpr" -> log((1-delta-FNR_u)/FPR_u), "fnr" -> log((1-delta-FPR_u)/FNR_u),
    "both" -> the max of the two. Both rates are bounded at alpha/2 (jointly valid at 1 - alpha).
    Returns 0 when no positive bound follows; vectorised over the counts.
    """
    if not 0 <= delta < 1:
        raise ValueError(f"delta={delta!r} must lie in [0, 1)")
    fpr_u = clopper_pearson_upper(false_pos, n_neg, alpha / 2.0)
    fnr_u = clopper_pearson_upper(false_neg, n_pos, alpha / 2.0)
    a = _log_ratio(1.0 - delta - fnr_u, fpr_u)
    b = _log_ratio(1.0 - delta - fpr_u, fnr_u)
    if direction == "fpr":
        out = a
    elif direction == "fnr":
        out = b
    elif direction == "both":
        out = np.maximum(a, b)
    else:
        raise ValueError(f"direction={direction!r} must be 'fpr', 'fnr' or 'both'")
    out = np.maximum(out, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def gaussian_epsilon_at_delta(mu: float, delta: float) -> float:
    """The exact epsilon(delta) of a mu-GDP mechanism (reference value for audits)."""
    return _gdp_epsilon(mu * mu / 2.0, delta) if mu > 0 else 0.0


__all__ = ["clopper_pearson_upper", "clopper_pearson_lower", "clopper_pearson_interval",
           "epsilon_lower_bound", "gaussian_epsilon_at_delta"]
