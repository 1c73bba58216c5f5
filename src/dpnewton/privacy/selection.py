"""Accounting of private selection with a random number of candidates (Papernot & Steinke 2022).

Source: N. Papernot and T. Steinke, "Hyperparameter Tuning with Renyi Differential Privacy",
ICLR 2022, arXiv:2110.03620 ("PS22"; theorem numbers of arXiv v2). The procedure A: draw the
number of candidates K from a distribution D chosen before any data is touched; run the base
mechanism Q (one candidate: a configuration drawn from a public grid, a private run, a private
score) K times independently; release only the best candidate's output, under a fixed total order
of Q's outputs (lowest noisy score first, ties broken deterministically). K itself and the losing
candidates stay secret: releasing them is not covered by the theorems below. If K = 0 (Poisson
only; the truncated negative binomial has K >= 1), A releases a fixed output that does not depend
on the data ("some arbitrary output independent from the input", PS22 Thm. 6); dpnewton's is
w = 0 with no configuration.

Distributions of K (PS22 Def. 1 and Sec. 3)
    * truncated negative binomial TNB(eta, gamma), eta in (-1, inf), gamma in (0, 1), support
      K >= 1: P[K = k] = (1 - gamma)^k / (gamma^-eta - 1) * prod_{l=0}^{k-1} (l + eta)/(l + 1)
      for eta != 0; eta = 0 is the logarithmic distribution P[K = k] = (1 - gamma)^k / (k log(1/gamma));
      eta = 1 is the geometric P[K = k] = gamma (1 - gamma)^(k-1).
      E[K] = eta (1 - gamma) / (gamma (1 - gamma^eta)) (eta != 0), (1/gamma - 1)/log(1/gamma) (eta = 0).
      Probability generating function f(x) = E[x^K] = ((1 - (1-gamma) x)^-eta - 1)/(gamma^-eta - 1),
      resp. log(1 - (1-gamma) x)/log(gamma).
    * Poisson(mu): P[K = k] = e^-mu mu^k / k!, E[K] = mu, f(x) = exp(mu (x - 1)).

RDP of the selection (Q is (lambda, eps(lambda))-RDP)
    * PS22 Theorem 2 (TNB): for lambda > 1 and any lambda_hat >= 1,
          eps'(lambda) = eps(lambda) + (1 + eta)(1 - 1/lambda_hat) eps(lambda_hat)
                         + (1 + eta) log(1/gamma)/lambda_hat + log(E[K])/(lambda - 1);
      we take the minimum over lambda_hat (any lambda_hat is valid). For a rho-zCDP candidate
      (eps(lambda) = lambda rho for every lambda) the minimum is closed-form:
      min_{lambda_hat >= 1} (lambda_hat - 1) rho + log(1/gamma)/lambda_hat
          = 2 sqrt(rho log(1/gamma)) - rho  at lambda_hat = sqrt(log(1/gamma)/rho) if that is >= 1,
          = log(1/gamma)                   at lambda_hat = 1 otherwise.
      (Corollaries: eta = 1, geometric, factor 2; eta = 0, logarithmic, factor 1.)
    * PS22 Theorem 6 (Poisson): if Q is also (eps_hat, delta_hat)-DP with
      e^eps_hat <= 1 + 1/(lambda - 1), then eps'(lambda) = eps(lambda) + mu delta_hat + log(mu)/(lambda - 1).
      We take eps_hat = log(1 + 1/(lambda - 1)) (the largest allowed) and for a rho-zCDP candidate
      delta_hat = min_{a > 1} exp((a - 1)(a rho - eps_hat)) (1 - 1/a)^(a - 1) / a (Canonne, Kamath &
      Steinke 2020, Prop. 12, the conversion ``cks`` of :mod:`.conversions`); the minimiser solves
      (2a - 1) rho + log(1 - 1/a) = eps_hat.
      The bound needs mu >= 1 (as dp-accounting requires): for mu < 1 log(mu)/(lambda - 1) < 0 and
      the bound can fall below the true divergence (tests/privacy/test_private_selection.py shows a case).
    Both statements agree with dp-accounting's ``RepeatAndSelectDpEvent`` (RDP accountant,
    ``_compute_rdp_repeat_and_select``), which the tests use as a cross-check on its order grid.

RDP to (epsilon, delta)
    epsilon = min_{lambda > 1} eps'(lambda) + [log(1/delta) + (lambda - 1) log(1 - 1/lambda)
    - log(lambda)]/(lambda - 1) (Canonne, Kamath & Steinke 2020, Prop. 12; the same conversion as
    ``dp_accounting.rdp.compute_epsilon``), minimised over a dense geometric grid of orders and
    then refined with a bounded scalar search (every order gives a valid bound, so the refinement
    can only tighten it). The order achieving it is recorded.

Calibration
    :func:`calibrate_candidate_rho` finds the per-candidate rho by bisection on log rho so that the
    whole procedure's epsilon equals the target at delta (to 1e-9 relative) and never exceeds it.
    Every candidate, score included, must be rho-zCDP: its optimizer gets (1 - score_frac) rho and
    its private score score_frac rho (:mod:`dpnewton.tuning`).

The exact verification: tests/privacy/test_private_selection.py enumerates the output distribution of the
whole selection over small discrete base mechanisms (randomized response, 3-output mechanisms)
and checks that the exact Renyi divergence never exceeds these bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import optimize, special

#: the names :func:`make_distribution` accepts (geometric and logarithmic are TNB with eta = 1 and 0)
DISTRIBUTIONS = ("poisson", "tnb", "geometric", "logarithmic")

#: orders lambda of the (epsilon, delta) conversion grid: 1 + 10^-5 .. 1 + 10^6
ORDERS = 1.0 + np.geomspace(1e-5, 1e6, 1500)
#: lambda_hat grid of the generic (non-zCDP) TNB bound, lambda_hat = 1 added separately
ORDERS_HAT = 1.0 + np.geomspace(1e-4, 1e5, 2000)


# ---------------------------------------------------------------------------------------------
# distributions of the number of candidates K
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoissonCount:
    """K ~ Poisson(mu); K = 0 releases the fixed, data-independent default."""

    mu: float

    def __post_init__(self):
        if not (isinstance(self.mu, (int, float, np.floating)) and math.isfinite(self.mu) and self.mu >= 1):
            raise ValueError(f"mu={self.mu!r} must be a finite number >= 1 (PS22 Thm. 6 needs "
                             "log(mu) >= 0; see the module docstring)")

    name = "poisson"

    @property
    def mean(self) -> float:
        return float(self.mu)

    @property
    def params(self) -> dict:
        return {"mu": float(self.mu)}

    def pmf(self, k) -> np.ndarray:
        k = np.asarray(k, dtype=float)
        return np.exp(-self.mu + k * math.log(self.mu) - special.gammaln(k + 1.0))

    def pgf(self, x) -> np.ndarray:
        return np.exp(self.mu * (np.asarray(x, dtype=float) - 1.0))

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.poisson(self.mu))


@dataclass(frozen=True)
class TruncatedNegativeBinomialCount:
    """K ~ TNB(eta, gamma) on {1, 2, ...} (PS22 Def. 1); eta = 1 geometric, eta = 0 logarithmic."""

    eta: float
    gamma: float

    def __post_init__(self):
        if not (isinstance(self.eta, (int, float, np.floating)) and math.isfinite(self.eta) and self.eta > -1):
            raise ValueError(f"eta={self.eta!r} must be a finite number > -1")
        if not (isinstance(self.gamma, (int, float, np.floating)) and 0 < self.gamma < 1):
            raise ValueError(f"gamma={self.gamma!r} must lie in the open interval (0, 1)")

    name = "tnb"

    @property
    def mean(self) -> float:
        eta, g = float(self.eta), float(self.gamma)
        if eta == 0.0:
            return (1.0 / g - 1.0) / math.log(1.0 / g)
        # eta (1 - g) / (g (1 - g^eta)), with 1 - g^eta = -expm1(eta log g)
        return eta * (1.0 - g) / (g * -math.expm1(eta * math.log(g)))

    @property
    def params(self) -> dict:
        return {"eta": float(self.eta), "gamma": float(self.gamma)}

    def pmf(self, k) -> np.ndarray:
        """P[K = k] for integer k >= 0 (0 at k = 0), from the product form of PS22 Def. 1."""
        k = np.atleast_1d(np.asarray(k, dtype=np.int64))
        top = int(k.max()) if k.size else 0
        out = np.zeros(top + 1)
        eta, g = float(self.eta), float(self.gamma)
        if top >= 1:
            ks = np.arange(1, top + 1, dtype=float)
            if eta == 0.0:
                out[1:] = np.exp(ks * math.log1p(-g) - np.log(ks) - math.log(math.log(1.0 / g)))
            else:
                # prod_{l<k} (l+eta)/(l+1) = eta * prod_{l=1}^{k-1} (l+eta)/(l+1); the first factor's
                # sign cancels that of gamma^-eta - 1 (both < 0 when eta < 0)
                rest = np.concatenate([[0.0], np.cumsum(np.log((ks[:-1] + eta) / (ks[:-1] + 1.0)))])
                norm = math.expm1(-eta * math.log(g))  # gamma^-eta - 1
                out[1:] = (eta / norm) * np.exp(ks * math.log1p(-g) + rest)
        return out[k]

    def pgf(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        eta, g = float(self.eta), float(self.gamma)
        base = 1.0 - (1.0 - g) * x
        if eta == 0.0:
            return np.log(base) / math.log(g)
        return np.expm1(-eta * np.log(base)) / math.expm1(-eta * math.log(g))

    def sample(self, rng: np.random.Generator) -> int:
        """Inverse-CDF draw from one uniform of ``rng`` (pmf by its recursion)."""
        u = rng.random()
        eta, g = float(self.eta), float(self.gamma)
        k = 1
        p = float(self.pmf(1)[0])
        cdf = p
        while cdf < u:
            p *= (1.0 - g) * (k + eta) / (k + 1.0) if eta != 0.0 else (1.0 - g) * k / (k + 1.0)
            k += 1
            cdf_new = cdf + p
            if cdf_new == cdf:  # rounding: the remaining tail is below float resolution
                break
            cdf = cdf_new
        return k


def tnb_with_mean(eta: float, mean: float) -> TruncatedNegativeBinomialCount:
    """The TNB(eta, gamma) whose E[K] is ``mean`` (> 1): gamma by bisection (E[K] decreases in gamma)."""
    if not (isinstance(mean, (int, float, np.floating)) and math.isfinite(mean) and mean > 1):
        raise ValueError(f"mean={mean!r} must be a finite number > 1")
    if float(eta) == 1.0:
        return TruncatedNegativeBinomialCount(1.0, 1.0 / float(mean))
    f = lambda lg: TruncatedNegativeBinomialCount(eta, math.exp(lg)).mean - mean  # noqa: E731
    lo, hi = math.log(1e-300), math.log1p(-1e-15)
    lg = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=1000)
    return TruncatedNegativeBinomialCount(float(eta), math.exp(lg))


def make_distribution(distribution: str, **params):
    """``"poisson"`` (mu) or ``"tnb"`` (eta with gamma or mean); ``"geometric"``/``"logarithmic"``
    are TNB with eta = 1 / 0."""
    if distribution == "poisson":
        return PoissonCount(float(params["mu"] if "mu" in params else params["mean"]))
    if distribution in ("tnb", "geometric", "logarithmic"):
        eta = {"geometric": 1.0, "logarithmic": 0.0}.get(distribution, params.get("eta"))
        if eta is None:
            raise ValueError("distribution='tnb' needs eta")
        if "gamma" in params:
            return TruncatedNegativeBinomialCount(float(eta), float(params["gamma"]))
        return tnb_with_mean(float(eta), float(params["mean"]))
    raise ValueError(f"distribution={distribution!r} is unknown; choose one of {', '.join(DISTRIBUTIONS)}")


# ---------------------------------------------------------------------------------------------
# RDP of the selection
# ---------------------------------------------------------------------------------------------
def tnb_constant_zcdp(rho: float, dist: TruncatedNegativeBinomialCount) -> tuple[float, float]:
    """(1 + eta) min_{lambda_hat >= 1} [(1 - 1/lambda_hat) lambda_hat rho + log(1/gamma)/lambda_hat]
    for a rho-zCDP candidate (closed form, module docstring), and the minimising lambda_hat."""
    log_inv_g = -math.log(dist.gamma)
    lam_hat = math.sqrt(log_inv_g / rho)
    if lam_hat >= 1.0:
        value = 2.0 * math.sqrt(rho * log_inv_g) - rho
    else:
        lam_hat, value = 1.0, log_inv_g
    return (1.0 + dist.eta) * value, lam_hat


def tnb_rdp_bound(rdp: Callable, orders, dist: TruncatedNegativeBinomialCount,
                  orders_hat=ORDERS_HAT) -> np.ndarray:
    """PS22 Thm. 2 for a base mechanism with RDP curve ``rdp`` (vectorised in the order), at each
    order of ``orders`` (> 1); the lambda_hat minimum runs over {1} and ``orders_hat``."""
    orders = np.asarray(orders, dtype=float)
    lh = np.asarray(orders_hat, dtype=float)
    log_inv_g = -math.log(dist.gamma)
    inner = min(log_inv_g, float(np.min((1.0 - 1.0 / lh) * rdp(lh) + log_inv_g / lh)))
    return rdp(orders) + (1.0 + dist.eta) * inner + math.log(dist.mean) / (orders - 1.0)


def poisson_rdp_bound(rdp: Callable, delta_of: Callable, orders, dist: PoissonCount) -> np.ndarray:
    """PS22 Thm. 6 for a base mechanism with RDP curve ``rdp`` that is (eps_hat, delta_of(eps_hat))-DP,
    with eps_hat = log(1 + 1/(lambda - 1)) at each order lambda of ``orders``."""
    orders = np.asarray(orders, dtype=float)
    eps_hat = np.log1p(1.0 / (orders - 1.0))
    d_hat = np.array([delta_of(float(e)) for e in eps_hat])
    return rdp(orders) + dist.mu * d_hat + math.log(dist.mu) / (orders - 1.0)


def zcdp_delta(rho: float, eps_hat: float) -> float:
    """delta of rho-zCDP at epsilon eps_hat: min_a exp((a-1)(a rho - eps_hat)) (1 - 1/a)^(a-1)/a
    [CKS20 Prop. 12], at the root a of (2a - 1) rho + log(1 - 1/a) = eps_hat; capped at 1."""
    f = lambda a: (2.0 * a - 1.0) * rho + math.log1p(-1.0 / a) - eps_hat  # noqa: E731
    hi = 2.0
    while f(hi) < 0:
        hi *= 2.0
    a = optimize.brentq(f, 1.0 + 1e-15, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    log_d = (a - 1.0) * (a * rho - eps_hat) + (a - 1.0) * math.log1p(-1.0 / a) - math.log(a)
    return min(1.0, math.exp(log_d))


def selection_rdp_zcdp(rho: float, dist, orders) -> np.ndarray:
    """eps'(lambda) of the selection over rho-zCDP candidates at each order (PS22 Thm. 2 / Thm. 6)."""
    orders = np.asarray(orders, dtype=float)
    if isinstance(dist, TruncatedNegativeBinomialCount):
        c, _ = tnb_constant_zcdp(rho, dist)
        return orders * rho + c + math.log(dist.mean) / (orders - 1.0)
    if isinstance(dist, PoissonCount):
        return poisson_rdp_bound(lambda o: np.asarray(o) * rho, lambda e: zcdp_delta(rho, e), orders, dist)
    raise TypeError(f"unknown distribution {dist!r}")


def rdp_to_epsilon_terms(orders, rdp, delta: float) -> np.ndarray:
    """epsilon at each order: rdp + [log(1/delta) + (lambda-1) log(1 - 1/lambda) - log lambda]/(lambda-1)
    [CKS20 Prop. 12], floored at 0."""
    orders = np.asarray(orders, dtype=float)
    am1 = orders - 1.0
    eps = np.asarray(rdp, dtype=float) + (math.log(1.0 / delta) + am1 * np.log1p(-1.0 / orders)
                                          - np.log(orders)) / am1
    return np.maximum(eps, 0.0)


def selection_epsilon(rho: float, dist, delta: float) -> tuple[float, float]:
    """(epsilon, order): the (epsilon, delta)-DP of the selection over rho-zCDP candidates."""
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho={rho!r} must be a finite number > 0")
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta!r} must lie in the open interval (0, 1)")
    poisson = isinstance(dist, PoissonCount)
    grid = ORDERS[::5] if poisson else ORDERS  # each Poisson order solves for delta_hat: coarser grid
    eps = rdp_to_epsilon_terms(grid, selection_rdp_zcdp(rho, dist, grid), delta)
    i = int(np.argmin(eps))
    best_eps, best_order = float(eps[i]), float(grid[i])
    # refine in log(lambda - 1) between the neighbouring grid points
    lo = math.log(grid[max(i - 1, 0)] - 1.0)
    hi = math.log(grid[min(i + 1, len(grid) - 1)] - 1.0)
    if hi > lo:
        g = lambda t: float(rdp_to_epsilon_terms([1.0 + math.exp(t)],  # noqa: E731
                                                  selection_rdp_zcdp(rho, dist, [1.0 + math.exp(t)]), delta)[0])
        res = optimize.minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
        if res.fun < best_eps:
            best_eps, best_order = float(res.fun), 1.0 + math.exp(float(res.x))
    return best_eps, best_order


# ---------------------------------------------------------------------------------------------
# calibration and the record
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SelectionAccounting:
    """Calibration of a private selection: the public part of its record."""

    distribution: str
    params: tuple[tuple[str, float], ...]
    expected_k: float
    candidate_rho: float
    target_epsilon: float
    delta: float
    epsilon: float            # the whole procedure's epsilon at delta (<= target_epsilon)
    order: float              # the RDP order lambda achieving it
    lambda_hat: float         # TNB: the minimising lambda_hat; Poisson: NaN
    eps_hat: float            # Poisson: eps_hat = log(1 + 1/(lambda - 1)) at the order; TNB: NaN
    delta_hat: float          # Poisson: delta_hat of a candidate at eps_hat; TNB: NaN
    theorem: str

    def dp_event(self):
        """``RepeatAndSelectDpEvent(GaussianDpEvent(1/sqrt(2 rho)), E[K], shape)``: dp-accounting's
        event for the same selection (shape eta for TNB, inf for Poisson). A rho-zCDP candidate made
        of Gaussian releases has the RDP curve lambda rho of one Gaussian with multiplier
        1/sqrt(2 rho). dp-accounting supports shape >= 0 only: eta < 0 gives ``UnsupportedDpEvent``."""
        import dp_accounting  # imported on use: dp_accounting costs ~0.4 s at start-up
        from dp_accounting import dp_event

        shape = math.inf if self.distribution == "poisson" else float(dict(self.params)["eta"])
        if shape < 0:
            return dp_accounting.UnsupportedDpEvent()
        base = dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * self.candidate_rho))
        return dp_event.RepeatAndSelectDpEvent(base, float(self.expected_k), shape)

    def as_dict(self) -> dict:
        return {"distribution": self.distribution, **dict(self.params), "expected_k": self.expected_k,
                "candidate_rho": self.candidate_rho, "target_epsilon": self.target_epsilon,
                "delta": self.delta, "epsilon": self.epsilon, "order": self.order,
                "lambda_hat": self.lambda_hat, "eps_hat": self.eps_hat, "delta_hat": self.delta_hat,
                "theorem": self.theorem}


def accounting_record(rho: float, dist, delta: float, target_epsilon: float) -> SelectionAccounting:
    eps, order = selection_epsilon(rho, dist, delta)
    if isinstance(dist, TruncatedNegativeBinomialCount):
        _, lam_hat = tnb_constant_zcdp(rho, dist)
        eps_hat = d_hat = float("nan")
        theorem = "Papernot & Steinke 2022, Theorem 2 (truncated negative binomial)"
    else:
        lam_hat = float("nan")
        eps_hat = math.log1p(1.0 / (order - 1.0))
        d_hat = zcdp_delta(rho, eps_hat)
        theorem = "Papernot & Steinke 2022, Theorem 6 (Poisson)"
    return SelectionAccounting(dist.name, tuple(dist.params.items()), dist.mean, float(rho),
                               float(target_epsilon), float(delta), eps, order, lam_hat, eps_hat, d_hat,
                               theorem + "; RDP -> (epsilon, delta): Canonne, Kamath & Steinke 2020, Prop. 12")


def calibrate_candidate_rho(epsilon: float, delta: float, dist) -> SelectionAccounting:
    """Largest per-candidate rho (to 1e-10 relative) whose selection is (epsilon, delta)-DP."""
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon={epsilon!r} must be a finite number > 0")
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta!r} must lie in the open interval (0, 1)")
    f = lambda r: selection_epsilon(r, dist, delta)[0]  # noqa: E731
    lo, hi = 1e-8 * epsilon, float(epsilon)
    while f(lo) > epsilon:
        lo /= 100.0
        if lo < 1e-300:
            raise ValueError(f"no per-candidate rho meets epsilon={epsilon!r} at delta={delta!r}")
    while f(hi) <= epsilon:
        lo, hi = hi, hi * 2.0
    # invariant: f(lo) <= epsilon < f(hi)
    while hi / lo - 1.0 > 1e-10:
        mid = math.sqrt(lo * hi)
        if f(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
    return accounting_record(lo, dist, delta, epsilon)
