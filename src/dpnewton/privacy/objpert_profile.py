"""Privacy profile of objective perturbation for GLMs, and its calibration [docs/algorithms.md §15].

Source: R. Redberg, A. Koskela and Y.-X. Wang, *Improving the Privacy and Practicality of Objective
Perturbation for Differentially Private Linear Learners*, NeurIPS 2023, arXiv:2401.00583 (their
privacy-profile analysis of objective perturbation). Written out here in this package's notation.

Mechanism (sum form; the package solves the equivalent mean form, see :mod:`dpnewton.algorithms.objpert`):

    theta^(D, b) = argmin_theta  sum_{z in D} l(<z, theta>) + (lam/2) ||theta||^2 + <b, theta>,   b ~ N(0, sigma^2 I_d)

with a GLM loss l: |l'| <= L, 0 <= l'' <= beta, rows ||z|| <= 1, neighbours D' = D + {z} (add/remove one).

Derivation. theta^ is the unique zero of the gradient, so b = b_D(theta) := -sum_D l'(<z_i, theta>) z_i - lam theta
is a bijection with Jacobian -(H_D(theta) + lam I), H_D = sum_D l'' z_i z_i^T >= 0, and the density of theta^ is
p_D(theta) = phi_sigma(b_D(theta)) det(H_D(theta) + lam I). For D' = D + {z}:

* b_D'(theta) = b_D(theta) - v(theta) with v = l'(<z, theta>) z = s z, |s| <= L: the shift always points along
  the fixed vector z, only its signed length s (with ||s z|| <= L) depends on theta;
* det(H_D' + lam I)/det(H_D + lam I) = 1 + l'' z^T (H_D + lam I)^-1 z, in [1, 1 + beta/lam].

Privacy loss of the pair (D', D), evaluated under theta ~ p_D' (so b' = b_D'(theta) ~ N(0, sigma^2 I)),
with g = <b', z>/(sigma ||z||) ~ N(0, 1) and a = s ||z||/sigma in [-mu, mu], mu = L/sigma:

    log p_D'/p_D = log(1 + l'' z^T (H_D + lam I)^-1 z) + (||b' + s z||^2 - ||b'||^2)/(2 sigma^2)
                 <= eps0 + a^2/2 + a g <= eps0 + mu^2/2 + mu |g|,       eps0 = log(1 + beta/lam)

(a^2/2 + a g is convex in a, so its maximum over [-mu, mu] sits at an end). For the pair (D, D') the Jacobian
term is <= 0 and the same bound holds without eps0. The hockey-stick divergence is exactly
delta(eps) = E_P[(1 - exp(eps - X))_+] for the privacy loss X under P, and (1 - e^(eps - x))_+ is non-decreasing
in x, so the pointwise bound X <= U := eps0 + mu^2/2 + mu |g| gives, for both orders of the pair,

    delta(eps) <= E[(1 - exp(eps - eps0 - mu^2/2 - mu |g|))_+],   g ~ N(0, 1)

and the expectation in closed form (epsilon~ = eps - eps0; delta_G the exact Gaussian profile
delta_G(e; mu) = Phi(mu/2 - e/mu) - e^e Phi(-mu/2 - e/mu), Balle & Wang 2018):

    delta_op(eps) = 2 delta_G(epsilon~; mu)              if epsilon~ >= mu^2/2
                  = 1 - 2 exp(epsilon~) Phi(-mu)          otherwise (every g has U > eps)

(the two branches agree at epsilon~ = mu^2/2). This is the paper's profile, with one change: the paper states
the Jacobian term as |log(1 - beta/lam)| (needs lam > beta); the determinant ratio above is 1 + x with
x <= beta/lam, so under add/remove log(1 + beta/lam) <= |log(1 - beta/lam)| suffices and needs only lam > 0.
The paper's profile is therefore also valid here, slightly looser (the difference is O((beta/lam)^2)).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special

from .conversions import _gdp_delta, check_epsilon_delta, epsilon_to_rho
from .ledger import ROUNDING_SLACK, PrivacyBudgetExceeded

_SIGMA_BRACKET = (1e-8, 1e12)


def _check_positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float, np.floating)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r} must be a finite number > 0")
    return float(value)


def jacobian_epsilon(lam: float, beta: float) -> float:
    """eps0 = log(1 + beta/lam): the largest log-ratio of the two Jacobian determinants (module docstring)."""
    _check_positive("lam", lam)
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta={beta!r} must be a finite number >= 0")
    return math.log1p(beta / lam)


def objpert_delta(epsilon: float, sigma: float, lam: float, L: float = 1.0, beta: float = 0.25) -> float:
    """delta_op(epsilon) of objective perturbation with noise sigma and regulariser lam (sum form).

    The closed form of the module docstring; ``epsilon`` may be any real (the profile is 1 at
    epsilon = -inf); L = 1, beta = 1/4 are the logistic loss's constants on rows ||z|| <= 1.
    """
    sigma = _check_positive("sigma", sigma)
    _check_positive("L", L)
    if not math.isfinite(epsilon):
        raise ValueError(f"epsilon={epsilon!r} must be finite")
    mu = L / sigma
    e_tilde = epsilon - jacobian_epsilon(lam, beta)
    if e_tilde >= 0.5 * mu * mu:
        return min(1.0, 2.0 * _gdp_delta(e_tilde, mu))
    # 1 - 2 e^e~ Phi(-mu), evaluated as -expm1(log 2 + e~ + log Phi(-mu)) (it is > 0 here)
    return float(-math.expm1(math.log(2.0) + e_tilde + special.log_ndtr(-mu)))


MAX_EXPONENT = 700.0   # exp(700) ~ 1e304: the largest share x epsilon_obj the Lambda rule evaluates


def lambda_for_share(epsilon_obj: float, share: float, beta: float = 0.25) -> float:
    """The regulariser lam whose Jacobian term eps0 = log(1 + beta/lam) is ``share`` x epsilon_obj:
    lam = beta / (exp(share epsilon_obj) - 1)."""
    _check_positive("epsilon_obj", epsilon_obj)
    if not 0 < share < 1:
        raise ValueError(f"share={share!r} must lie in (0, 1)")
    _check_positive("beta", beta)
    if share * epsilon_obj > MAX_EXPONENT:
        raise ValueError(f"epsilon_obj={epsilon_obj:.6g}: the Lambda rule beta/(exp({share:g} epsilon_obj) - 1) "
                         f"underflows above epsilon_obj = {MAX_EXPONENT / share:.6g}; use a smaller epsilon or "
                         "pass a public Lambda")
    return beta / math.expm1(share * epsilon_obj)


@functools.lru_cache(maxsize=1024)
def calibrate_sigma(epsilon: float, delta: float, lam: float, L: float = 1.0, beta: float = 0.25) -> float:
    """The smallest sigma (to ~1e-12 relative) with objpert_delta(epsilon, sigma, lam) <= delta.
    A pure function of its arguments, cached (every run of a cell calibrates the same sigma).

    delta_op decreases in sigma (mu = L/sigma: the bound U shrinks pointwise), from 1 at sigma -> 0 to
    (1 - exp(epsilon - eps0))_+ at sigma -> inf; a root exists iff epsilon > eps0. Brent on log sigma,
    then sigma is stepped up until the profile holds. Raises ValueError when infeasible.
    """
    check_epsilon_delta(epsilon, delta)
    eps0 = jacobian_epsilon(lam, beta)
    if not epsilon > eps0:
        raise ValueError(
            f"objective perturbation is infeasible at epsilon={epsilon:.6g}: the Jacobian term "
            f"eps0 = log(1 + beta/Lambda) = {eps0:.6g} (beta={beta:g}, Lambda={lam:.6g}) uses it all; "
            "raise Lambda or epsilon")
    f = lambda s: objpert_delta(epsilon, math.exp(s), lam, L, beta) - delta  # noqa: E731
    lo, hi = (math.log(x) for x in _SIGMA_BRACKET)
    if not (f(lo) > 0 > f(hi)):
        raise ValueError(f"objective perturbation: no sigma in {_SIGMA_BRACKET} meets delta={delta:.3g} at "
                         f"epsilon={epsilon:.6g} (Lambda={lam:.6g}); epsilon - eps0 is too small")
    s = optimize.brentq(f, lo, hi, xtol=1e-13, rtol=1e-14, maxiter=500)
    sigma = math.exp(s)
    while objpert_delta(epsilon, sigma, lam, L, beta) > delta:
        sigma = float(np.nextafter(sigma, math.inf))
    return sigma


@functools.lru_cache(maxsize=1024)
def gaussian_mu_for(epsilon: float, delta: float) -> float:
    """The largest mu = sensitivity/sigma of a Gaussian release that is (epsilon, delta)-DP (exact,
    the GDP profile; mu = sqrt(2 rho) of the ``gdp`` conversion, docs/algorithms.md §6.3)."""
    return math.sqrt(2.0 * epsilon_to_rho(epsilon, delta, "gdp"))


def check_spend(parts: dict[str, tuple[float, float]], epsilon: float, delta: float) -> tuple[float, float]:
    """Sum the (epsilon, delta) spent by the parts of a basic composition and raise
    :class:`PrivacyBudgetExceeded` if either sum exceeds the target (up to rounding). Returns the sums."""
    eps_sum = math.fsum(e for e, _ in parts.values())
    delta_sum = math.fsum(d for _, d in parts.values())
    if eps_sum > epsilon * (1.0 + ROUNDING_SLACK) or delta_sum > delta * (1.0 + ROUNDING_SLACK):
        raise PrivacyBudgetExceeded(
            f"the parts {parts} spend (epsilon, delta) = ({eps_sum:.6g}, {delta_sum:.6g}), more than the "
            f"target ({epsilon:.6g}, {delta:.6g})")
    return eps_sum, delta_sum


__all__ = ["jacobian_epsilon", "objpert_delta", "lambda_for_share", "calibrate_sigma", "gaussian_mu_for",
           "check_spend"]
