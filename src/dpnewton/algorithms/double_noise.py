"""Newton with double noise: Algorithm 3 of the paper and its adaptive-lambda variant.

Per iteration t of T, with rho_t = rho/T [docs/algorithms.md §2.3, the released code]:

1. rho_g = g_f rho_t, rho_H = (1 - g_f) rho_t, rho_tr = f_tr rho_H, rho_dir = (1 - f_tr) rho_H;
2. noisy gradient  g~ = grad(w) + reg w + N(0, s_g^2 I),  s_g = (1/n)/sqrt(2 rho_g)  (sensitivity 1/n);
3. SOI H = Hessian or H_qu at w (no regulariser);
4. adaptive lambda (the variant the paper's experiments use, [P section 5.2]):
   tau~ = c max(tr H + N(0, s_tr^2), 0), s_tr = (1/(4n))/sqrt(2 rho_tr) (trace sensitivity 1/(4n));
   released code ("v2"): lambda = max((tau~/(n^2 rho_dir))^(1/3), 1/n), c = 0.5, g_f = 0.7, f_tr = 0.1;
   older code ("v1"):    lambda = (tau~/(n^2 rho_dir))^(1/3) + 8e-4, c = 1, g_f = 0.75, f_tr = 0.1;
   fixed lambda (Algorithm 3 as printed): lambda = lambda0, f_tr = 0, theta = 1 - g_f;
5. w <- w - Psi_lambda(H)^-1 g~ + N(0, s_dir^2 I), s_dir = Delta_dir/sqrt(2 rho_dir) with
   Delta_dir = ||g~||/(4 n lambda^2 -/+ lambda) (clip/add; see :mod:`.newton_direction`).

The three releases of every step are charged to the run's ledger, so the ledger sums to rho. A step
whose SOI or noisy gradient overflowed (:func:`.newton_direction.overflowed`) charges its direction
at an unbounded sensitivity (infinite noise) and releases NaN: the run is recorded as diverged.
``average`` (none | uniform | tail) releases the last iterate or the mean of a window of iterates
(:func:`.base.average_window`; docs/algorithms.md §2.6): post-processing, the ledger is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..loss import LogisticProblem
from ..privacy.plan import PlannedRelease, PrivacyPlan
from .base import RESET_NONPRIVATE, RunContext, RunResult, check_average, iterate_single
from .costs import eigh, gram
from .gradient_descent import GRADIENT_SENSITIVITY
from .newton_direction import MODIFICATIONS, direction_sensitivity, modified_newton_direction, overflowed
from .registry import AlgorithmSpec, AuditCase, planner, register, runner

CONSTANTS = {
    # released code (tensorflow/privacy research/dp_newton/src, "V2")
    "v2": {"grad_frac": 0.7, "trace_frac": 0.1, "trace_coeff": 0.5},
    # older code (V1): additive 8e-4, no floor
    "v1": {"grad_frac": 0.75, "trace_frac": 0.1, "trace_coeff": 1.0},
}
V1_LAMBDA_OFFSET = 8e-4


@dataclass(frozen=True)
class DoubleNoiseConfig:
    soi: str = "hessian"                 # "hessian" | "qu"
    modification: str = "clip"           # "clip" | "add"
    lambda_mode: str = "adaptive"        # "adaptive" | "fixed"
    lambda0: float | None = None         # fixed mode only
    constants: str = "v2"                # "v2" (released) | "v1" (older code)
    grad_frac: float | None = None       # None: from constants
    trace_frac: float | None = None
    trace_coeff: float | None = None
    reg: float = 1e-8                    # the code adds 1e-8 w to the gradient
    reset: bool = False                  # the code's data-dependent explosion reset (not private)
    average: str = "none"                # released model: "none" (w_T) | "uniform" | "tail" (base.average_window)

    def validated(self) -> "DoubleNoiseConfig":
        if self.soi not in ("hessian", "qu"):
            raise ValueError(f"soi={self.soi!r} is unknown; choose 'hessian' or 'qu'")
        if self.modification not in MODIFICATIONS:
            raise ValueError(f"modification={self.modification!r} is unknown; choose 'clip' or 'add'")
        if self.constants not in CONSTANTS:
            raise ValueError(f"constants={self.constants!r} is unknown; choose 'v2' or 'v1'")
        if self.lambda_mode not in ("adaptive", "fixed"):
            raise ValueError(f"lambda_mode={self.lambda_mode!r} is unknown; choose 'adaptive' or 'fixed'")
        check_average(self.average)
        base = CONSTANTS[self.constants]
        gf = base["grad_frac"] if self.grad_frac is None else float(self.grad_frac)
        ftr = base["trace_frac"] if self.trace_frac is None else float(self.trace_frac)
        coeff = base["trace_coeff"] if self.trace_coeff is None else float(self.trace_coeff)
        if self.lambda_mode == "fixed":
            if self.lambda0 is None or not self.lambda0 > 0:
                raise ValueError(f"lambda0={self.lambda0!r}: fixed lambda mode needs lambda0 > 0")
            ftr = 0.0
        if not 0 < gf < 1:
            raise ValueError(f"grad_frac={gf!r} must lie in (0, 1)")
        if not 0 <= ftr < 1:
            raise ValueError(f"trace_frac={ftr!r} must lie in [0, 1)")
        if self.lambda_mode == "adaptive" and not ftr > 0:
            raise ValueError(f"trace_frac={ftr!r} must be > 0 for the adaptive lambda")
        if not coeff > 0:
            raise ValueError(f"trace_coeff={coeff!r} must be > 0")
        return DoubleNoiseConfig(self.soi, self.modification, self.lambda_mode, self.lambda0,
                                 self.constants, gf, ftr, coeff, self.reg, self.reset, self.average)

    def nonprivate_parts(self) -> tuple[str, ...]:
        return (RESET_NONPRIVATE,) if self.reset else ()


def adaptive_lambda(noisy_trace: float, n: int, rho_dir: float, cfg: DoubleNoiseConfig) -> float:
    """lambda_t from the clamped, scaled noisy trace tau~ (docs/algorithms.md §2.3 step 5)."""
    base = np.cbrt(noisy_trace / (n * n * rho_dir))
    if cfg.constants == "v1":
        return float(base + V1_LAMBDA_OFFSET)
    return float(max(base, 1.0 / n))


def double_noise_plan(cfg: DoubleNoiseConfig, n: int, d: int, T: int, rho: float) -> PrivacyPlan:
    """Per step, with rho_t = rho/T: the gradient (g_f rho_t, sensitivity 1/n), the trace of the SOI
    (adaptive lambda only: f_tr (1 - g_f) rho_t, sensitivity 1/(4n)) and the direction (the rest,
    sensitivity set at release time from the released ||g~|| and lambda) [docs/algorithms.md §2.3]."""
    cfg = cfg.validated()
    rho_t = rho / T
    rho_g = cfg.grad_frac * rho_t
    rho_h = rho_t - rho_g
    rho_tr = cfg.trace_frac * rho_h
    rho_dir = rho_h - rho_tr
    releases = [PlannedRelease("gradient", rho_g, T, 1.0 / n, GRADIENT_SENSITIVITY)]
    if cfg.lambda_mode == "adaptive":
        releases.append(PlannedRelease("trace", rho_tr, T, 1.0 / (4.0 * n),
                                       "1/(4n): one row changes tr H by at most ||z||^2/4 / n (§2.3)"))
    releases.append(PlannedRelease("direction", rho_dir, T, None,
                                   f"||g~||/(4 n lambda^2 {'-' if cfg.modification == 'clip' else '+'} lambda) "
                                   "from the released g~ and lambda (§2.2)"))
    label = f"{'hess' if cfg.soi == 'hessian' else 'qu'}-{cfg.modification}"
    return PrivacyPlan(label, rho, T, tuple(releases)).check()


def run_double_noise(problem: LogisticProblem, contexts: list[RunContext],
                     cfg: DoubleNoiseConfig) -> list[RunResult]:
    cfg = cfg.validated()
    n, d = problem.n, problem.d
    if cfg.lambda_mode == "fixed" and cfg.modification == "clip" and cfg.lambda0 <= 1.0 / (4 * n):
        raise ValueError(f"lambda0={cfg.lambda0!r}: clip needs lambda0 > 1/(4n) = {1 / (4 * n):.3g}")
    results = []
    for ctx in contexts:
        ledger, rng = ctx.ledger, ctx.rng
        plan = double_noise_plan(cfg, n, d, ctx.iterations, ctx.rho)
        rho_dir = plan.release("direction").rho
        lambdas: list[float] = []

        def step(w, t):
            m, g, H = problem.newton_pass(w, cfg.soi)  # margins, gradient and SOI in one pass
            s_g = plan.charge(ledger, t, "gradient")
            g_reg = g + cfg.reg * w
            g_noisy = g_reg + ledger.draw_noise("gradient", g_reg, s_g, rng)
            if cfg.lambda_mode == "adaptive":
                s_tr = plan.charge(ledger, t, "trace")
                trace = float(np.trace(H))
                tau = cfg.trace_coeff * max(trace + ledger.draw_noise("trace", trace, s_tr, rng), 0.0)
                lam = adaptive_lambda(tau, n, rho_dir, cfg)
            else:
                lam = float(cfg.lambda0)
            lambdas.append(lam)
            if overflowed(H, g_noisy):
                # the bound ||g~||/(4 n lambda^2 -/+ lambda) is unbounded: infinite noise at the planned rho
                plan.charge(ledger, t, "direction", math.inf)
                return np.full(d, np.nan), m
            direction = modified_newton_direction(H, g_noisy, lam, cfg.modification)
            sens = direction_sensitivity(float(np.linalg.norm(g_noisy)), lam, n, cfg.modification)
            s_dir = plan.charge(ledger, t, "direction", sens)
            w_next = w - direction
            return w_next + ledger.draw_noise("direction", w_next, s_dir, rng), m

        res = iterate_single(problem, ctx, step, reset=cfg.reset, average=cfg.average)
        res.diagnostics["lambda"] = lambdas
        results.append(res)
    return results


def double_noise_passes(n: int, d: int, hyper: dict) -> tuple[float, float]:
    """Per update: the fused pass (gradient + SOI Gram) and the eigh of the modified Newton direction,
    1 + G + E (:mod:`.costs`)."""
    c = 1.0 + gram(d) + eigh(n, d)
    return c, c


def _audit_cases(name: str) -> tuple[AuditCase, ...]:
    """One full iteration (gradient, trace of the adaptive lambda, direction); for hess-clip and qu-add
    also the SOI canary (a record orthogonal to the start), which excites the trace release; trace_frac
    0.9 (a production option) gives the trace enough budget to be auditable."""
    cases = (AuditCase(name, ("output", "gradient-release"),
                       "one full iteration: gradient, trace (adaptive lambda), direction"),)
    if name in ("hess-clip", "qu-add"):
        cases += (AuditCase(f"{name}-soi", ("trace-release", "output"),
                            "SOI canary (zero records + one record orthogonal to w0); trace_frac 0.9; "
                            "output = w0 - released direction", hyper={"trace_frac": 0.9}, canary="zero-orthogonal"),)
    return cases


#: each variant's colour (the minibatch variants' hues, :mod:`.minibatch`, stay apart from these)
_COLOURS = {"hess-clip": "#d62728", "hess-add": "#ff7f0e", "qu-clip": "#2ca02c", "qu-add": "#9467bd"}
for _soi, _soi_label, _soi_text in (("hessian", "hess", "Hess"), ("qu", "qu", "QU")):
    for _mod in ("clip", "add"):
        register(AlgorithmSpec(f"{_soi_label}-{_mod}",
                               runner(DoubleNoiseConfig, run_double_noise, soi=_soi, modification=_mod),
                               f"double-noise Newton, {_soi} SOI, {_mod} modification (Algorithm 3)",
                               label=f"{_soi_text}-{_mod}",
                               role="second-order", paper=True, passes=double_noise_passes,
                               calibration="zcdp-plan", family="double-noise Newton",
                               colour=_COLOURS[f"{_soi_label}-{_mod}"], marker="s",
                               audit=_audit_cases(f"{_soi_label}-{_mod}"),
                               plan=planner(DoubleNoiseConfig, double_noise_plan, soi=_soi, modification=_mod)))
