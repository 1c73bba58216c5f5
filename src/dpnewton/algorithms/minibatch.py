"""Minibatch methods with Poisson sampling: DP-SGD and the minibatch double-noise Newton.

Both calibrate their noise multipliers with the subsampled-Gaussian RDP accountant
(:mod:`dpnewton.privacy.accountant`) to the run's target (epsilon, delta) directly (not to rho:
amplification by subsampling is not rho-additive), and record the calibration in the run's
ledger as one event. Batches are Poisson samples drawn from the run's own Generator
(``rng.random(n) < q``); sums are normalised by the *expected* batch size, so the per-example
sensitivity does not depend on the realised batch, and an empty batch gives a zero sum, not NaN.

DP-SGD [docs/algorithms.md §3.3] (``dp-sgd``), q = b/n:
    w <- w - step * (sum_{i in B} grad f_i(w) + N(0, z^2 I)) / b,   step = 4 = 1/L1.
    Each per-example gradient has norm <= 1 (||z_i|| <= 1), so the sum has sensitivity 1 and the
    noise multiplier is z. T steps are T Poisson-subsampled Gaussian releases.

Minibatch double-noise Newton [docs/algorithms.md §3.4, V2 ``update_rule_stochastic``]
(``minibatch-{hess,qu}-{clip,add}``), fixed lambda, q_g = b_g/n, q_h = b_h/n:
    g~  = (sum_{B_g} grad f_i + N(0, z_g^2 I)) / b_g
    H_B = sum_{B_h} SOI_i / b_h             (Hessian or quadratic upper bound; no regulariser)
    clip: lambda_c = max(lambda, 1/b_h);    add: lambda_c = lambda
    w  <- w - Psi_{lambda_c}(H_B)^-1 g~ + N(0, (s_2 z_h)^2 I),
          s_2 = ||g~|| * 0.25 / (b_h lambda_c^2 -/+ 0.25 lambda_c)   (clip/add)
    Adding or removing one example changes H_B by a PSD rank-one term of norm <= 1/(4 b_h), so
    s_2 is the direction's sensitivity (``direction_sensitivity`` with m = b_h) given the released
    g~, and z_h is the multiplier of a Poisson-subsampled Gaussian (rate q_h). The gradient and
    the direction use independent batches. The pair (z_g, z_h) is calibrated with a common scale
    and the ratio z_h/z_g = sqrt(g_f/(1-g_f)) (``grad_frac`` g_f, default 0.7 as in the released
    full-batch code): see :mod:`dpnewton.privacy.accountant`.

Random stream of one step (documented so tests can replay it): Poisson mask(s) first
(``rng.random(n)``; gradient batch, then SOI batch), then the gradient noise
``rng.standard_normal(d)``, then the direction noise ``rng.standard_normal(d)``.

Defaults: expected batch sizes b = round(n/10) (``batch_frac = 0.1``; the released code has no
defaults), lambda = b_h^(-2/3) (public; the order of magnitude the adaptive rule
(tr H/(b_h^2 rho))^(1/3) gives, see :func:`default_lambda`). Set
``batch_grad``/``batch_hess``/``batch_size`` to override.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..loss import LogisticProblem
from ..privacy import PrivacyLedger
from ..privacy.accountant import calibrate_poisson_gaussian, calibrate_two_mechanisms, calibration_event
from ..privacy.ledger import gaussian_noise
from .base import RunContext, RunResult, iterate_single
from .costs import batch_fraction, eigh, gram
from .newton_direction import MODIFICATIONS, direction_sensitivity, modified_newton_direction, overflowed
from .registry import AlgorithmSpec, AuditCase, costed, register, runner

SGD_STEP = 4.0  # 1/L1 with L1 = 1/4
GRADIENT_SUM_SENSITIVITY = 1.0  # L2 sensitivity of a batch's gradient sum: per-example gradients have norm <= 1


def poisson_batch(rng: np.random.Generator, n: int, q: float) -> np.ndarray:
    """Indices of a Poisson sample: each of the n records independently with probability q."""
    return np.flatnonzero(rng.random(n) < q)


def gradient_sum(batch: LogisticProblem, w: np.ndarray) -> np.ndarray:
    """sum_{i in B} grad f_i(w) = -Z_B^T sigma(-Z_B w) over a batch (:meth:`LogisticProblem.batch`);
    zeros if it is empty."""
    return batch.grad_from_margins(batch.margins(w)) * batch.n


def soi_sum(batch: LogisticProblem, w: np.ndarray, kind: str) -> np.ndarray:
    """sum_{i in B} SOI_i(w) (d x d) over a batch; zeros if it is empty."""
    return batch.soi_from_margins(batch.margins(w), kind) * batch.n


def _expected_batch(value, n: int, frac: float, name: str) -> float:
    if value is None:
        if not 0 < frac <= 1:
            raise ValueError(f"batch_frac={frac!r} must lie in (0, 1]")
        return float(max(1, round(frac * n)))
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 1 <= value <= n:
        raise ValueError(f"{name}={value!r} must be a number in [1, n={n}]")
    return float(value)


# ----------------------------------------------------------------------------------------------
# DP-SGD
# ----------------------------------------------------------------------------------------------
def fixed_multiplier_text(multipliers) -> str:
    """The non-private part of a configuration whose noise multipliers are fixed by hand."""
    return f"noise multiplier(s) fixed by hand to {multipliers!r} (not calibrated)"


@dataclass(frozen=True)
class SgdConfig:
    batch_size: float | None = None      # expected batch size b; None: round(batch_frac * n)
    batch_frac: float = 0.1
    step: float = SGD_STEP
    noise_multiplier: float | None = None  # None: calibrated; a number bypasses the accountant

    def validated(self) -> "SgdConfig":
        if not self.step > 0:
            raise ValueError(f"step={self.step!r} must be > 0")
        return self

    def nonprivate_parts(self) -> tuple[str, ...]:
        return () if self.noise_multiplier is None else (fixed_multiplier_text(self.noise_multiplier),)


def dp_sgd_step(problem: LogisticProblem, w: np.ndarray, rng: np.random.Generator,
                b: float, z: float, step: float, ledger: PrivacyLedger | None = None) -> np.ndarray:
    """One DP-SGD update (random stream: mask, then gradient noise; drawn through ``ledger``,
    :meth:`~dpnewton.privacy.PrivacyLedger.draw_noise`, None: the draw alone)."""
    idx = poisson_batch(rng, problem.n, b / problem.n)
    total = gradient_sum(problem.batch(idx), w)
    draw = gaussian_noise if ledger is None else ledger.draw_noise
    noisy_sum = total + draw("gradient", total, z, rng, sensitivity=GRADIENT_SUM_SENSITIVITY)
    return w - step * noisy_sum / b


def run_dp_sgd(problem: LogisticProblem, contexts: list[RunContext], cfg: SgdConfig = SgdConfig()) -> list[RunResult]:
    cfg = cfg.validated()
    n = problem.n
    b = _expected_batch(cfg.batch_size, n, cfg.batch_frac, "batch_size")
    results = []
    for ctx in contexts:
        q = b / n
        if cfg.noise_multiplier is None:
            cal = calibrate_poisson_gaussian(q, ctx.iterations, ctx.epsilon, ctx.delta)
            z = cal.multipliers[0]
            ctx.ledger.charge_event(calibration_event(cal, "poisson-subsampled gaussian (gradient sum)", ("grad",)))
        else:
            z = float(cfg.noise_multiplier)
            if not z >= 0:
                raise ValueError(f"noise_multiplier={z!r} must be >= 0")
            ctx.ledger.mark_nonprivate(fixed_multiplier_text(cfg.noise_multiplier))
        z = ctx.ledger.noise("gradient", z)
        rng, ledger = ctx.rng, ctx.ledger
        res = iterate_single(problem, ctx, lambda w, t: dp_sgd_step(problem, w, rng, b, z, cfg.step, ledger),
                             full_margins=False)
        res.diagnostics.update({"noise_multiplier": z, "batch_size": b})
        results.append(res)
    return results


# ----------------------------------------------------------------------------------------------
# Minibatch double-noise Newton
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MinibatchNewtonConfig:
    soi: str = "hessian"                 # "hessian" | "qu"
    modification: str = "clip"           # "clip" | "add"
    lambda0: float | None = None         # fixed minimum eigenvalue (V2 ``min_eval``); None: b_h^(-2/3)
    batch_grad: float | None = None      # expected gradient batch b_g; None: round(batch_frac n)
    batch_hess: float | None = None      # expected SOI batch b_h; None: round(batch_frac n)
    batch_frac: float = 0.1
    grad_frac: float = 0.7               # fixes z_h/z_g = sqrt(g_f/(1-g_f)) (see accountant)
    noise_multipliers: tuple | None = None  # (z_g, z_h) by hand: bypasses the accountant

    def validated(self) -> "MinibatchNewtonConfig":
        if self.soi not in ("hessian", "qu"):
            raise ValueError(f"soi={self.soi!r} is unknown; choose 'hessian' or 'qu'")
        if self.modification not in MODIFICATIONS:
            raise ValueError(f"modification={self.modification!r} is unknown; choose 'clip' or 'add'")
        if self.lambda0 is not None and not (isinstance(self.lambda0, (int, float)) and self.lambda0 > 0):
            raise ValueError(f"lambda0={self.lambda0!r} must be > 0")
        if not 0 < self.grad_frac < 1:
            raise ValueError(f"grad_frac={self.grad_frac!r} must lie in (0, 1)")
        return self

    def nonprivate_parts(self) -> tuple[str, ...]:
        return () if self.noise_multipliers is None else (fixed_multiplier_text(self.noise_multipliers),)


def default_lambda(b_h: float) -> float:
    """b_h^(-2/3): the order of the adaptive rule (tr H / (b_h^2 rho))^(1/3) with tr H / rho ~ 1.

    Uses only the public expected batch size (no data), so it is a valid fixed lambda.
    """
    return float(b_h) ** (-2.0 / 3.0)


def effective_lambda(lam: float | None, b_h: float, modification: str) -> float:
    """clip: max(lambda, 1/b_h) (keeps 4 b_h lambda^2 - lambda >= 3/b_h > 0); add: lambda."""
    lam = default_lambda(b_h) if lam is None else lam
    return max(lam, 1.0 / b_h) if modification == "clip" else lam


def minibatch_newton_step(problem: LogisticProblem, w: np.ndarray, rng: np.random.Generator,
                          cfg: MinibatchNewtonConfig, b_g: float, b_h: float, z_g: float, z_h: float,
                          ledger: PrivacyLedger | None = None):
    """One update; returns (w_next, lambda_c, |B_g|, |B_h|). Random stream: see module docstring; the
    noise is drawn through ``ledger`` (:meth:`~dpnewton.privacy.PrivacyLedger.draw_noise`, None: the draw alone)."""
    n, d = problem.n, problem.d
    draw = gaussian_noise if ledger is None else ledger.draw_noise
    idx_g = poisson_batch(rng, n, b_g / n)
    idx_h = poisson_batch(rng, n, b_h / n)
    total = gradient_sum(problem.batch(idx_g), w)
    g_noisy = (total + draw("gradient", total, z_g, rng, sensitivity=GRADIENT_SUM_SENSITIVITY)) / b_g
    H = soi_sum(problem.batch(idx_h), w, cfg.soi) / b_h
    lam = effective_lambda(cfg.lambda0, b_h, cfg.modification)
    if overflowed(H, g_noisy):
        return np.full(d, np.nan), lam, idx_g.size, idx_h.size
    direction = modified_newton_direction(H, g_noisy, lam, cfg.modification)
    s2 = direction_sensitivity(float(np.linalg.norm(g_noisy)), lam, b_h, cfg.modification)
    w_next = w - direction
    return w_next + draw("direction", w_next, s2 * z_h, rng, sensitivity=s2), lam, idx_g.size, idx_h.size


def run_minibatch_newton(problem: LogisticProblem, contexts: list[RunContext],
                         cfg: MinibatchNewtonConfig) -> list[RunResult]:
    cfg = cfg.validated()
    n = problem.n
    b_g = _expected_batch(cfg.batch_grad, n, cfg.batch_frac, "batch_grad")
    b_h = _expected_batch(cfg.batch_hess, n, cfg.batch_frac, "batch_hess")
    results = []
    for ctx in contexts:
        if cfg.noise_multipliers is None:
            cal = calibrate_two_mechanisms(b_g / n, b_h / n, ctx.iterations, ctx.epsilon, ctx.delta,
                                           cfg.grad_frac)
            z_g, z_h = cal.multipliers
            ctx.ledger.charge_event(calibration_event(
                cal, "poisson-subsampled gaussian x2 (gradient sum, Newton direction)", ("grad", "dir"),
                grad_frac=cfg.grad_frac))
        else:
            z_g, z_h = (float(v) for v in cfg.noise_multipliers)
            ctx.ledger.mark_nonprivate(fixed_multiplier_text(cfg.noise_multipliers))
        z_g, z_h = ctx.ledger.noise("gradient", z_g), ctx.ledger.noise("direction", z_h)
        rng = ctx.rng
        sizes: list[tuple[int, int]] = []

        def step(w, t, rng=rng, z_g=z_g, z_h=z_h, sizes=sizes, ledger=ctx.ledger):
            w_next, _lam, kg, kh = minibatch_newton_step(problem, w, rng, cfg, b_g, b_h, z_g, z_h, ledger)
            sizes.append((kg, kh))
            return w_next

        res = iterate_single(problem, ctx, step, full_margins=False)
        res.diagnostics.update({"noise_multipliers": (z_g, z_h), "batch_grad": b_g, "batch_hess": b_h,
                                "lambda": effective_lambda(cfg.lambda0, b_h, cfg.modification),
                                "realised_batches": sizes})
        results.append(res)
    return results


def sgd_passes(cfg: SgdConfig, n: int, d: int) -> tuple[float, float]:
    """Per update: q, the expected batch / n (:mod:`.costs`)."""
    q = batch_fraction(cfg.batch_size, n, cfg.batch_frac)
    return q, q


def minibatch_newton_passes(cfg: MinibatchNewtonConfig, n: int, d: int) -> tuple[float, float]:
    """Per update: q_g + q_h G + E (gradient batch, SOI Gram over the SOI batch, eigh; :mod:`.costs`)."""
    c = (batch_fraction(cfg.batch_grad, n, cfg.batch_frac)
         + batch_fraction(cfg.batch_hess, n, cfg.batch_frac) * gram(d) + eigh(n, d))
    return c, c


register(AlgorithmSpec("dp-sgd", runner(SgdConfig, run_dp_sgd),
                       "DP-SGD, Poisson batches, step 4, RDP-calibrated noise multiplier", label="DP-SGD",
                       role="first-order", paper=True, passes=costed(SgdConfig, sgd_passes), kept_iterates=True,
                       calibration="accountant", family="DP-SGD", colour="#17becf", marker="v",
                       audit=(AuditCase("dp-sgd", ("output",), "T=1, Poisson q = 5/51 (batch_frac 0.1), RDP-calibrated "
                                        "multiplier", canary="zero"),
                              AuditCase("dp-sgd-q1", ("output",), "T=1, batch_frac 1 (q = 1: no subsampling), "
                                        "RDP-calibrated multiplier", hyper={"batch_frac": 1.0}, canary="zero"))))
#: each variant's colour: hues apart from the full-batch variant's (:mod:`.double_noise`)
_COLOURS = {"hess-clip": "#e377c2", "hess-add": "#bcbd22", "qu-clip": "#8c564b", "qu-add": "#000080"}
for _soi, _soi_label in (("hessian", "hess"), ("qu", "qu")):
    for _mod in ("clip", "add"):
        register(AlgorithmSpec(f"minibatch-{_soi_label}-{_mod}",
                               runner(MinibatchNewtonConfig, run_minibatch_newton, soi=_soi, modification=_mod),
                               f"minibatch double-noise Newton, {_soi} SOI, {_mod}, fixed lambda, "
                               "Poisson batches, RDP-calibrated noise", label=f"minibatch-{_soi_label}-{_mod}",
                               role="second-order", paper=True, kept_iterates=True,
                               calibration="accountant", family="minibatch double-noise Newton",
                               colour=_COLOURS[f"{_soi_label}-{_mod}"], marker="^",
                               # two of the four variants are audited; the others differ only in the SOI or
                               # the modification, which the zero canary does not excite
                               audit=(AuditCase(f"minibatch-{_soi_label}-{_mod}", ("output", "gradient-release"),
                                                "T=1, Poisson q = 5/51 for gradient and SOI batches, RDP-calibrated "
                                                "pair", canary="zero"),)
                               if (_soi_label, _mod) in (("hess", "clip"), ("qu", "add")) else (),
                               passes=costed(MinibatchNewtonConfig, minibatch_newton_passes,
                                             soi=_soi, modification=_mod)))
