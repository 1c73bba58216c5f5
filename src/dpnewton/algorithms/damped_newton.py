"""Damped private Newton of Avella-Medina, Bradshaw & Loh ("[Medina21]") as the paper runs it.

[P section 6, Baseline 3; docs/algorithms.md §4.1, the released code]: per iteration, with
rho_g = g_f rho/T and rho_H = (1 - g_f) rho/T (g_f = 0.7):

* g~ = grad(w) + reg w + N(0, s_g^2 I), s_g = (1/n)/sqrt(2 rho_g)   (sensitivity 1/n);
* H~ = eigclip(hess(w) + reg I + (E + E^T)/2, 1e-5), E_ij ~ N(0, s_H^2), s_H = (1/(4n))/sqrt(2 rho_H)
  (the Hessian moves by at most 1/(4n) in Frobenius norm; symmetrising and clipping are
  post-processing);
* w <- w - eta p with p = H~^-1 g~ and the damped step eta = log(1 + beta)/beta,
  beta = ||hess(w)^-1 grad(w)|| computed from the **exact** Hessian and gradient. That step is
  **not private** (the paper says so); ``step_rule="line-search"`` is the older code's (equally
  non-private) Armijo backtracking on the exact loss along p (:func:`.line_search.armijo_step`,
  shared with DP-GD-Oracle).

``average`` (none | uniform | tail) releases the last iterate or the mean of a window of iterates
(:func:`.base.average_window`; docs/algorithms.md §2.6): post-processing, the ledger is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..loss import LogisticProblem
from ..privacy.plan import PlannedRelease, PrivacyPlan
from .base import RunContext, RunResult, check_average, iterate_single
from .costs import eigh, gram
from .gradient_descent import GRADIENT_SENSITIVITY
from .line_search import armijo_step, ridge_line
from .registry import AlgorithmSpec, AuditCase, planner, register, runner


@dataclass(frozen=True)
class DampedNewtonConfig:
    grad_frac: float = 0.7
    eig_floor: float = 1e-5         # V2; V1 used 1e-6
    step_rule: str = "damped"       # "damped" (log(1+beta)/beta) | "line-search" (V1)
    reg: float = 1e-8
    reset: bool = False
    average: str = "none"           # released model: "none" (w_T) | "uniform" | "tail" (base.average_window)

    def validated(self) -> "DampedNewtonConfig":
        if not 0 < self.grad_frac < 1:
            raise ValueError(f"grad_frac={self.grad_frac!r} must lie in (0, 1)")
        if self.step_rule not in ("damped", "line-search"):
            raise ValueError(f"step_rule={self.step_rule!r} is unknown; choose 'damped' or 'line-search'")
        check_average(self.average)
        return self


def damped_step(beta: float) -> float:
    """log(1 + beta)/beta, with its limit 1 at beta = 0 (the code divides by zero there)."""
    return 1.0 if beta < 1e-12 else float(np.log1p(beta) / beta)


def damped_newton_plan(cfg: DampedNewtonConfig, n: int, d: int, T: int, rho: float) -> PrivacyPlan:
    """Per step, with rho_t = rho/T: the gradient (g_f rho_t, sensitivity 1/n) and the Hessian
    ((1 - g_f) rho_t, Frobenius sensitivity 1/(4n)) [docs/algorithms.md §4.1]. The damped step size
    is computed from the exact Hessian and gradient: not private, and marked so in the ledger."""
    cfg = cfg.validated()
    rho_t = rho / T
    rho_g = cfg.grad_frac * rho_t
    rho_h = rho_t - rho_g
    return PrivacyPlan("damped-newton", rho, T, (
        PlannedRelease("gradient", rho_g, T, 1.0 / n, GRADIENT_SENSITIVITY),
        PlannedRelease("hessian", rho_h, T, 1.0 / (4.0 * n),
                       "1/(4n): one row changes the Hessian by sigma'(m) z z^T / n, Frobenius norm <= 1/(4n)"),
    )).check()


def run_damped_newton(problem: LogisticProblem, contexts: list[RunContext],
                      cfg: DampedNewtonConfig = DampedNewtonConfig()) -> list[RunResult]:
    cfg = cfg.validated()
    n, d = problem.n, problem.d
    eye = np.eye(d)
    results = []
    for ctx in contexts:
        ledger, rng = ctx.ledger, ctx.rng
        ledger.mark_nonprivate("damped-Newton step size from the exact Hessian and gradient"
                               if cfg.step_rule == "damped" else "line search on the exact loss")
        plan = damped_newton_plan(cfg, n, d, ctx.iterations, ctx.rho)

        def step(w, t):
            m, g, H = problem.newton_pass(w, "hessian")  # margins, gradient and Hessian in one pass
            g = g + cfg.reg * w
            H = H + cfg.reg * eye
            s_g = plan.charge(ledger, t, "gradient")
            g_noisy = g + ledger.draw_noise("gradient", g, s_g, rng)
            s_h = plan.charge(ledger, t, "hessian")
            E = ledger.draw_noise("hessian", H, s_h, rng)
            vals, vecs = linalg.eigh(H + 0.5 * (E + E.T), check_finite=False, driver="evd")
            p = vecs @ ((vecs.T @ g_noisy) / np.maximum(vals, cfg.eig_floor))
            if cfg.step_rule == "damped":
                beta = float(np.linalg.norm(linalg.solve(H, g, assume_a="pos", check_finite=False)))
                eta = damped_step(beta)
            else:
                phi = ridge_line(problem, m, problem.margins(p), w, p, cfg.reg)
                eta = armijo_step(phi, phi(0.0), float(p @ g))
            return w - eta * p, m

        results.append(iterate_single(problem, ctx, step, reset=cfg.reset, average=cfg.average))
    return results


def damped_newton_passes(n: int, d: int, hyper: dict) -> tuple[float, float]:
    """Per update: 1 + G + 2E (the eigenvalue clip, and the exact Newton solve of its step size; :mod:`.costs`)."""
    c = 1.0 + gram(d) + 2.0 * eigh(n, d)
    return c, c


register(AlgorithmSpec("damped-newton", runner(DampedNewtonConfig, run_damped_newton),
                       "damped private Newton of [Medina21]", label="[ABL21] damped Newton",
                       role="non-private step", paper=True, passes=damped_newton_passes,
                       calibration="zcdp-plan", family="damped Newton", colour="#f032e6", marker="D",
                       audit=(AuditCase("damped-newton", ("gradient-release", "output"),
                                        "gradient + Hessian release; the damped step size is not private"),),
                       nonprivate="damped step size log(1+beta)/beta from the exact Hessian",
                       plan=planner(DampedNewtonConfig, damped_newton_plan)))
