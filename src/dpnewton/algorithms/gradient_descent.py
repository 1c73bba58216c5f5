"""Full-batch noisy gradient methods: DP-GD and DP-GD-Oracle (batched over runs).

Both release the mean gradient (L2 sensitivity 1/n: each projected row has norm <= 1 and the
per-example gradient sigma(-m_i) z_i has norm <= 1) once per iteration with rho_t = rho/T. Under
the ``add-remove`` relation n is the released count N and the mean is sum/N
(:mod:`dpnewton.privacy.neighbouring`).

* DP-GD [P sections 4 and 6, Baseline 1; docs/algorithms.md §3.1]: w <- w - eta (grad(w) + N(0, s^2 I)) with
  eta = 1/L1 = 4 (the logistic loss is 1/4-smooth on the unit ball) and s = (1/n)/sqrt(2 rho/T);
  the released code uses the gradient without regulariser.
* DP-GD-Oracle [P section 6; docs/algorithms.md §3.2]: g~ = grad(w) + reg w + N(0, s^2 I); the step is
  chosen by a line search on the *exact* loss, which is **not private** (it is the paper's oracle
  baseline). ``line_search="armijo"`` is the official code's backtracking (t from 100, x0.95,
  Armijo constant 0.4, floor 1e-6; accepts the first t with l(w - t g~) < l(w) - 0.4 t <g~, grad>;
  :func:`.line_search.armijo_step`, shared with damped Newton);
  ``"exact"`` is the paper's argmin over eta in [0, 100] (bounded Brent).

``average`` (none | uniform | tail, both methods): the released model is the last iterate or the
mean of a window of iterates (:func:`.base.average_window`; docs/algorithms.md §2.6), computed by
the batched driver from running sums: post-processing, the ledger is unchanged.

All runs of a batch share each pass over Z (margins and gradients of every run in one blocked
sweep, :meth:`LogisticProblem.margins_and_grads`). Both cards are ``lockstep``: a batch may hold runs of
several configurations (``cfg`` one per run: DP-GD's step, the Oracle's line search and reg, either's
reset and average) at several budgets, each run applying its own. A trial step of the line search costs O(n)
because l(w - t g~) only needs m - t Z g~, where Z g~ is one more batched pass. The Armijo search
finds the official scan's step by bisection over the candidate list (see :func:`.line_search.armijo_step`), so a
step costs O(log K) trial evaluations instead of up to K = 360.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ..loss import LogisticProblem
from ..privacy.neighbouring import RELATIONS
from ..privacy.plan import PlannedRelease, PrivacyPlan
from .base import RESET_NONPRIVATE, RunContext, RunResult, check_average, iterate_batched, per_run
from .line_search import ARMIJO_START, armijo_step, ridge_line
from .registry import AlgorithmSpec, AuditCase, planner, register, runner

DPGD_STEP = 4.0  # 1/L1 with L1 = 1/4 (Remark 5.2)
#: DP-GD-Oracle's Armijo scan (t = 100 x 0.95^k down to 1e-6: ~360 candidates) found by bisection: about
#: log2(360) ~ 9 loss evaluations per step, each the margins Z w (half a gradient pass)
ORACLE_LOSS_EVALS = 9


@dataclass(frozen=True)
class GradientDescentConfig:
    step: float = DPGD_STEP
    reset: bool = False
    average: str = "none"         # released model: "none" (w_T) | "uniform" | "tail" (base.average_window)

    def validated(self) -> "GradientDescentConfig":
        if not self.step > 0:
            raise ValueError(f"step={self.step!r} must be > 0")
        check_average(self.average)
        return self

    def nonprivate_parts(self) -> tuple[str, ...]:
        return (RESET_NONPRIVATE,) if self.reset else ()


@dataclass(frozen=True)
class OracleConfig:
    line_search: str = "armijo"   # "armijo" (official code) | "exact" (paper)
    reg: float = 1e-8
    reset: bool = False
    average: str = "none"         # as GradientDescentConfig.average

    def validated(self) -> "OracleConfig":
        if self.line_search not in ("armijo", "exact"):
            raise ValueError(f"line_search={self.line_search!r} is unknown; choose 'armijo' or 'exact'")
        check_average(self.average)
        return self

    def nonprivate_parts(self) -> tuple[str, ...]:
        return (f"step size by {self.line_search} line search on the exact loss",) + (
            (RESET_NONPRIVATE,) if self.reset else ())


GRADIENT_SENSITIVITY = "1/n: the mean of per-row gradients sigma(-m_i) z_i of norm <= 1 (§6.1)"


def gradient_release(n: int, T: int, rho: float) -> PlannedRelease:
    """T releases of the mean gradient, rho/T each (docs/algorithms.md §3.1)."""
    return PlannedRelease("gradient", rho / T, T, 1.0 / n, GRADIENT_SENSITIVITY)


def gradient_plan(cfg, n: int, d: int, T: int, rho: float, algorithm: str = "dp-gd") -> PrivacyPlan:
    """DP-GD's and DP-GD-Oracle's plan: the T gradient releases (the Oracle's line search reads the
    exact loss and is marked non-private in the ledger; it releases nothing of its own)."""
    return PrivacyPlan(algorithm, rho, T, (gradient_release(n, T, rho),)).check()


def noisy_gradients(problem: LogisticProblem, G: np.ndarray, contexts: list[RunContext], t: int) -> np.ndarray:
    """Add each run's own Gaussian noise to its row of G (as the run's mean sum/N,
    :meth:`RunContext.rescale`), charging the release through its plan (``ctx.state["plan"]``)."""
    out = np.empty_like(G)
    for j, ctx in enumerate(contexts):
        s = ctx.state["plan"].charge(ctx.ledger, t, "gradient")
        g = ctx.rescale(G[j], problem)
        out[j] = g + ctx.ledger.draw_noise("gradient", g, s, ctx.rng)
    return out


def run_dp_gd(problem: LogisticProblem, contexts: list[RunContext],
              cfg: GradientDescentConfig | list[GradientDescentConfig] = GradientDescentConfig()) -> list[RunResult]:
    """DP-GD for every context, with ``cfg`` (or ``cfg[i]`` for context i, :func:`.base.per_run`)."""
    cfgs = [c.validated() for c in per_run(cfg, contexts)]
    for c, k in zip(contexts, cfgs):
        c.state = {"cfg": k, "plan": gradient_plan(k, c.rows(problem), problem.d, c.iterations, c.rho)}

    def step(W, M, G, ctxs, t):
        eta = np.array([c.state["cfg"].step for c in ctxs])[:, None]    # eta_j x row j: the bits of a scalar eta
        return W - eta * noisy_gradients(problem, G, ctxs, t)

    return iterate_batched(problem, contexts, step, reset=[k.reset for k in cfgs], average=[k.average for k in cfgs])


def exact_step(phi) -> float:
    """argmin over eta in [0, 100] of phi(eta) (bounded Brent); 0 if no eta improves phi(0)."""
    res = optimize.minimize_scalar(phi, bounds=(0.0, ARMIJO_START), method="bounded",
                                   options={"xatol": 1e-10})
    return float(res.x) if res.fun < phi(0.0) else 0.0


def run_dp_gd_oracle(problem: LogisticProblem, contexts: list[RunContext],
                     cfg: OracleConfig | list[OracleConfig] = OracleConfig()) -> list[RunResult]:
    """DP-GD-Oracle for every context, with ``cfg`` (or ``cfg[i]`` for context i, :func:`.base.per_run`)."""
    cfgs = [c.validated() for c in per_run(cfg, contexts)]
    for ctx, k in zip(contexts, cfgs):
        for part in k.nonprivate_parts():
            ctx.ledger.mark_nonprivate(part)
        ctx.state = {"cfg": k,
                     "plan": gradient_plan(k, problem.n, problem.d, ctx.iterations, ctx.rho, "dp-gd-oracle")}

    def step(W, M, G, ctxs, t):
        reg = np.array([c.state["cfg"].reg for c in ctxs])[:, None]
        G = G + reg * W
        Gn = noisy_gradients(problem, G, ctxs, t)
        ZG = problem.margins(Gn)  # Z g~ for every run, one batched pass
        W_next = np.empty_like(W)
        for j, ctx in enumerate(ctxs):
            w, g_noisy = W[j], Gn[j]
            phi = ridge_line(problem, M[:, j], ZG[:, j], w, g_noisy, reg[j, 0])
            if ctx.state["cfg"].line_search == "armijo":
                eta = armijo_step(phi, phi(0.0), float(g_noisy @ G[j]))
            else:
                eta = exact_step(phi)
            W_next[j] = w - eta * g_noisy
        return W_next

    return iterate_batched(problem, contexts, step, reset=[k.reset for k in cfgs], average=[k.average for k in cfgs])


register(AlgorithmSpec("dp-gd", runner(GradientDescentConfig, run_dp_gd), "DP-GD with step 1/L1 = 4",
                       label="DP-GD", role="first-order", paper=True, passes=lambda n, d, hyper: (1.0, 1.0),
                       calibration="zcdp-plan", family="gradient descent", colour="#1f77b4", marker="o",
                       audit=(AuditCase("dp-gd", ("output",), "T=1, step 4: one Gaussian release"),
                              AuditCase("dp-gd-T5", ("output",), "T=5, step 0.05 (small step keeps the canary's "
                                        "effect on w_T undamped)", iterations=5, hyper={"step": 0.05})),
                       batched=True, lockstep=True, plan=planner(GradientDescentConfig, gradient_plan),
                       relations=RELATIONS))
register(AlgorithmSpec("dp-gd-oracle", runner(OracleConfig, run_dp_gd_oracle),
                       "noisy GD with a line-search step on the exact loss", label="DP-GD-Oracle",
                       role="non-private step", paper=True, batched=True, lockstep=True,
                       calibration="zcdp-plan", family="gradient descent", colour="#7f7f7f", marker="o",
                       nonprivate="line-search step size",
                       audit=(),  # its gradient releases are DP-GD's (audited on dp-gd's card)
                       # a gradient pass + ORACLE_LOSS_EVALS loss evaluations (half a pass each) per update
                       passes=lambda n, d, hyper: (1.0 + 0.5 * ORACLE_LOSS_EVALS,) * 2,
                       plan=planner(OracleConfig,
                                    lambda cfg, n, d, T, rho: gradient_plan(cfg, n, d, T, rho, "dp-gd-oracle")),
                       edge_note="DP-GD-Oracle takes each step size from an Armijo line search on the exact "
                       "(non-private) loss, which accepts a step only if it decreases that loss (or falls back to "
                       "a 1e-6 step): every run is a descent method whatever its noise, so more iterations keep "
                       "helping and its best T is not expected to become interior at any cap."))
