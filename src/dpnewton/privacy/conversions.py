"""Conversions between rho-zCDP and (epsilon, delta)-DP.

Every optimizer in this package is analysed in zero-concentrated DP (zCDP, Bun & Steinke 2016,
"BS16"). The paper states budgets as (epsilon, delta) with delta = n^-2 [P section 6, "Privacy
Notion"], so a run first maps (epsilon, delta) to a total rho. Which map is used changes the noise
of every run, so it is a recorded, named choice (``conversion``):

``"paper"``
    rho = epsilon^2 / (4 log(1/delta) + 4 epsilon): the sufficient closed form printed in the paper
    [P Def. 3.1 remark; BS16 Lemma 3.5]. Conservative.
``"bs16"``
    the exact root in rho of epsilon = rho + sqrt(4 rho log(sqrt(pi rho)/delta)) [BS16 Lemma 3.6],
    the equation the official code meant to solve (docs/algorithms.md §6.3), solved with a bracketing
    root finder (Brent), so it never fails silently.
``"cks"``
    the tight conversion of Canonne, Kamath & Steinke (2020), Proposition 12 (also Asoodeh et al.):
    epsilon(rho, delta) = min_{alpha > 1} alpha rho + [(alpha-1) log(1 - 1/alpha) - log alpha
    - log delta] / (alpha - 1). The optimal order solves rho (alpha-1)^2 + log(alpha delta) = 0.
``"gdp"``
    exact for a (possibly adaptive) composition of Gaussian mechanisms: rho-zCDP built from
    Gaussian releases equals mu-GDP with mu = sqrt(2 rho) (Dong, Roth & Su 2019, Corollary 2.13;
    one Gaussian release with sensitivity Delta and scale sigma has rho = Delta^2/(2 sigma^2) and
    mu = Delta/sigma). delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2).
    Valid only for mechanisms made purely of Gaussian noise additions, which all full-batch
    optimizers here are.
``"official-fsolve"``
    reproduces the official code (``eps_to_zcdp`` in research/dp_newton/src/run.py): ``fsolve`` on
    the BS16 Lemma 3.6 equation from x0 = 1e-3. For epsilon below about 0.13 the iteration hits a
    NaN and silently returns x0, i.e. rho = 1e-3 whatever epsilon was asked for (docs/algorithms.md
    §11.1). This is a privacy bug; it exists only to reproduce the published numbers.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import optimize, special

CONVERSIONS = ("paper", "bs16", "cks", "gdp", "official-fsolve")
#: the conversion of every entry point (library, CLI, pipeline) when none is named
DEFAULT_CONVERSION = "bs16"
#: conversions that can grant more rho than (epsilon, delta) allows, with the reason: the benchmark
#: keeps them to reproduce published numbers; the library's entry points refuse them
OVERSPENDING_CONVERSIONS = {
    "official-fsolve": "the official code's fsolve returns rho = 1e-3 whatever epsilon is asked for below "
                       "about 0.13 (docs/algorithms.md §11.1), so the run can spend far more than epsilon",
}
OFFICIAL_FSOLVE_X0 = 1e-3
MAX_EPSILON = 1e6
"""The largest epsilon a mechanism of the package calibrates (objective perturbation's calibration leaves
float64's range above it, and no privacy is left at such an epsilon)."""
_MAX_STEPS = 2200  # bracket doublings/quarterings: more than the 2^-1074 .. 2^1024 float range needs


def check_conversion(conversion: str) -> None:
    """ValueError naming the choices unless ``conversion`` is one of :data:`CONVERSIONS`."""
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion={conversion!r} is unknown; choose one of {', '.join(CONVERSIONS)}")


def pure_rho(epsilon: float) -> float:
    """rho = epsilon^2 / 2: an epsilon-DP mechanism is (epsilon^2/2)-zCDP [BS16 Proposition 1.4]. The nominal
    budget recorded for a pure (delta = 0) run; the pure mechanisms calibrate to epsilon itself."""
    check_epsilon_delta(epsilon, 0.5)
    return 0.5 * float(epsilon) * float(epsilon)     # inf past 1e154, never an OverflowError


def check_epsilon_delta(epsilon: float, delta: float) -> None:
    """Raise ValueError naming the argument when epsilon or delta is out of range."""
    if not (isinstance(epsilon, (int, float, np.floating)) and not isinstance(epsilon, bool)
            and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon={epsilon!r} must be a finite number > 0")
    if not (isinstance(delta, (int, float, np.floating)) and not isinstance(delta, bool) and 0 < delta < 1):
        raise ValueError(f"delta={delta!r} must lie in the open interval (0, 1)")


def check_rho(rho: float) -> None:
    if not (isinstance(rho, (int, float, np.floating)) and math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho={rho!r} must be a finite number > 0")


# ---------------------------------------------------------------------------------------------
# rho -> epsilon
# ---------------------------------------------------------------------------------------------
def _bs16_epsilon(rho: float, delta: float) -> float:
    """epsilon = rho + sqrt(4 rho log(sqrt(pi rho)/delta)) [BS16 Lemma 3.6]."""
    log_term = math.log(math.sqrt(math.pi * rho) / delta)
    return rho + math.sqrt(4.0 * rho * max(log_term, 0.0))


def _cks_optimal_order(rho: float, delta: float) -> float:
    """Root of rho (alpha-1)^2 + log(alpha delta) = 0, the minimiser of the CKS bound; 1 + 1e-15 when the
    root lies below it (rho above ~1e30 log(1/delta)): the bound holds at every alpha > 1, so a
    non-optimal order gives a valid, looser epsilon."""
    f = lambda a: rho * (a - 1.0) ** 2 + math.log(a) + math.log(delta)  # noqa: E731
    lo = 1.0 + 1e-15
    if f(lo) >= 0:
        return lo
    hi = 1.0 / delta
    if hi > 1e150 and rho > 0:  # (hi - 1)^2 would overflow; f(1 + sqrt(log(1/delta)/rho)) >= 0 also brackets
        hi = min(hi, 1.0 + math.sqrt(-math.log(delta) / rho))
    return optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)


def _cks_epsilon(rho: float, delta: float) -> float:
    a = _cks_optimal_order(rho, delta)
    value = a * rho + ((a - 1.0) * math.log1p(-1.0 / a) - math.log(a) - math.log(delta)) / (a - 1.0)
    return max(value, 0.0)


def _gdp_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) of mu-GDP [Dong, Roth & Su 2019, Corollary 2.13], evaluated in log space."""
    a = special.log_ndtr(-epsilon / mu + mu / 2.0)
    b = epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0)
    if b >= a:
        return 0.0
    return math.exp(a) * -math.expm1(b - a)


def _gdp_epsilon(rho: float, delta: float) -> float:
    mu = math.sqrt(2.0 * rho)
    if _gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    for _ in range(_MAX_STEPS):
        if not _gdp_delta(hi, mu) > delta:
            break
        hi *= 2.0
    else:
        raise OverflowError(f"no epsilon bracket below {hi:g} for mu={mu:g}")
    if not math.isfinite(hi):
        raise OverflowError(f"mu={mu:g} is too large to bracket epsilon in floating point")
    return optimize.brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=500)


def rho_to_epsilon(rho: float, delta: float, conversion: str = DEFAULT_CONVERSION) -> float:
    """The epsilon at which rho-zCDP implies (epsilon, delta)-DP under ``conversion``.

    ``"paper"`` inverts rho = eps^2/(4 log(1/delta) + 4 eps): eps = 2 rho + sqrt(4 rho^2 + 4 rho log(1/delta)).
    ``"official-fsolve"`` uses the official code's ``zcdp_to_eps`` (= the BS16 Lemma 3.6 formula).
    """
    check_rho(rho)
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta!r} must lie in the open interval (0, 1)")
    check_conversion(conversion)
    if conversion == "paper":
        log_inv = math.log(1.0 / delta)
        return 2.0 * rho + math.sqrt(4.0 * rho * rho + 4.0 * rho * log_inv)
    if conversion in ("bs16", "official-fsolve"):
        return _bs16_epsilon(rho, delta)
    if conversion == "cks":
        return _cks_epsilon(rho, delta)
    return _gdp_epsilon(rho, delta)


# ---------------------------------------------------------------------------------------------
# epsilon -> rho
# ---------------------------------------------------------------------------------------------
class _Unrepresentable(Exception):
    """epsilon lies outside the range of a conversion's epsilon(rho) curve (the message says where)."""


def _invert_monotone(fun, epsilon: float) -> float:
    """Largest rho with fun(rho) <= epsilon for an increasing fun, by bracketing + Brent.

    Every search is bounded: the brackets grow or shrink by a constant factor at most
    ``_MAX_STEPS`` times (enough to cross the whole float range); an epsilon the curve never
    reaches raises :class:`_Unrepresentable`.
    """
    hi = max(epsilon, 1e-12)
    for _ in range(_MAX_STEPS):
        if fun(hi) >= epsilon:
            break
        hi *= 2.0
        if not math.isfinite(hi):
            break
    if not (math.isfinite(hi) and fun(hi) >= epsilon):
        raise _Unrepresentable("it is above every epsilon the conversion reaches in floating point")
    # lo: shrink until fun(lo) < epsilon (fun(rho) -> its infimum as rho -> 0)
    lo = hi
    for _ in range(_MAX_STEPS):
        if fun(lo) < epsilon or lo == 0.0:
            break
        lo /= 4.0
    if not fun(lo) < epsilon:
        raise _Unrepresentable(f"the smallest epsilon it represents is {fun(lo):.6g}")
    root = optimize.brentq(lambda r: fun(r) - epsilon, lo, hi, xtol=1e-300, rtol=1e-14, maxiter=1000)
    # never grant more than the target: step down until fun(root) <= epsilon (a few ulps at most) ...
    for _ in range(64):
        if fun(root) <= epsilon:
            return float(root)
        root = np.nextafter(root, 0.0)
    # ... else bisect between lo (fun < epsilon) and root (fun > epsilon), keeping the lower end
    a, b = lo, float(root)
    for _ in range(_MAX_STEPS):
        m = 0.5 * (a + b)
        if m in (a, b):
            break
        a, b = (m, b) if fun(m) <= epsilon else (a, m)
    return float(a)


def _official_fsolve_rho(epsilon: float, delta: float) -> tuple[float, bool]:
    """The official code's call: fsolve(eps - zcdp_to_eps(rho, delta), x0=1e-3). Returns (rho, failed)."""

    def equation(x):
        rho = x[0]
        with np.errstate(invalid="ignore"):
            return [epsilon - (rho + np.sqrt(4.0 * rho * np.log(np.sqrt(np.pi * rho) / delta)))]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info, ier, _msg = optimize.fsolve(equation, x0=[OFFICIAL_FSOLVE_X0], full_output=True)
    return float(sol[0]), ier != 1


def epsilon_to_rho(epsilon: float, delta: float, conversion: str = DEFAULT_CONVERSION) -> float:
    """Total zCDP budget rho granted for a target (epsilon, delta) under ``conversion``.

    See the module docstring for the five conversions and their sources. For every conversion
    except ``"official-fsolve"``, ``rho_to_epsilon(epsilon_to_rho(e, d, c), d, c) <= e`` holds to
    rounding, so the claimed epsilon is never exceeded.
    """
    check_epsilon_delta(epsilon, delta)
    check_conversion(conversion)
    where = f"epsilon={epsilon!r}, delta={delta!r}, conversion={conversion!r}"
    try:
        rho = _epsilon_to_rho(epsilon, delta, conversion, where)
    except _Unrepresentable as exc:
        raise ValueError(f"{where}: epsilon cannot be represented by this conversion ({exc}); "
                         "choose an epsilon in its range or another conversion") from None
    except (ArithmeticError, ValueError) as exc:  # overflow, or a root bracket lost in floating point
        if str(exc).startswith(where):
            raise
        raise ValueError(f"{where}: the conversion cannot be evaluated in floating point at these values "
                         f"({type(exc).__name__}: {exc}); use a smaller epsilon or a larger delta") from None
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"{where}: rho = {rho!r} is not a positive float (epsilon is too small for floating "
                         "point); use a larger epsilon")
    return rho


def _epsilon_to_rho(epsilon: float, delta: float, conversion: str, where: str) -> float:
    if conversion == "paper":
        return epsilon**2 / (4.0 * math.log(1.0 / delta) + 4.0 * epsilon)
    if conversion == "official-fsolve":
        return _official_fsolve_rho(epsilon, delta)[0]
    if conversion == "bs16":
        floor = bs16_min_epsilon(delta)  # rho = delta^2/pi: below it the log term is negative, the bound void
        if epsilon < floor:
            raise ValueError(
                f"{where}: epsilon is below {floor:.6g} = delta^2/pi, the smallest epsilon bs16 represents at "
                f"this delta (BS16 Lemma 3.6 bottoms out at rho = delta^2/pi); use epsilon >= "
                f"{float(f'{floor * 1.01:.3g}'):g}, a smaller delta, or conversion 'cks' or 'gdp'")
        if epsilon == floor:
            return floor
        fun = lambda r: _bs16_epsilon(max(r, floor), delta)  # noqa: E731
        return _invert_monotone(fun, epsilon)
    if conversion == "cks":
        return _invert_monotone(lambda r: _cks_epsilon(r, delta), epsilon)
    return _invert_monotone(lambda r: _gdp_epsilon(r, delta), epsilon)


def bs16_min_epsilon(delta: float) -> float:
    """The smallest epsilon the ``"bs16"`` conversion represents at ``delta``: delta^2/pi.

    BS16 Lemma 3.6 gives epsilon = rho + sqrt(4 rho log(sqrt(pi rho)/delta)), whose log term is
    negative (the bound void) below rho = delta^2/pi; there epsilon = rho = delta^2/pi.
    """
    return delta**2 / math.pi


def official_fsolve_failed(epsilon: float, delta: float) -> bool:
    """True when the official code's fsolve silently returned its starting point."""
    check_epsilon_delta(epsilon, delta)
    return _official_fsolve_rho(epsilon, delta)[1]
