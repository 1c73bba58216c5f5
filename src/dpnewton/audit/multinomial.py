"""Black-box audit of the private softmax fit for K > 2 classes (:func:`dpnewton.multinomial.fit_multinomial`).

    python -m dpnewton.audit.multinomial [--trials 5000] [--pilot 5000] [--K 3] [--method gd bohning] [--out CSV]

Relation ``add-remove`` (n private), the library's. Pair (:func:`multinomial_pair`): D = n zero rows
(each class in turn; a zero row adds nothing to the gradient sum or the Gram matrix), D' = D plus the canary
row z_c = u = e_1 of class K - 1, the only row away from the origin. delta = 1/n^2, as the optimizers' audit
(:func:`.canaries.canary_pair`).

The fit runs through the public function, as a user calls it (T = 1, one generator per fit, both
methods): ``gd``: W = C_K(-2 G~/N) with G~ = (s - e_{K-1}) u^T + N(0, s_g^2) on D' and the noise alone on
D, N the released count; ``bohning`` (the default method): the same step times P^-1 of the released Gram
matrix (u u^T on D', 0 on D). Statistic (:func:`softmax_statistic`): <W, (e_{K-1} - 1/K) u^T>, the
canary's direction, larger on D'. At W = 0 the softmax is uniform, so the canary's gradient has Frobenius
norm ||1/K - e_{K-1}|| = sqrt((K - 1)/K), a share f = sqrt((K - 1)/(2K)) of the bound sqrt(2) the noise is
calibrated to (:func:`attained_fraction`), while the count and the Gram release see their full
sensitivity 1. The releases of a fit on this pair are thus a Gaussian shift of
mu_releases = sqrt(2 (rho_count + rho_gram + rho_g f^2))/c (:func:`releases_mu`), which bounds what any
statistic of the output can see (post-processing): a correct fit stays below its claim sqrt(2 rho) with
room, and a variant is caught only if it cuts the noise by more than that margin.

Variants (:data:`MULTINOMIAL_VARIANTS`): the fit run at the budget rho/c^2 while epsilon is claimed, which
multiplies every noise scale of the fit (count and gradients) by c (all are sensitivity/sqrt(2 rho_i) with
rho_i fixed shares of rho): ``none`` (c = 1); ``per-class-noise`` (c = 1/sqrt(K): one class's noise for the
whole K x p release; at T = 1 it exactly cancels the attained fraction for K = 3, so it is *not* detectable
with this canary, reported as such); ``wrong-sensitivity`` (c = 1/4, the audit's gradient mistake,
:func:`.variants.noise_factor`); ``tenth-noise`` (c = 1/10).

Test: a pilot of ``pilot`` fits per side chooses the threshold and direction of the (epsilon, delta) test
(:func:`.distinguisher.threshold_audit`) and the threshold of the mu-GDP test (:func:`.gdp.gdp_audit`);
fresh evaluation fits (``trials`` per side, disjoint seeds) are counted once at those pre-registered
thresholds: a 95 % Clopper-Pearson lower bound on epsilon and a 95 % lower bound on mu with its epsilon
at delta (:mod:`.gdp`; the fit is a composition of Gaussian mechanisms, so its claim is mu = sqrt(2 rho)-GDP
with the ``gdp`` conversion).
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..algorithms.precond import PRECOND_FRAC
from ..io import atomic_path
from ..multinomial import check_method, fit_multinomial
from ..privacy.conversions import epsilon_to_rho, rho_to_epsilon
from ..privacy.neighbouring import count_rho
from .bounds import epsilon_lower_bound, gaussian_epsilon_at_delta
from .distinguisher import threshold_audit
from .gdp import gdp_audit, gdp_mu_lower_bound
from .small_n import PILOT_THRESHOLDS

CONVERSION = "gdp"
ITERATIONS = 1


_FACTORS = {"none": lambda K: 1.0, "per-class-noise": lambda K: 1.0 / math.sqrt(K),
            "wrong-sensitivity": lambda K: 0.25, "tenth-noise": lambda K: 0.1}
MULTINOMIAL_VARIANTS = tuple(_FACTORS)


def variant_factor(variant: str, K: int) -> float:
    """The factor c a variant applies to every noise scale of the fit (module docstring)."""
    if variant not in _FACTORS:
        raise ValueError(f"variant={variant!r} is unknown; choose one of {', '.join(_FACTORS)}")
    return _FACTORS[variant](K)


def attained_fraction(K: int) -> float:
    """||1/K - e_y|| / sqrt(2) = sqrt((K - 1)/(2K)): the canary's gradient at the uniform softmax, as a
    share of the sensitivity sqrt(2)."""
    return math.sqrt((K - 1) / (2.0 * K))


def releases_mu(rho: float, K: int, method: str, factor: float = 1.0) -> float:
    """mu of a T = 1 fit's releases on :func:`multinomial_pair` with every noise scale x ``factor``: the count
    (shift 1 of sensitivity 1), the Gram matrix for ``bohning`` (u u^T, 1 of 1) and the gradient (f sqrt(2)
    of sqrt(2)), composed: sqrt(2 (rho_count + rho_gram + rho_g f^2))/factor (the rho split of
    :func:`~dpnewton.multinomial.fit_multinomial`)."""
    rho_count = count_rho(rho)
    rho_gram = PRECOND_FRAC * (rho - rho_count) if check_method(method) == "bohning" else 0.0
    rho_g = rho - rho_count - rho_gram
    return math.sqrt(2.0 * (rho_count + rho_gram + rho_g * attained_fraction(K) ** 2)) / factor


def multinomial_pair(n: int = 50, d: int = 2, K: int = 3) -> tuple[tuple[np.ndarray, np.ndarray],
                                                                    tuple[np.ndarray, np.ndarray]]:
    """((Z_D, y_D), (Z_D', y_D')): n zero rows labelled 0, 1, ..., K - 1 in turn; D' adds u = e_1 of class K - 1."""
    if n < 2 or d < 1 or K < 3:
        raise ValueError(f"need n >= 2, d >= 1 and K >= 3 (the binary fit has its own audit); got {n}, {d}, {K}")
    Z, y = np.zeros((n, d)), np.arange(n) % K
    u = np.zeros(d)
    u[0] = 1.0
    return (Z, y), (np.vstack([Z, u]), np.append(y, K - 1))


def softmax_statistic(W: np.ndarray, K: int) -> float:
    """<W, (e_{K-1} - 1/K) u^T> with u = e_1: the canary pushes W's column 1 towards class K - 1."""
    direction = np.full(K, -1.0 / K)
    direction[-1] += 1.0
    return float(direction @ W[:, 0])


def fit_statistics(side: int, fits: int, first_seed: int, variant: str = "none", epsilon: float = 3.0,
                   n: int = 50, d: int = 2, K: int = 3, method: str = "gd") -> np.ndarray:
    """The statistic of ``fits`` production fits on D (``side`` 0) or D' (1), fit i drawing from
    default_rng([first_seed + i, side]) (a replayable audit, every fit its own stream), at the variant's budget."""
    Z, y = multinomial_pair(n, d, K)[side]
    delta = 1.0 / n**2
    rho = epsilon_to_rho(epsilon, delta, CONVERSION) / variant_factor(variant, K) ** 2
    spent = rho_to_epsilon(rho, delta, CONVERSION)
    out = np.empty(fits)
    for i in range(fits):
        W, _, _ = fit_multinomial(Z, y, K, spent, delta, np.random.default_rng([first_seed + i, side]),
                                  method=method, iterations=ITERATIONS, conversion=CONVERSION)
        out[i] = softmax_statistic(W, K)
    return out


@dataclass
class MultinomialOutcome:
    mechanism: str
    variant: str
    K: int
    n: int
    claimed_epsilon: float
    delta: float
    epsilon_lb: float          # 95 % (epsilon, delta) lower bound from the evaluation fits
    mu_claimed: float          # sqrt(2 rho) of the claim
    mu_releases: float         # mu of the fit's releases on this pair (:func:`releases_mu`)
    mu_lb: float               # 95 % mu-GDP lower bound from the evaluation fits
    epsilon_lb_gdp: float      # epsilon(delta) of mu_lb-GDP
    false_pos: int
    false_neg: int
    trials: int                # evaluation fits per side
    pilot: int                 # pilot fits per side (threshold selection only)

    @property
    def violates_claim(self) -> bool:
        return self.epsilon_lb > self.claimed_epsilon or self.mu_lb > self.mu_claimed

    def as_dict(self) -> dict:
        return {**asdict(self), "violates_claim": self.violates_claim}


def audit_multinomial(variant: str = "none", trials: int = 5000, pilot: int = 5000, epsilon: float = 3.0,
                      n: int = 50, d: int = 2, K: int = 3, seed: int = 0, method: str = "gd") -> MultinomialOutcome:
    """Pilot fits pre-register the thresholds, fresh evaluation fits give the 95 % lower bounds (module docstring)."""
    delta = 1.0 / n**2
    block = max(trials, pilot)

    def batch(side: int, fits: int, k: int) -> np.ndarray:
        return fit_statistics(side, fits, seed + k * block, variant, epsilon, n, d, K, method)

    pilot_neg, pilot_pos = batch(0, pilot, 0), batch(1, pilot, 1)
    chosen = threshold_audit(pilot_neg, pilot_pos, delta, n_thresholds=PILOT_THRESHOLDS)
    gdp_tau = gdp_audit(pilot_neg, pilot_pos, delta, n_thresholds=PILOT_THRESHOLDS).threshold
    neg, pos = batch(0, trials, 2), batch(1, trials, 3)
    fp, fn = int(np.sum(neg > chosen.threshold)), int(np.sum(pos <= chosen.threshold))
    bound = epsilon_lower_bound(fp, trials, fn, trials, delta, direction=chosen.direction)
    mu_lb = gdp_mu_lower_bound(int(np.sum(neg > gdp_tau)), trials, int(np.sum(pos <= gdp_tau)), trials)
    rho = epsilon_to_rho(epsilon, delta, CONVERSION)
    mu_releases = releases_mu(rho, K, method, variant_factor(variant, K))
    return MultinomialOutcome(f"softmax-{method}", variant, K, n, float(epsilon), delta, float(bound),
                              math.sqrt(2.0 * rho), mu_releases, float(mu_lb), gaussian_epsilon_at_delta(mu_lb, delta),
                              fp, fn, trials, pilot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--pilot", type=int, default=5000)
    parser.add_argument("--K", type=int, default=3)
    parser.add_argument("--method", nargs="+", default=["gd", "bohning"])
    parser.add_argument("--out", type=Path, default=None, help="write the rows as CSV (atomically)")
    args = parser.parse_args()
    rows = []
    for method in args.method:
        for variant in MULTINOMIAL_VARIANTS:
            rows.append(audit_multinomial(variant, args.trials, args.pilot, K=args.K, method=method).as_dict())
            print(rows[-1], flush=True)
    if args.out is not None:
        with atomic_path(args.out, suffix=".csv") as tmp, open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()


__all__ = ["MULTINOMIAL_VARIANTS", "MultinomialOutcome", "attained_fraction", "audit_multinomial",
           "fit_statistics", "multinomial_pair", "releases_mu", "softmax_statistic", "variant_factor"]
