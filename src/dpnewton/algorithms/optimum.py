"""The non-private optimum w*, loss* of the unregularised logistic loss on Z [docs/algorithms.md §8].

Newton's method from w = 0 with a backtracking (halving, Armijo 1e-4) line search, until
||grad|| <= tol (default 1e-10). The Hessian of a real dataset is often singular (collinear
one-hot groups plus the bias), so the direction is the pseudo-inverse solution restricted to
eigenvalues above a relative cutoff; the gradient always lies in the row space of Z, where the
Hessian is invertible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from ..loss import LogisticProblem


@dataclass
class OptimumResult:
    w: np.ndarray
    loss: float
    grad_norm: float
    iterations: int
    converged: bool
    log: list[dict] = field(default_factory=list)


def pseudo_newton_direction(H: np.ndarray, g: np.ndarray, rcond: float = 1e-13) -> np.ndarray:
    vals, vecs = linalg.eigh(H, check_finite=False)
    keep = vals > rcond * max(vals.max(), 1e-300)
    coef = np.zeros_like(vals)
    coef[keep] = 1.0 / vals[keep]
    return vecs @ (coef * (vecs.T @ g))


def find_optimum(problem: LogisticProblem, tol: float = 1e-10, max_iter: int = 500) -> OptimumResult:
    w = np.zeros(problem.d)
    log: list[dict] = []
    m = problem.margins(w)
    f = float(problem.loss_from_margins(m))
    for it in range(max_iter):
        g = problem.grad_from_margins(m)
        gn = float(np.linalg.norm(g))
        log.append({"iteration": it, "loss": f, "grad_norm": gn})
        if gn <= tol:
            return OptimumResult(w, f, gn, it, True, log)
        p = pseudo_newton_direction(problem.soi_from_margins(m, "hessian"), g)
        slope = float(g @ p)
        if slope <= 0:  # numerically flat direction: fall back to the gradient
            p, slope = g, gn * gn
        zp = problem.margins(p)
        t = 1.0
        while t > 1e-20:
            m_new = m - t * zp
            f_new = float(problem.loss_from_margins(m_new))
            if f_new <= f - 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            break
        w = w - t * p
        m = problem.margins(w)
        f_prev, f = f, float(problem.loss_from_margins(m))
        if f_prev - f <= 0 and t < 1e-12:
            break
    g = problem.grad_from_margins(m)
    gn = float(np.linalg.norm(g))
    return OptimumResult(w, f, gn, len(log), gn <= tol, log)
