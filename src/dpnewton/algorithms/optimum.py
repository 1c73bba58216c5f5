"""The non-private optimum w*, loss* of the unregularised logistic loss on Z [docs/algorithms.md §8].

Newton's method (:func:`.newton.newton_iterate`) from w = 0 with a backtracking (halving from
t = 1, Armijo constant 1e-4, down to 1e-20) line search, until ||grad|| <= tol (default 1e-10), or
until the loss has *settled*: over the last :data:`SETTLE_STEPS` Newton steps it moved by at most
:data:`SETTLED_REL` x |loss| while ||grad|| <= :data:`SETTLED_GRAD`. The second rule is for data with
a nearly separable part (fashion-mnist: ||w*|| ~ 7e5), where the computed gradient stalls at a
floating-point floor just above 1e-10 while the loss no longer moves beyond its own rounding (about
1e-12 relative there, from margins of order 1e5); the loss reached still depends on the path by about
1e-6 (docs/algorithms.md §8). It stops early when no step passes, or when a step below 1e-12 does not
lower the loss. The Hessian of a real dataset is often singular (collinear one-hot groups plus the
bias), so the direction is the pseudo-inverse solution restricted to eigenvalues above a relative
cutoff; the gradient always lies in the row space of Z, where the Hessian is invertible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from ..loss import LogisticProblem
from .newton import newton_iterate


#: the settled-loss rule (module docstring): Newton steps, relative loss range, gradient bound
SETTLE_STEPS = 20
SETTLED_REL = 1e-11
SETTLED_GRAD = 1e-8


@dataclass
class OptimumResult:
    w: np.ndarray
    loss: float
    grad_norm: float
    iterations: int
    converged: bool
    log: list[dict] = field(default_factory=list)
    #: the rule that stopped it: "gradient" (||grad|| <= tol), "settled" (the loss settled), or "" (not converged)
    criterion: str = ""


def pseudo_newton_direction(H: np.ndarray, g: np.ndarray, rcond: float = 1e-13) -> np.ndarray:
    vals, vecs = linalg.eigh(H, check_finite=False)
    keep = vals > rcond * max(vals.max(), 1e-300)
    coef = np.zeros_like(vals)
    coef[keep] = 1.0 / vals[keep]
    return vecs @ (coef * (vecs.T @ g))


def find_optimum(problem: LogisticProblem, tol: float = 1e-10, max_iter: int = 500) -> OptimumResult:
    log: list[dict] = []

    def evaluate(w):
        m = problem.margins(w)
        g = problem.grad_from_margins(m)
        return {"m": m, "f": float(problem.loss_from_margins(m)), "g": g, "gn": float(np.linalg.norm(g))}

    def converged(it, s):
        log.append({"iteration": it, "loss": s["f"], "grad_norm": s["gn"]})
        return s["gn"] <= tol or settled(s)

    def settled(s):
        recent = [e["loss"] for e in log[-SETTLE_STEPS:]]
        return (len(log) > SETTLE_STEPS and s["gn"] <= SETTLED_GRAD
                and max(recent) - min(recent) <= SETTLED_REL * abs(s["f"]))

    def direction(w, s):
        g = s["g"]
        p = pseudo_newton_direction(problem.soi_from_margins(s["m"], "hessian"), g)
        s["slope"] = float(g @ p)
        if s["slope"] <= 0:  # numerically flat direction: fall back to the gradient
            p, s["slope"] = g, s["gn"] * s["gn"]
        return p

    def step_length(w, s, p):  # halving from t = 1, Armijo constant 1e-4, down to 1e-20
        m, f, slope = s["m"], s["f"], s["slope"]
        zp = problem.margins(p)
        t = 1.0
        while t > 1e-20:
            if float(problem.loss_from_margins(m - t * zp)) <= f - 1e-4 * t * slope:
                return t
            t *= 0.5
        return None

    def stalled(s, s_new, t):
        return s["f"] - s_new["f"] <= 0 and t < 1e-12

    with threadpool_limits(1):     # one BLAS thread: the result's bits must not depend on the machine
        w, s, iterations, ok = newton_iterate(np.zeros(problem.d), evaluate, converged, direction, step_length,
                                              max_iter, lambda s: s["gn"] <= tol, stalled)
    criterion = "" if not ok else "gradient" if s["gn"] <= tol else "settled"
    return OptimumResult(w, s["f"], s["gn"], iterations, ok, log, criterion)
