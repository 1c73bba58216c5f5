"""Gaussian-DP-shaped audit: a mu-GDP lower bound from one threshold test's error rates.

Source: J. Dong, A. Roth, W. Su, *Gaussian Differential Privacy*, JRSS B 2022 (arXiv:1905.02383).
A mechanism is mu-GDP when every test of D against D' has type II error beta >= G_mu(alpha) =
Phi(Phi^-1(1 - alpha) - mu) at type I error alpha (f-DP with f = G_mu), i.e.

    mu >= Phi^-1(1 - alpha) - Phi^-1(beta).

The right side falls as alpha or beta grows, so one-sided Clopper-Pearson upper bounds on the false-positive
rate alpha and the false-negative rate beta, each at level a/2 (jointly valid at 1 - a by the union bound),
give a lower bound mu_lb on the mu of any mu-GDP guarantee the mechanism can have, with confidence 1 - a.
G_mu is symmetric, so swapping the roles of D and D' gives the same bound. epsilon_lb = epsilon(delta) of
mu_lb-GDP (their Cor. 2.13; :func:`.bounds.gaussian_epsilon_at_delta`), to be read beside the (epsilon,
delta) bounds of :mod:`.bounds`.

Scope: the bound refutes a *Gaussian* claim. It applies to the mechanisms whose claim is mu-GDP: the
zCDP-planned methods, whose releases are Gaussian mechanisms, adaptively composed (mu = sqrt(2 rho),
their Cor. 3.3 with mu_i = Delta_i/sigma_i = sqrt(2 rho_i)), converted to (epsilon, delta) by the exact GDP
conversion. For a mechanism whose trade-off curve is not Gaussian (Poisson subsampling, objective
perturbation) epsilon_lb is not a valid (epsilon, delta) lower bound, and none is reported.

Why tighter than tail counting at the same number of fits: the (epsilon, delta) bound of :mod:`.bounds` needs a
threshold deep in a tail (epsilon ~ log((1 - beta)/alpha) grows only while alpha is small), where few trials
fall and the Clopper-Pearson margin is wide; a Gaussian trade-off curve is pinned by any one point, so the
threshold can sit where alpha and beta are both moderate and tightly estimated, and the GDP conversion
supplies the tail.

The threshold is pre-registered: chosen on one half of each side's trials (the best mu_lb over quantile
thresholds), then counted once on the other half, as in :mod:`.distinguisher`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from .bounds import clopper_pearson_upper, gaussian_epsilon_at_delta
from .distinguisher import _counts, _halves


def gdp_mu_lower_bound(false_pos, n_neg: int, false_neg, n_pos: int, alpha: float = 0.05):
    """(1 - alpha) lower bound on mu from a test's counts: Phi^-1(1 - FPR_u) - Phi^-1(FNR_u), both rates
    one-sided Clopper-Pearson upper bounds at alpha/2; floored at 0. Vectorised over the counts."""
    fpr_u = clopper_pearson_upper(false_pos, n_neg, alpha / 2.0)
    fnr_u = clopper_pearson_upper(false_neg, n_pos, alpha / 2.0)
    with np.errstate(divide="ignore"):
        mu = stats.norm.isf(fpr_u) - stats.norm.ppf(fnr_u)
    mu = np.maximum(np.nan_to_num(mu, nan=0.0, neginf=0.0), 0.0)
    return float(mu) if np.ndim(mu) == 0 else mu


@dataclass
class GdpOutcome:
    mu_lb: float                 # (1 - alpha) lower bound on mu from the evaluation half
    epsilon_lb: float            # epsilon(delta) of mu_lb-GDP
    threshold: float
    false_pos: int               # evaluation half: trials on D with statistic > threshold
    n_neg: int
    false_neg: int               # evaluation half: trials on D' with statistic <= threshold
    n_pos: int

    def as_dict(self) -> dict:
        return asdict(self)


def gdp_audit(stat_neg: np.ndarray, stat_pos: np.ndarray, delta: float, alpha: float = 0.05,
              rng: np.random.Generator | None = None, n_thresholds: int = 400) -> GdpOutcome:
    """mu-GDP and epsilon(delta) lower bounds from statistics on D (``stat_neg``) and D' (``stat_pos``),
    larger on D' in expectation; the threshold is chosen on half of each side and counted on the other."""
    sel_neg, ev_neg, sel_pos, ev_pos = _halves(stat_neg, stat_pos, rng)
    taus = np.unique(np.quantile(np.concatenate([sel_neg, sel_pos]), np.linspace(0.0, 1.0, n_thresholds)))
    fp, fn = _counts(sel_neg, sel_pos, taus)
    tau = float(taus[int(np.argmax(gdp_mu_lower_bound(fp, sel_neg.size, fn, sel_pos.size, alpha)))])
    fp_e, fn_e = (int(c[0]) for c in _counts(ev_neg, ev_pos, np.array([tau])))
    mu = gdp_mu_lower_bound(fp_e, ev_neg.size, fn_e, ev_pos.size, alpha)
    return GdpOutcome(mu, gaussian_epsilon_at_delta(mu, delta), tau, fp_e, int(ev_neg.size), fn_e, int(ev_pos.size))


__all__ = ["GdpOutcome", "gdp_audit", "gdp_mu_lower_bound"]
