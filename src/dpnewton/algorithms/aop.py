"""Approximate Objective Perturbation (AOP; Iyengar et al. 2019) [paper_spec 4.2].

Constants of the reference implementation (``approximate_minima_perturbation.py`` of the dpml
benchmark, used by the paper's V1 driver): L = 1, r = 2 (GLM), beta = 1, eps_frac = 0.9,
eps_out_frac = 0.01, gamma = 1/n^2.

    eps_out = 0.01 eps,  eps_obj = eps - eps_out,  eps_p = 0.9 eps_obj
    delta_out = 0.01 delta,  delta_obj = delta - delta_out
    Lambda = r beta / (eps_obj - eps_p)
    sigma_obj = (2L/n) (1 + sqrt(2 log(1/delta_obj))) / eps_p
    sigma_out = (n gamma/Lambda) (1 + sqrt(2 log(1/delta_out))) / eps_out
    theta^ ~= argmin_theta  l(theta) + Lambda/(2n) ||theta||^2 + <b, theta>,  b ~ N(0, sigma_obj^2 I)
              (scipy BFGS from 0, gradient norm tolerance gamma)
    output theta^ + N(0, sigma_out^2 I)

Departures from the reference (documented choices):

* it runs on the same signed, projected rows Z as every other optimizer, loss
  (1/n) sum log(1 + exp(-<z_i, theta>)), so the L = 1 (and beta = 1 >= 1/4) assumptions hold
  (||z_i|| <= 1); the reference ran on raw rows of norm up to ~3.3 (paper_spec 11.2);
* randomness comes from the run's own Generator, not a reseeded global RNG;
* when BFGS fails the reference loosens the tolerance (gamma_mult x10 while gamma gamma_mult <
  1e-4, else gamma x2) and retries with fresh noise; we do the same but compute sigma_out from
  the tolerance actually met (gamma * gamma_mult), which the privacy proof needs;
* kept from the reference: if eps_obj - eps_p >= 1 (epsilon >= 10.1) the output is theta = 0
  (recorded in the ledger event as ``returned_zero``).

AOP is not iterative: the run's T (``identity.iterations``) is ignored (the pipeline gives it
T = 1). The result has two points: excess_loss = [excess at theta = 0, excess at the output],
elapsed = [0, solver time].
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ..loss import LogisticProblem
from .base import RunContext, RunResult

L_CONST, R_CONST, BETA = 1.0, 2.0, 1.0
EPS_FRAC, EPS_OUT_FRAC = 0.9, 0.01


@dataclass(frozen=True)
class AopConfig:
    max_attempts: int = 50


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
    """J(theta) = l(theta) + Lambda/(2n)||theta||^2 + <b, theta> and its gradient."""
    n, Z = problem.n, problem.Z

    def fun(theta):
        m = Z @ theta
        value = float(problem.loss_from_margins(m)) + lam / (2.0 * n) * float(theta @ theta) + float(b @ theta)
        grad = -(Z.T @ special.expit(-m)) / n + (lam / n) * theta + b
        return value, grad

    return fun


def run_aop_single(problem: LogisticProblem, ctx: RunContext, cfg: AopConfig = AopConfig()) -> RunResult:
    n, d, rng = problem.n, problem.d, ctx.rng
    gamma, mult = 1.0 / n**2, 1.0
    start = time.perf_counter()
    params = aop_parameters(ctx.epsilon, ctx.delta, n, gamma)
    attempts = 0
    if params["returned_zero"]:
        theta = np.zeros(d)
    else:
        while True:
            attempts += 1
            tol = gamma * mult
            params = aop_parameters(ctx.epsilon, ctx.delta, n, tol)
            b = params["sigma_obj"] * rng.standard_normal(d)
            res = optimize.minimize(aop_objective(problem, params["Lambda"], b), np.zeros(d), jac=True,
                                    method="BFGS", options={"gtol": tol, "norm": 2})
            if res.success and float(np.linalg.norm(res.jac)) <= tol:
                break
            if attempts >= cfg.max_attempts:
                raise RuntimeError(f"AOP: BFGS did not reach tolerance after {attempts} attempts")
            if gamma * mult < 1e-4:
                mult *= 10.0
            else:
                mult, gamma = 1.0, 2.0 * gamma
        theta = res.x + params["sigma_out"] * rng.standard_normal(d)
    elapsed = time.perf_counter() - start
    loss_opt = np.nan if problem.loss_opt is None else problem.loss_opt
    losses = np.array([float(problem.loss(np.zeros(d))), float(problem.loss(theta))])
    event = {"mechanism": "approximate objective perturbation", "target_epsilon": ctx.epsilon,
             "delta": ctx.delta, "attempts": attempts, **params}
    ctx.ledger.charge_event(event)
    return RunResult(ctx.identity, theta, losses - loss_opt, np.array([0.0, elapsed]), ctx.ledger, 0,
                     {"diverged": bool(not np.isfinite(theta).all()), "iterations_ignored": ctx.iterations})


def run_aop(problem: LogisticProblem, contexts: list[RunContext], cfg: AopConfig = AopConfig()) -> list[RunResult]:
    if isinstance(cfg.max_attempts, bool) or not isinstance(cfg.max_attempts, int) or cfg.max_attempts < 1:
        raise ValueError(f"max_attempts={cfg.max_attempts!r} must be an integer >= 1")
    return [run_aop_single(problem, ctx, cfg) for ctx in contexts]
