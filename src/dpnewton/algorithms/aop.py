"""Approximate Objective Perturbation (AOP; Iyengar et al. 2019) [P section 6; docs/algorithms.md §4.2].

Constants of the reference implementation (``approximate_minima_perturbation.py`` of the dpml
benchmark, used by the paper's V1 driver): L = 1, r = 2 (GLM), beta = 1, eps_frac = 0.9,
eps_out_frac = 0.01, gamma = 1/n^2.

    eps_out = 0.01 eps,  eps_obj = eps - eps_out,  eps_p = 0.9 eps_obj
    delta_out = 0.01 delta,  delta_obj = delta - delta_out
    Lambda = r beta / (eps_obj - eps_p)
    sigma_obj = (2L/n) (1 + sqrt(2 log(1/delta_obj))) / eps_p
    sigma_out = (n gamma/Lambda) (1 + sqrt(2 log(1/delta_out))) / eps_out
    J(theta) = l(theta) + Lambda/(2n) ||theta||^2 + <b, theta>,  b ~ N(0, sigma_obj^2 I), drawn once
    theta^ = any theta with ||grad J(theta)||_2 <= gamma       (:func:`minimize_objective`)
    output theta^ + N(0, sigma_out^2 I)

Departures from the reference (documented choices):

* it runs on the same signed, projected rows Z as every other optimizer, loss
  (1/n) sum log(1 + exp(-<z_i, theta>)), so the L = 1 (and beta = 1 >= 1/4) assumptions hold
  (||z_i|| <= 1); the reference ran on raw rows of norm up to ~3.3 (docs/algorithms.md §11.2);
* randomness comes from the run's own Generator, not a reseeded global RNG;
* the reference minimised J with scipy BFGS and, when BFGS missed the tolerance, loosened it
  (gamma_mult x10 while gamma gamma_mult < 1e-4, else gamma x2) and retried with fresh noise b.
  We do not retry: which draw of b is released would then depend on the data, and the privacy
  proof covers one draw of b at a tolerance fixed in advance. gamma = 1/n^2 is fixed before the
  data are touched, b is drawn once, and a Newton method (second-order information, which BFGS
  lacks; :func:`minimize_objective`) reaches ||grad J|| <= gamma on the exact float64 gradient; if it
  does not, the run raises ``RuntimeError``;
* kept from the reference: if eps_obj - eps_p >= 1 (epsilon >= 10.1) the output is theta = 0
  (recorded in the ledger event as ``returned_zero``).

The ledger event holds the split and noise scales above, gamma, the reached ||grad J(theta^)||
(``gradient_norm``; NaN when ``returned_zero``) and the Newton steps on the full data (``solver_iterations``;
each one gradient pass, :func:`minimize_objective`).

Epsilon: AOP is calibrated to the run's (epsilon, delta), not through rho, except under the official
code's conversion (``official-fsolve``), where it runs at zcdp_to_eps(rho, delta) of that conversion's
rho, as the V1 driver passed it (:func:`aop_epsilon`; docs/algorithms.md §4.2): about 0.27 where
fsolve failed (epsilon <= ~0.13). That epsilon is the one the ledger event records.

AOP is not iterative: the run's T (``identity.iterations``) is ignored (the pipeline gives it
T = 1). The result has two points: excess_loss = [excess at theta = 0, excess at the output],
elapsed = [0, solver time].
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

from ..loss import LogisticProblem
from ..margin_functions import hessian_coefficient
from ..privacy import rho_to_epsilon
from ..privacy.ledger import ObjectivePerturbationEvent
from .base import RunContext, RunResult
from .newton import newton_iterate
from .registry import AlgorithmSpec, AuditCase, register, runner

L_CONST, R_CONST, BETA = 1.0, 2.0, 1.0
EPS_FRAC, EPS_OUT_FRAC = 0.9, 0.01
MAX_NEWTON_ITERATIONS = 100
"""Cap of :func:`minimize_objective` (steps on the full data, one gradient pass each): 5-10 on w8a, a9a, phishing,
kddcup99 and a dense 1e6 x 100 problem at epsilon 0.1-10 with objpert's tolerance 1e-12."""
HESSIAN_REUSE_CONTRACTION = 0.25
""":func:`minimize_objective` keeps the last Hessian while each full step shrinks ||grad J|| at least 4-fold."""
WARM_START_STEP = 8
"""The warm start solves J over every 8th row (:func:`_warm_start`)."""
WARM_START_MIN_ROWS = 1000
"""No warm start from a subsample of fewer rows (nor of fewer than 8 d)."""
WARM_START_REDUCTION = 1e-3
"""A warm start stops when ||grad J|| on its subsample is 1e-3 of its value at the subsample's start (the
coarser subsample's minimiser): finer would be lost in the gap between the subsample's J and the full J."""
WARM_START_MAX_ITERATIONS = 30
"""Newton steps of one warm-start level; its last iterate is used whether or not it met the tolerance."""


@dataclass(frozen=True)
class AopConfig:
    """AOP has no hyper-parameters (the registry builds and validates an empty config)."""

    def validated(self) -> "AopConfig":
        return self


def aop_parameters(epsilon: float, delta: float, n: int, gamma: float) -> dict:
    """The (epsilon, delta) split and noise scales of AOP for solver tolerance ``gamma``."""
    if not epsilon > 0:
        raise ValueError(f"epsilon={epsilon!r} must be > 0")
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta!r} must lie in (0, 1)")
    eps_out = EPS_OUT_FRAC * epsilon
    eps_obj = epsilon - eps_out
    eps_p = EPS_FRAC * eps_obj
    delta_out = EPS_OUT_FRAC * delta
    delta_obj = delta - delta_out
    lam = R_CONST * BETA / (eps_obj - eps_p)
    sigma_obj = (2.0 * L_CONST / n) * (1.0 + math.sqrt(2.0 * math.log(1.0 / delta_obj))) / eps_p
    sigma_out = (n * gamma / lam) * (1.0 + math.sqrt(2.0 * math.log(1.0 / delta_out))) / eps_out
    return {"eps_obj": eps_obj, "eps_p": eps_p, "eps_out": eps_out, "delta_obj": delta_obj,
            "delta_out": delta_out, "Lambda": lam, "sigma_obj": sigma_obj, "sigma_out": sigma_out,
            "gamma": gamma, "returned_zero": bool(eps_obj - eps_p >= 1.0)}


def aop_objective(problem: LogisticProblem, lam: float, b: np.ndarray):
    """J(theta) = l(theta) + Lambda/(2n)||theta||^2 + <b, theta> and its gradient, from one pass over Z
    (:func:`objective_at`; the solver's stopping rule tests this gradient, bit for bit)."""
    mu = lam / problem.n

    def fun(theta):
        s = objective_at(problem, mu, b, theta)
        return s["value"], s["grad"]

    return fun


def objective_at(problem: LogisticProblem, mu: float, b: np.ndarray, theta: np.ndarray) -> dict:
    """J = l + (mu/2)||.||^2 + <b, .> at theta: its margins ``m``, ``value``, gradient ``grad`` and the norm
    ``reached`` of the gradient, from one blocked pass (:meth:`LogisticProblem.margins_and_grads`)."""
    M, G = problem.margins_and_grads(theta[None, :])
    m = M[:, 0]
    grad = G[0] + mu * theta + b
    return {"theta": theta, "m": m, "grad": grad, "value": objective_value(problem, mu, b, theta, m),
            "reached": float(np.linalg.norm(grad))}


def objective_value(problem: LogisticProblem, mu: float, b: np.ndarray, theta: np.ndarray, m: np.ndarray) -> float:
    """J(theta) from the margins m = Z theta."""
    return float(problem.loss_from_margins(m)) + 0.5 * mu * float(theta @ theta) + float(b @ theta)


def minimize_objective(problem: LogisticProblem, lam: float, b: np.ndarray, gamma: float,
                       max_iterations: int | None = None) -> tuple[np.ndarray, float, int]:
    """Newton's method (:func:`.newton.newton_iterate`) on J until ||grad J(theta)||_2 <= gamma.

    Returns (theta, ||grad J(theta)||_2, Newton steps on the full data); raises ``RuntimeError`` if the
    tolerance is not met within ``max_iterations`` (default :data:`MAX_NEWTON_ITERATIONS`) steps.

    J(theta) = l(theta) + (mu/2)||theta||^2 + <b, theta>, mu = Lambda/n, is self-concordant with
    M_f = 1/(2 sqrt(mu)) (|phi'''| <= phi'' for the logistic phi, ||z_i|| <= 1, H >= mu I; Nesterov 2004,
    section 4.1). Each step (:func:`_newton_solve`): direction p = H^-1 grad J, decrement
    lambda = sqrt(<grad J, p>); the full step once M_f lambda < 1/4 (quadratic convergence), before that
    backtracking (halving, Armijo constant 1/4) down to the damped step 1/(1 + M_f lambda), which
    decreases J on its own.

    Passes over Z: one fused pass per iterate gives its margins and grad J (blocked, as
    :meth:`LogisticProblem.margins_and_grads`). The line search's trial at t = 1 is the next iterate's
    pass; shorter trials are read off the margins, m(theta - t p) = m(theta) + t (m(theta - p) - m(theta)).
    The Hessian only shapes the direction, so it is taken from every :data:`WARM_START_STEP`-th row where
    those are many (a subsampled Newton step; one Gram pass over them, :meth:`LogisticProblem.weighted_gram`,
    from the margins already at hand), from all rows otherwise or once such a Hessian's step was damped or
    shrank ||grad J|| less than 1/:data:`HESSIAN_REUSE_CONTRACTION`-fold. It is recomputed unless the last
    step was a full one that shrank ||grad J|| at least that much; then the previous Cholesky factor is
    reused (a chord step, converging at least at that rate).

    Start (:func:`_warm_start`): the minimiser of J with l taken over every :data:`WARM_START_STEP`-th row
    (same mu and b; itself warm-started the same way), if that subsample has at least
    :data:`WARM_START_MIN_ROWS` and 8 d rows and J there is at most J(0) = log 2; otherwise theta = 0.

    The stopping rule tests the gradient of :func:`aop_objective` itself (the same pass,
    :func:`objective_at`, bit for bit), which the audit and the tests check. Everything is float64 whatever
    the problem's precision (gamma is far below float32 rounding; float32 rows cast up exactly): gradients
    and margins must be, and the Hessian passes, now over an eighth of the rows, are no longer the cost.
    Every choice above is a deterministic function of (Z, b), so the output is a function of the data and
    the one draw of b, as the approximate-minimum analyses assume.
    """
    problem = problem.with_precision("float64")
    n, d = problem.n, problem.d
    cap = MAX_NEWTON_ITERATIONS if max_iterations is None else max_iterations
    mu = lam / n
    theta, reached, steps, ok, _ = _newton_solve(problem, mu, b, gamma, cap, _warm_start(problem, mu, b))
    if ok:
        return theta, reached, steps
    raise RuntimeError(
        f"Newton did not reach ||grad J|| <= the declared tolerance within {cap} steps. The objective noise is "
        "not redrawn (the released draw would then depend on the data), and the message names no value "
        "computed from the data. Fix: raise the card's MAX_NEWTON_ITERATIONS (dpnewton.algorithms.aop, "
        "dpnewton.algorithms.objpert).")


def _warm_start(problem: LogisticProblem, mu: float, b: np.ndarray) -> tuple | None:
    """(theta, Cholesky factor of its last Hessian): the approximate minimiser of J with the loss over every
    k-th row (:meth:`LogisticProblem.every_kth_row`, k = :data:`WARM_START_STEP`; the same mu and b), solved
    until ||grad|| is :data:`WARM_START_REDUCTION` times its value at the subsample's own start (at most
    :data:`WARM_START_MAX_ITERATIONS` steps); None (start at 0) when that subsample has fewer than
    :data:`WARM_START_MIN_ROWS` or 8 d rows."""
    if not _subsample_is_large(problem):
        return None
    sub = problem.every_kth_row(WARM_START_STEP)
    theta, _, _, _, factor = _newton_solve(sub, mu, b, -WARM_START_REDUCTION, WARM_START_MAX_ITERATIONS,
                                           _warm_start(sub, mu, b))
    return (theta, factor) if np.isfinite(theta).all() else None


def _subsample_is_large(problem: LogisticProblem) -> bool:
    """Every :data:`WARM_START_STEP`-th row makes at least :data:`WARM_START_MIN_ROWS` and 8 d rows."""
    return problem.n // WARM_START_STEP >= max(WARM_START_MIN_ROWS, 8 * problem.d)


def _newton_solve(problem: LogisticProblem, mu: float, b: np.ndarray, gamma: float, cap: int,
                  start: tuple | None) -> tuple[np.ndarray, float, int, bool, tuple | None]:
    """Newton on J = l + (mu/2)||.||^2 + <b, .> over ``problem``'s rows (:func:`minimize_objective`) until
    ||grad J|| <= gamma (gamma < 0: until it is |gamma| times its value at the start). ``start`` = (theta,
    Cholesky factor of a Hessian near it) from a warm start (the factor gives the first step) or None: from
    0, as when J(theta) > J(0) = log 2. Hessians come from every k-th row when those are many enough
    (:func:`_subsample_is_large`), from all rows once a step with such a fresh Hessian was damped or failed
    to contract ||grad J|| by :data:`HESSIAN_REUSE_CONTRACTION`.
    Returns (theta, norm, steps, converged, last factor)."""
    d, k = problem.d, WARM_START_STEP
    m_f = 0.5 / math.sqrt(mu)
    sub = problem.every_kth_row(k) if _subsample_is_large(problem) else None
    chord = {"factor": None, "keep": 0, "reached": math.inf, "full_step": False, "fresh_sub": False}
    last = {}

    def evaluate(theta):  # one pass; the last point's state is kept (a line search's full step is the next iterate)
        s = last.get("state")
        if s is None or not np.array_equal(s["theta"], theta):
            s = last["state"] = objective_at(problem, mu, b, theta)
        return s

    def converged(steps, s):
        return s["reached"] <= gamma

    def direction(theta, s):
        nonlocal sub
        grad = s["grad"]
        contracted = chord["full_step"] and s["reached"] <= HESSIAN_REUSE_CONTRACTION * chord["reached"]
        if chord["fresh_sub"] and not contracted:
            sub = None  # a step with a fresh subsample Hessian was damped or did not contract: all rows from now on
        chord["fresh_sub"] = False
        if chord["keep"] > 0 and contracted:
            chord["keep"] -= 1
        else:
            if sub is None:
                hess = problem.weighted_gram(hessian_coefficient(s["m"]))
            else:
                hess = sub.weighted_gram(hessian_coefficient(s["m"][::k]))
            hess[np.diag_indices(d)] += mu
            chord.update(factor=linalg.cho_factor(hess, overwrite_a=True), keep=math.inf, fresh_sub=sub is not None)
        chord["reached"] = s["reached"]
        p = linalg.cho_solve(chord["factor"], grad)
        s["decrement"] = math.sqrt(max(float(grad @ p), 0.0))
        return p

    def step_length(theta, s, p):
        decrement = s["decrement"]
        chord["full_step"] = True
        if m_f * decrement < 0.25:
            return 1.0
        full = evaluate(theta - p)
        if full["value"] <= s["value"] - 0.25 * decrement**2:
            return 1.0
        chord["full_step"] = False
        t_damped = 1.0 / (1.0 + m_f * decrement)
        t, dm = 0.5, full["m"] - s["m"]
        while (t > t_damped and objective_value(problem, mu, b, theta - t * p, s["m"] + t * dm)
               > s["value"] - 0.25 * t * decrement**2):
            t *= 0.5
        return max(t, t_damped)

    x0 = np.zeros(d)
    if start is not None:
        s0 = evaluate(start[0])
        if s0["value"] <= math.log(2.0):
            x0 = start[0]
            chord.update(factor=start[1], keep=int(start[1] is not None), full_step=True)  # its factor: one step
    if gamma < 0:
        gamma = -gamma * evaluate(x0)["reached"]
    theta, s, steps, ok = newton_iterate(x0, evaluate, converged, direction, step_length, cap,
                                         lambda s: converged(cap, s))
    return theta, s["reached"], steps, ok, chord["factor"]


def aop_epsilon(ctx: RunContext) -> float:
    """The epsilon AOP is calibrated to: the run's, or under ``official-fsolve`` zcdp_to_eps(rho, delta)
    of that conversion's rho (the V1 driver's call; equal to the run's epsilon where fsolve converged)."""
    if ctx.conversion == "official-fsolve":
        return float(rho_to_epsilon(ctx.rho, ctx.delta, "official-fsolve"))
    return float(ctx.epsilon)


def run_aop_single(problem: LogisticProblem, ctx: RunContext) -> RunResult:
    n, d, rng = problem.n, problem.d, ctx.rng
    gamma = 1.0 / n**2
    start = time.perf_counter()
    epsilon = aop_epsilon(ctx)
    params = aop_parameters(epsilon, ctx.delta, n, gamma)
    if params["returned_zero"]:
        theta, reached, steps = np.zeros(d), float("nan"), 0
    else:
        # b is the linear term's noise (its input is 0): sensitivity 2L/n, the replace-one bound of sigma_obj
        b = ctx.ledger.draw_noise("objective", np.zeros(d), ctx.ledger.noise("objective", params["sigma_obj"]), rng,
                                  sensitivity=2.0 * L_CONST / n)
        theta_hat, reached, steps = minimize_objective(problem, params["Lambda"], b, gamma)
        theta = theta_hat + ctx.ledger.draw_noise("output", theta_hat, ctx.ledger.noise("output", params["sigma_out"]),
                                                  rng, sensitivity=n * gamma / params["Lambda"])
    elapsed = time.perf_counter() - start
    loss_opt = np.nan if problem.loss_opt is None else problem.loss_opt
    m = problem.margins(theta)   # one pass for the output's loss and training accuracy; at theta = 0 every margin is 0
    losses = np.array([float(problem.loss_from_margins(np.zeros(n))), float(problem.loss_from_margins(m))])
    ctx.ledger.charge_event(ObjectivePerturbationEvent(epsilon, ctx.delta, tuple(params.items()),
                                                       reached, steps))
    return RunResult(ctx.identity, theta, losses - loss_opt, np.array([0.0, elapsed]), ctx.ledger, 0,
                     {"diverged": bool(not np.isfinite(theta).all()), "iterations_ignored": ctx.iterations,
                      "solver_iterations": steps, "gradient_norm": reached},
                     train_accuracy=problem.accuracy_from_margins(m))


def run_aop(problem: LogisticProblem, contexts: list[RunContext], cfg: AopConfig = AopConfig()) -> list[RunResult]:
    return [run_aop_single(problem, ctx) for ctx in contexts]


register(AlgorithmSpec("aop", runner(AopConfig, run_aop),
                       "approximate objective perturbation (Iyengar et al. 2019) on Z; T is ignored",
                       label="AOP", role="one-shot", paper=True, iterative=False, timed_as="hess-clip",
                       calibration="one-shot", family="objective perturbation", colour="#f6a600", marker="*",
                       # the output noise (sigma_out ~ 0.59 for n = 50) swamps the output; the perturbed minimiser
                       # before it is the objective-perturbation release with its own claim eps_obj (§4.2)
                       audit=(AuditCase("aop", ("output", "objective-release"), "approximate objective "
                                        "perturbation (Newton to 1/n^2 + output noise)", pin_start=False),)))
