"""Calibration of Poisson-subsampled Gaussian mechanisms to a target (epsilon, delta).

DP-SGD and the minibatch double-noise Newton methods [docs/algorithms.md §3.3-3.4] add Gaussian noise to
quantities computed on Poisson-sampled batches. Amplification by subsampling is not additive in
rho, so these runs are not charged per release in zCDP; instead the noise multipliers are
calibrated up front with a Renyi-DP (RDP) accountant and the calibration is recorded in the run's
ledger as one event (``PrivacyLedger.charge_event``).

Accountant
    Per step and order alpha, the RDP of the Poisson-subsampled Gaussian with sampling rate q and
    noise multiplier z (noise std / L2 sensitivity) under add/remove-one is
    log(A_alpha)/(alpha - 1) (Mironov, Talwar & Zhang 2019, "Renyi DP of the Sampled Gaussian
    Mechanism"). For integer alpha
        A_alpha = sum_{i=0..alpha} C(alpha, i) q^i (1-q)^(alpha-i) exp((i^2 - i)/(2 z^2)),
    evaluated here vectorised in log space (fast even for alpha ~ 1e5). Fractional orders in
    (1, 11) are taken from ``dp_accounting.rdp.RdpAccountant`` (its numerically integrated
    formula). RDP adds over the mechanisms of a step and over the T steps, and
    ``dp_accounting.rdp.rdp_privacy_accountant.compute_epsilon`` converts to (epsilon, delta)
    with the improved bound of Canonne, Kamath & Steinke 2020 (Prop. 12), minimised over the grid.

Order grid (:data:`DEFAULT_ORDERS`; dp-accounting's default grid is too coarse for small budgets,
    docs/algorithms.md §6.5)
    fractional 1.05, 1.10, ..., 10.95 (non-integers), every integer 2..256, then ~150
    geometrically spaced integers up to 2e4 (enough for epsilon >= 0.01 at delta >= 1e-12). The
    optimal order of every (q, z, T) we calibrate is recorded; an optimum at the upper grid edge is
    flagged in the event.
    Cost: an evaluation of epsilon on the whole grid takes ~25-50 ms (the fractional orders that
    provably cannot hold the minimum are skipped, see :func:`composed_epsilon`); the root search
    runs on subsets of the grid and needs one or two whole-grid evaluations (:func:`_calibrate`:
    4-6x less CPU than a search on the whole grid, same root to 1e-13);
    calibrations are cached (``functools.lru_cache``), since every seed of a configuration uses the
    same one.

Calibration
    epsilon(c) is continuous and decreasing in the noise scale c. Brent's method on log c finds
    epsilon(c) = target to rtol 1e-13, then c is stepped up until epsilon(c) <= target, so the
    accountant epsilon never exceeds the target and equals it to ~1e-12 relative.

Two mechanisms per step (minibatch double-noise Newton)
    The gradient (q_g, z_g) and the direction (q_h, z_h) are calibrated with one common scale and
    a fixed ratio derived from the full-batch code's budget split ``grad_frac`` (g_f, V2: 0.7):
    z_g = c / sqrt(g_f), z_h = c / sqrt(1 - g_f). Without subsampling (q = 1) each mechanism is
    a Gaussian with rho = 1/(2 z^2) per step, so this ratio gives the gradient exactly the share
    g_f of the per-step zCDP budget, i.e. the split of the full-batch double-noise method; with
    subsampling the same ratio is kept and the common scale c absorbs the amplification.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from .ledger import Calibration, SubsampledGaussianEvent


ACCOUNTANT = "rdp"
MAX_ORDER = 20000


def _default_orders() -> np.ndarray:
    frac = np.round(np.arange(1.05, 11.0, 0.05), 10)
    frac = frac[np.abs(frac - np.round(frac)) > 1e-9]
    ints = np.arange(2, 257, dtype=float)
    tail = np.unique(np.round(np.geomspace(257, MAX_ORDER, 160)))
    return np.concatenate([frac, ints, tail])


DEFAULT_ORDERS = _default_orders()


def _check_q(q: float, name: str = "q") -> float:
    if not (isinstance(q, (int, float, np.floating)) and 0 < q <= 1):
        raise ValueError(f"{name}={q!r} must lie in (0, 1]")
    return float(q)


def _check_multiplier(z: float, name: str = "noise_multiplier") -> float:
    if not (isinstance(z, (int, float, np.floating)) and math.isfinite(z) and z > 0):
        raise ValueError(f"{name}={z!r} must be a finite number > 0")
    return float(z)


def _check_steps(steps) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps={steps!r} must be an integer >= 1")
    return int(steps)


def _check_target(epsilon: float, delta: float) -> None:
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon={epsilon!r} must be a finite number > 0")
    if not (isinstance(delta, (int, float, np.floating)) and 0 < delta < 1):
        raise ValueError(f"delta={delta!r} must lie in the open interval (0, 1)")


@functools.lru_cache(maxsize=4)
def _log_factorials(top: int) -> np.ndarray:
    return special.gammaln(np.arange(top + 1, dtype=float) + 1.0)


def _log_a_int(q: float, z: float, alpha: int) -> float:
    """log A_alpha for integer alpha >= 2 (see module docstring), by a log-sum-exp over i."""
    lf = _log_factorials(max(MAX_ORDER, alpha))
    i = np.arange(alpha + 1, dtype=float)
    log_binom = lf[alpha] - lf[: alpha + 1] - lf[alpha::-1]
    terms = log_binom + i * math.log(q) + (alpha - i) * math.log1p(-q) + (i * i - i) / (2.0 * z * z)
    top = terms.max()
    return float(top + math.log(np.exp(terms - top).sum()))


def poisson_gaussian_rdp(q: float, z: float, orders=None) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian release (rate q, multiplier z) at every order."""
    q = _check_q(q)
    z = _check_multiplier(z)
    orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    if np.any(orders <= 1):
        raise ValueError("orders must all be > 1")
    if q == 1.0:
        return orders / (2.0 * z * z)
    out = np.empty(len(orders))
    is_int = np.abs(orders - np.round(orders)) < 1e-12
    for k in np.flatnonzero(is_int):
        a = int(round(orders[k]))
        out[k] = _log_a_int(q, z, a) / (a - 1)
    frac_idx = np.flatnonzero(~is_int)
    if frac_idx.size:
        absl_logger = logging.getLogger("absl")
        level = absl_logger.level
        absl_logger.setLevel(logging.ERROR)  # non-converging orders are dropped (rdp = inf) anyway
        try:
            import dp_accounting  # imported on use: dp_accounting costs ~0.4 s at start-up
            from dp_accounting.rdp import rdp_privacy_accountant as _rdp

            acc = _rdp.RdpAccountant(list(orders[frac_idx]))
            acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)))
            out[frac_idx] = acc.rdp  # public property (a copy of the composed RDP per order)
        finally:
            absl_logger.setLevel(level)
    return out


def _composed_rdp(mechanisms, steps: int, orders: np.ndarray) -> np.ndarray:
    rdp = np.zeros(len(orders))
    for q, z in mechanisms:
        rdp = rdp + poisson_gaussian_rdp(q, z, orders)
    return steps * rdp


def _improved_bound_lower(orders: np.ndarray, rdp_low: np.ndarray, delta: float) -> np.ndarray:
    """Per-order lower bound on the improved RDP -> (epsilon, delta) bound of ``compute_epsilon``
    (Canonne, Kamath & Steinke 2020, Prop. 12) from a lower bound ``rdp_low`` on the RDP.

    eps(a, r) = r + log(1 - 1/a) - log(delta a) / (a - 1) is increasing in r on the branch
    where ``compute_epsilon`` uses it (a > 1.01 and delta^2 + expm1(-r) <= 0, a branch every
    r >= rdp_low stays on); elsewhere the bound is -inf, i.e. the order is never pruned.
    """
    out = np.full(len(orders), -np.inf)
    on_formula = (orders > 1.01) & (delta ** 2 + np.expm1(-rdp_low) <= 0)
    a, r = orders[on_formula], rdp_low[on_formula]
    out[on_formula] = r + np.log1p(-1.0 / a) - np.log(delta * a) / (a - 1.0)
    return out


def _fractional_rdp_lower(frac: np.ndarray, int_orders: np.ndarray, int_rdp: np.ndarray) -> np.ndarray:
    """Lower bounds on the RDP at fractional orders from the RDP at the integer orders.

    With f(a) = (a - 1) RDP(a) = log E[(P/Q)^a], f is convex in a (a log-moment generating
    function), f(1) = 0, and RDP is non-decreasing in a. For a in (k, k + 1): RDP(a) >= RDP(k), and
    the chord of f through k - 1 and k extended to a lies below f, so
    RDP(a) >= (f(k) + (a - k) (f(k) - f(k - 1))) / (a - 1). Orders whose integers are missing get 0.
    Both properties hold for every mechanism and survive sums over mechanisms and steps.
    """
    f = {1: 0.0}
    f.update({int(round(a)): (a - 1.0) * r for a, r in zip(int_orders, int_rdp)})
    out = np.zeros(len(frac))
    for i, a in enumerate(frac):
        k = int(np.floor(a))
        if k in f and k >= 2:
            out[i] = f[k] / (k - 1.0)
            if k - 1 in f:
                out[i] = max(out[i], (f[k] + (a - k) * (f[k] - f[k - 1])) / (a - 1.0))
    return out


def composed_epsilon(mechanisms, steps: int, delta: float, orders=None) -> tuple[float, float]:
    """(epsilon, optimal order) of ``steps`` rounds of the mechanisms [(q, z), ...] per round.

    The same value as ``compute_epsilon`` over the whole order grid, with the expensive fractional
    orders (numerical integration in dp_accounting, ~95 % of the cost) evaluated only where they
    can win: from the integer orders' RDP, :func:`_fractional_rdp_lower` bounds the RDP at each
    fractional order from below (monotonicity, van Erven & Harremoes 2014, Thm 3, and convexity of
    (a - 1) RDP(a)), which lower-bounds the order's epsilon. An order whose lower bound exceeds the best integer order's
    epsilon by more than a relative 1e-9 (far above rounding) cannot be the minimum, and is skipped.
    The minimum, its order, and ties (first index wins) are then exactly those of the full grid.
    """
    steps = _check_steps(steps)
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta!r} must lie in the open interval (0, 1)")
    orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    # imported on use: dp_accounting costs ~0.4 s at start-up
    from dp_accounting.rdp import rdp_privacy_accountant as _rdp

    is_int = np.abs(orders - np.round(orders)) < 1e-12
    keep = is_int.copy()
    rdp = np.full(len(orders), np.nan)
    rdp[is_int] = _composed_rdp(mechanisms, steps, orders[is_int])
    frac = np.flatnonzero(~is_int)
    if frac.size:
        if is_int.any():
            best_int = _rdp.compute_epsilon(list(orders[is_int]), list(rdp[is_int]), delta)[0]
            lower = _improved_bound_lower(orders[frac], _fractional_rdp_lower(orders[frac], orders[is_int],
                                                                              rdp[is_int]), delta)
            needed = frac[lower <= best_int + 1e-9 * (1.0 + abs(best_int))]
        else:
            needed = frac
        if needed.size:
            rdp[needed] = _composed_rdp(mechanisms, steps, orders[needed])
        keep[needed] = True
    eps, order = _rdp.compute_epsilon(list(orders[keep]), list(rdp[keep]), delta)
    return float(eps), float(order)


def accountant_epsilon(qs, multipliers, steps: int, delta: float, orders=None) -> float:
    """Accountant epsilon of ``steps`` rounds, each releasing one Poisson-subsampled Gaussian per
    (q, z) pair of ``qs`` x ``multipliers`` (zip). Used to audit a calibration."""
    qs, multipliers = tuple(qs), tuple(multipliers)
    if len(qs) != len(multipliers) or not qs:
        raise ValueError("qs and multipliers must be non-empty and of equal length")
    mech = [(_check_q(q, "q"), _check_multiplier(z)) for q, z in zip(qs, multipliers)]
    return composed_epsilon(mech, steps, delta, orders)[0]


def calibration_event(cal: Calibration, mechanism: str, names: tuple[str, ...], **extra) -> SubsampledGaussianEvent:
    """The ledger event of a calibration; ``names`` label the mechanisms (q_<name>, ...), ``extra``
    adds recorded keys (e.g. ``grad_frac``)."""
    return SubsampledGaussianEvent(mechanism, tuple(names), cal,
                                   f"{len(DEFAULT_ORDERS)} orders in [{DEFAULT_ORDERS.min():.3g}, "
                                   f"{DEFAULT_ORDERS.max():.3g}] (dense grid)", ACCOUNTANT, tuple(extra.items()))


#: Root search on subsets of the order grid (:func:`_calibrate`): first the integer orders up to 11 and every
#: COARSE_STRIDE-th order above (no fractional order: those cost a numerical series each), then the WINDOW
#: orders on each side of that subset's optimum (+-1 around an order below 11).
COARSE_STRIDE, WINDOW = 8, 20
_SORTED_ORDERS = np.sort(DEFAULT_ORDERS)
_COARSE_ORDERS = np.union1d(np.arange(2.0, 12.0), np.concatenate([_SORTED_ORDERS[_SORTED_ORDERS > 11][::COARSE_STRIDE],
                                                                  _SORTED_ORDERS[-1:]]))


def _order_window(order: float) -> np.ndarray:
    """The grid orders within WINDOW positions of ``order`` (a grid order) in the sorted grid."""
    i = int(np.searchsorted(_SORTED_ORDERS, order))
    return _SORTED_ORDERS[max(0, i - WINDOW): i + WINDOW + 1]


@functools.lru_cache(maxsize=256)
def _calibrate(qs: tuple, weights: tuple, steps: int, epsilon: float, delta: float) -> Calibration:
    """The smallest common scale c meeting (epsilon, delta), found on subsets of the order grid.

    For any subset S of the grid, eps_S(c) (the minimum over S) >= eps(c) (over the whole grid). If
    the whole grid's optimal order at the root c_S of eps_S(c) = epsilon lies in S, then
    eps(c_S) = eps_S(c_S) = epsilon, and c_S is the whole grid's root (eps is decreasing in c). So the
    root is searched on the coarse subset (loosely), then tightly on the window around that subset's
    optimum, and accepted once one evaluation on the whole grid confirms its optimal
    order lies in the window (else the window moves there; after 8 moves, the whole grid). The
    result is the whole grid's root to Brent's tolerance. The window's search is bracketed around the
    coarse root (steps of 0.01 in log c, doubling).
    """
    def eps_of(log_c: float, orders=None) -> tuple[float, float]:
        c = math.exp(log_c)
        return composed_epsilon([(q, c * w) for q, w in zip(qs, weights)], steps, delta, orders)

    def root(orders, xtol: float, guess: float = 0.0, width: float = 1.0) -> float:
        """Brent's method on log c, bracketed from ``guess`` outwards in steps of ``width`` (doubling)."""
        f = lambda lc: eps_of(lc, orders)[0] - epsilon  # noqa: E731  decreasing in log c
        lo, hi, step = guess - width, guess, width
        while f(hi) > 0:
            lo, hi, step = hi, hi + step, 2 * step
        while f(lo) <= 0:
            hi, lo, step = lo, lo - step, 2 * step
            if lo < -40:
                raise ValueError(f"epsilon={epsilon!r} is met by any noise multiplier; nothing to calibrate")
        return optimize.brentq(f, lo, hi, xtol=xtol, rtol=max(xtol, 1e-13), maxiter=200)

    coarse = root(_COARSE_ORDERS, 1e-3)
    window = _order_window(eps_of(coarse, _COARSE_ORDERS)[1])
    for _ in range(8):
        log_c = root(window, 1e-14, coarse, 0.01)
        eps, order = eps_of(log_c)
        if order in window:
            break
        window = _order_window(order)
    else:
        log_c = root(None, 1e-14, coarse, 0.01)
        eps, order = eps_of(log_c)
    k = 0
    while eps > epsilon:  # never exceed the target: step the scale up
        k += 1
        log_c += 1e-13 * k
        eps, order = eps_of(log_c)
    c = math.exp(log_c)
    return Calibration(qs, tuple(c * w for w in weights), steps, float(epsilon), float(delta), eps, order,
                       weights, bool(order >= DEFAULT_ORDERS.max()))


def calibrate_noise_multipliers(qs, weights, steps: int, epsilon: float, delta: float) -> Calibration:
    """Smallest common scale c with z_k = c * weights[k] meeting (epsilon, delta) over ``steps``."""
    qs = tuple(_check_q(q) for q in qs)
    weights = tuple(float(w) for w in weights)
    if len(qs) != len(weights) or not qs:
        raise ValueError("qs and weights must be non-empty and of equal length")
    if any(not (w > 0 and math.isfinite(w)) for w in weights):
        raise ValueError(f"weights={weights!r} must be finite and > 0")
    steps = _check_steps(steps)
    _check_target(epsilon, delta)
    return _calibrate(qs, weights, steps, float(epsilon), float(delta))


def calibrate_poisson_gaussian(q: float, steps: int, epsilon: float, delta: float) -> Calibration:
    """Noise multiplier of DP-SGD: ``steps`` Poisson-subsampled Gaussian releases at rate q."""
    return calibrate_noise_multipliers((q,), (1.0,), steps, epsilon, delta)


def split_weights(grad_frac: float) -> tuple[float, float]:
    """(1/sqrt(g_f), 1/sqrt(1-g_f)): multiplier ratio giving the gradient the zCDP share g_f at q=1."""
    if not (isinstance(grad_frac, (int, float, np.floating)) and 0 < grad_frac < 1):
        raise ValueError(f"grad_frac={grad_frac!r} must lie in (0, 1)")
    return 1.0 / math.sqrt(grad_frac), 1.0 / math.sqrt(1.0 - grad_frac)


def calibrate_two_mechanisms(q_grad: float, q_dir: float, steps: int, epsilon: float, delta: float,
                             grad_frac: float = 0.7) -> Calibration:
    """(z_g, z_h) for the minibatch double-noise Newton: z_g = c/sqrt(g_f), z_h = c/sqrt(1-g_f)."""
    _check_q(q_grad, "q_grad")
    _check_q(q_dir, "q_dir")
    return calibrate_noise_multipliers((q_grad, q_dir), split_weights(grad_frac), steps, epsilon, delta)


__all__ = ["DEFAULT_ORDERS", "Calibration", "accountant_epsilon", "calibration_event", "calibrate_noise_multipliers",
           "calibrate_poisson_gaussian", "calibrate_two_mechanisms", "composed_epsilon",
           "poisson_gaussian_rdp", "split_weights"]
