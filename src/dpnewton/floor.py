"""The Gaussian ridge floor F*: a computable reference excess loss per (dataset, epsilon, conversion)
[docs/algorithms.md §8.1].

**Gaussian ridge floor (local quadratic model), not a lower bound.** With H* = U diag(l) U^T the
Hessian of the mean logistic loss at w*, b = U^T w*, Delta = 1/n (the mean gradient's l2
sensitivity, n public) and s2 = Delta^2 / (2 rho) (the variance of the Gaussian mechanism at
rho-zCDP):

    F*(rho) = min over lam >= 0 of  phi(lam),
    phi(lam) = 1/2 sum_i l_i [ (lam / (l_i + lam))^2 b_i^2 + s2 / (l_i + lam)^2 ]

Derivation. Replace the loss by its local quadratic model f(w) = f(w*) + 1/2 (w - w*)^T H (w - w*),
H = H*. The data enter the model only through its gradient at the origin, grad f(0) = -H w*, a mean
gradient with l2 sensitivity Delta; the Gaussian mechanism releases g~ = -H w* - xi with
xi ~ N(0, s2 I) at rho-zCDP (equivalently: a linear objective perturbation <xi, w>; the output is the
same). Ridge-regularised ERM on the released model,

    w_lam = argmin_w  1/2 w^T H w + <g~, w> + lam/2 ||w||^2 = (H + lam I)^-1 (H w* + xi),

has error w_lam - w* = (H + lam I)^-1 (xi - lam w*), in the eigenbasis
e_i = (xi_i - lam b_i) / (l_i + lam). Its excess loss on the model is 1/2 sum_i l_i e_i^2, and since
E xi_i = 0, E xi_i^2 = s2,

    E [f(w_lam) - f(w*)] = 1/2 sum_i l_i (lam^2 b_i^2 + s2) / (l_i + lam)^2 = phi(lam):

a bias term (the shrinkage towards 0) plus a variance term (the noise). F* is phi at the best lam.

Why it is not a lower bound: it is the error of one family of mechanisms (Gaussian noise on one
gradient, then ridge), with lam tuned using w* (non-private), on the quadratic model at w* (the
logistic loss is not quadratic away from w*, and H* itself depends on the data but is treated as
public). A private method can beat it (other mechanisms, iterative methods whose later gradients
are closer to 0, a better shrinkage target) and a real run can lie above it. It is not a target
either: it illustrates what a local quadratic model predicts at the budget, to be read beside the
trivial output w = 0 (excess loss ln 2 - loss*; on the model f(0) - f(w*) = 1/2 b^T diag(l) b =
phi(inf)).

**Its mechanism on the true loss** (:func:`mechanism_excess_loss`, the floor table's
``mechanism_excess_loss``): the same release and ridge solution, w_lam = (H* + lam* I)^-1 (H* w* + xi),
evaluated on the true mean logistic loss instead of the quadratic model, L(w_lam) - L(w*), averaged
over :data:`MECHANISM_DRAWS` draws of xi. In the eigenbasis w_lam = U diag(1 / (l + lam*)) (l b + eta)
with eta = U^T xi ~ N(0, s2 I), so each draw is one d-vector of standard normals scaled by sqrt(s2) and
one pass over the data. The draws are the same standard normals for every cell of a dataset, from
:func:`dpnewton.seeding.dataset_generator` (stream :data:`MECHANISM_STREAM`): deterministic, like every
other draw of the package. The gap between the two is the quadratic model's error at that noise scale
(the logistic loss grows more slowly than the model far from w*, and the model's H* is the curvature at
w* only).

Properties used by :func:`ridge_floor`: zero eigenvalues contribute nothing for lam > 0 (noise in a
direction of zero curvature costs no loss) but make lam = 0 inadmissible when s2 > 0 (H + 0 I is
singular); phi'(0+) = -s2 sum_{l_i > 0} 1/l_i^2 < 0 when s2 > 0, so then lam* > 0; with s2 = 0,
F* = 0 at lam = 0; phi(lam) -> 1/2 b^T diag(l) b as lam -> inf, so F* <= f(0) - f(w*); in one
dimension lam* = s2 / (l b^2). phi need not be unimodal in lam, so the minimisation scans a dense
grid of log lam around every per-coordinate optimum s2 / (l_i b_i^2) and refines the best grid
point with a bounded Brent search (scipy.optimize.minimize_scalar), then compares the endpoints.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from .experiment import DEFAULT_CONVERSION
from .privacy import epsilon_to_rho
from .privacy.neighbouring import BENCHMARK_RELATION, resolve_delta
from .seeding import dataset_generator

LABEL = "Gaussian ridge floor (local quadratic model), not a lower bound"
SHORT_LABEL = "Gaussian ridge floor (local quadratic model)"
#: eigenvalues at most this times the largest are rounding noise of the eigensolver: set to 0
RCOND = 1e-12
#: grid spacing in natural log lam (~46 points per decade) and the padding around the per-coordinate optima
GRID_STEP = 0.05
GRID_PAD = math.log(1e6)
MAX_GRID = 20001
#: draws of xi per cell for F*'s mechanism on the true loss (:func:`mechanism_excess_loss`), and their stream
MECHANISM_DRAWS = 32
MECHANISM_STREAM = "ridge-floor-mechanism"


def _clean(eigenvalues, b, rcond: float = RCOND) -> tuple[np.ndarray, np.ndarray]:
    l = np.asarray(eigenvalues, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if l.shape != b.shape:
        raise ValueError(f"eigenvalues ({l.size}) and b ({b.size}) must have the same length")
    if not (np.isfinite(l).all() and np.isfinite(b).all()):
        raise ValueError("eigenvalues and b must be finite")
    top = float(l.max()) if l.size else 0.0
    if l.size and l.min() < -max(1e-8 * top, 1e-300):
        raise ValueError(f"the Hessian is not PSD: smallest eigenvalue {l.min():.3g} (largest {top:.3g})")
    l = np.where(l > rcond * max(top, 0.0), l, 0.0)
    return l, b


def noise_variance(rho: float, n: int) -> float:
    """s2 = Delta^2 / (2 rho) with Delta = 1/n: the Gaussian mechanism's variance for the mean gradient."""
    if not rho > 0:
        raise ValueError(f"rho={rho!r} must be > 0")
    if int(n) < 1:
        raise ValueError(f"n={n!r} must be >= 1")
    return (1.0 / float(n)) ** 2 / (2.0 * float(rho))


def ridge_objective(eigenvalues, b, s2: float, lam) -> np.ndarray | float:
    """phi(lam) (vectorised over lam): expected excess loss on the quadratic model of ridge with
    Gaussian gradient noise of variance s2. lam = inf gives f(0) - f(w*); lam = 0 with a zero
    eigenvalue and s2 > 0 gives inf (H is singular there)."""
    l, b = _clean(eigenvalues, b)
    return _phi(l, b, float(s2), lam)


def _phi(l: np.ndarray, b: np.ndarray, s2: float, lam):
    lam_arr = np.atleast_1d(np.asarray(lam, dtype=np.float64))
    if (lam_arr < 0).any() or np.isnan(lam_arr).any():
        raise ValueError(f"lam={lam!r} must be >= 0")
    pos = l > 0
    lp, bp = l[pos], b[pos]
    out = np.empty(lam_arr.shape)
    inner = (lam_arr > 0) & np.isfinite(lam_arr)
    if inner.any():
        out[inner] = _phi_grid(lp, bp, s2, lam_arr[inner])
    out[np.isinf(lam_arr)] = 0.5 * float(np.sum(lp * bp * bp))
    if s2 == 0:
        at0 = 0.0
    elif not pos.all():
        at0 = np.inf  # H + 0 I is singular: the noise in its null space is unbounded
    else:
        at0 = 0.5 * s2 * float(np.sum(1.0 / lp))
    out[lam_arr == 0] = at0
    return out if np.ndim(lam) else float(out[0])


def _phi_grid(l: np.ndarray, b: np.ndarray, s2: float, lam: np.ndarray) -> np.ndarray:
    """phi at many lam > 0 at once (grid x coordinates)."""
    out = np.empty(len(lam))
    step = max(1, (1 << 22) // max(1, len(l)))  # bounded memory for long grids
    for i in range(0, len(lam), step):
        den = l[None, :] + lam[i:i + step, None]
        shrink = lam[i:i + step, None] / den
        out[i:i + step] = 0.5 * np.sum(l[None, :] * (shrink * shrink * (b * b)[None, :] + s2 / (den * den)), axis=1)
    return out


def ridge_floor(eigenvalues, b, rho: float, n: int) -> tuple[float, float]:
    """(F*, lam*): the Gaussian ridge floor (local quadratic model; not a lower bound) at budget rho
    for n records, and the minimising ridge lam (0 when rho = inf; inf when the minimum is f(0)).

    ``eigenvalues`` and ``b`` = U^T w* are those of the Hessian at w*; rho may be ``math.inf``.
    """
    l, b = _clean(eigenvalues, b)
    if rho == math.inf:
        return 0.0, 0.0
    s2 = noise_variance(rho, n)
    pos = l > 0
    lp, bp = l[pos], b[pos]
    quad0 = 0.5 * float(np.sum(lp * bp * bp))
    if not pos.any() or quad0 == 0.0:
        # no curvature, or w* = 0 on the model: the zero output is exact; the noise term -> 0 as lam -> inf
        return 0.0, math.inf
    # candidates: lam = 0 (when admissible), lam = inf (w = 0), and the best of a log-grid + Brent
    best_val, best_lam = quad0, math.inf
    at0 = _phi(l, b, s2, 0.0)
    if at0 < best_val:
        best_val, best_lam = at0, 0.0
    with np.errstate(divide="ignore"):
        ratios = s2 / (lp * bp * bp)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    lo = math.log(float(ratios.min())) - GRID_PAD if ratios.size else math.log(float(lp.min())) - GRID_PAD
    hi = math.log(float(ratios.max())) + GRID_PAD if ratios.size else math.log(float(lp.max())) + GRID_PAD
    lo, hi = max(lo, -700.0), min(hi, 700.0)
    m = int(min(MAX_GRID, max(201, math.ceil((hi - lo) / GRID_STEP) + 1)))
    t = np.linspace(lo, hi, m)
    vals = _phi_grid(lp, bp, s2, np.exp(t))
    k = int(np.argmin(vals))
    a, c = t[max(k - 1, 0)], t[min(k + 1, m - 1)]
    res = minimize_scalar(lambda x: _phi(lp, bp, s2, math.exp(x)), bounds=(a, c), method="bounded",
                          options={"xatol": 1e-12, "maxiter": 500})
    cands = [(float(vals[k]), math.exp(t[k]))]
    if res.success and np.isfinite(res.fun):
        cands.append((float(res.fun), math.exp(float(res.x))))
    val, lam = min(cands)
    if val < best_val:
        best_val, best_lam = val, lam
    return float(best_val), float(best_lam)


def hessian_eigen(problem) -> tuple[np.ndarray, np.ndarray]:
    """(l, U): eigenvalues and eigenvectors (columns) of the Hessian at the problem's cached optimum w*."""
    if problem.w_opt is None:
        raise ValueError("the problem has no optimum attached (load it with load_problem_from_prepared)")
    H = problem.hessian(problem.w_opt)
    return np.linalg.eigh(0.5 * (H + H.T))


def hessian_spectrum(problem) -> tuple[np.ndarray, np.ndarray]:
    """(l, b): eigenvalues of the Hessian at the problem's cached optimum w* and b = U^T w*."""
    l, U = hessian_eigen(problem)
    return l, U.T @ problem.w_opt


def mechanism_draws(dataset: str, d: int, draws: int = MECHANISM_DRAWS) -> np.ndarray:
    """(draws, d) standard normals for :func:`mechanism_excess_loss`, from the dataset's own stream
    (:func:`dpnewton.seeding.dataset_generator`, :data:`MECHANISM_STREAM`): the same for every cell."""
    return dataset_generator(dataset, MECHANISM_STREAM).standard_normal((int(draws), int(d)))


def mechanism_excess_loss(problem, l, U, lam: float, s2: float, z) -> tuple[float, float]:
    """(mean, s.e.) over the rows z_k of ``z`` of the true excess loss L(w_k) - L(w*) of F*'s mechanism,
    w_k = U diag(1 / (l + lam)) (l b + sqrt(s2) z_k), b = U^T w*: one Gaussian release of the whole budget
    (noise variance s2 = :func:`noise_variance`) and ridge with ``lam`` (F*'s lam*), on the problem's mean
    logistic loss (module docstring). ``l``, ``U``: :func:`hessian_eigen` (eigenvalues cleaned as for F*);
    lam = inf is the output w = 0; lam = 0 keeps only the directions of positive curvature. The s.e. is the
    sample standard deviation over the draws / sqrt(draws)."""
    if problem.loss_opt is None or problem.w_opt is None:
        raise ValueError("the problem has no optimum attached (load it with load_problem_from_prepared)")
    z = np.atleast_2d(np.asarray(z, dtype=np.float64))
    if lam == math.inf:
        return math.log(2.0) - float(problem.loss_opt), 0.0
    l, b = _clean(l, np.asarray(U).T @ problem.w_opt)
    coef = l * b + math.sqrt(float(s2)) * z                                 # (draws, d), in the eigenbasis
    den = l + float(lam)
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.where(den > 0, coef / den, 0.0)
    excess = problem.losses(coef @ np.asarray(U).T) - float(problem.loss_opt)
    se = float(np.std(excess, ddof=1) / math.sqrt(len(excess))) if len(excess) > 1 else float("nan")
    return float(np.mean(excess)), se


def floor_record(l, b, n: int, loss_opt: float, epsilon: float, delta: float, conversion: str) -> dict:
    """One row of the floor table from a precomputed spectrum (see :func:`dataset_floor`)."""
    rho = float(epsilon_to_rho(float(epsilon), float(delta), conversion))
    F, lam = ridge_floor(l, b, rho, n)
    lc, bc = _clean(l, b)
    return {"epsilon": float(epsilon), "delta": float(delta), "conversion": conversion, "rho": rho,
            "noise_variance": noise_variance(rho, n), "ridge_floor": F, "ridge_lambda": lam,
            "trivial_excess_loss": math.log(2.0) - float(loss_opt),
            "quadratic_trivial_excess_loss": 0.5 * float(np.sum(lc * bc * bc)),
            "loss_opt": float(loss_opt), "n": int(n), "d": int(len(lc)), "label": LABEL}


def dataset_floor(problem, epsilon: float, delta: float | None = None, conversion: str | None = None,
                  spectrum: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """The floor of a :class:`LogisticProblem` with its optimum attached, at (epsilon, delta) under
    ``conversion`` (default: the package's, ``dpnewton.experiment.DEFAULT_CONVERSION``); delta
    defaults to n^-2. Returns a dict with ``ridge_floor`` (F*), ``ridge_lambda`` (lam*), ``rho``, the
    trivial w = 0 excess loss (ln 2 - loss*; and on the quadratic model), loss*, n, d, the label.
    ``spectrum`` = :func:`hessian_spectrum` (problem) reuses one eigendecomposition for many cells."""
    conversion = conversion or DEFAULT_CONVERSION
    delta = resolve_delta(delta, BENCHMARK_RELATION, problem.n)
    l, b = spectrum if spectrum is not None else hessian_spectrum(problem)
    loss_opt = problem.loss_opt if problem.loss_opt is not None else float(problem.loss(problem.w_opt))
    return floor_record(l, b, problem.n, loss_opt, epsilon, delta, conversion)


def floor_table(problems: dict, cells, draws: int = MECHANISM_DRAWS) -> "pd.DataFrame":  # noqa: F821
    """The floor of every (dataset, conversion, epsilon, delta) in ``cells`` (an iterable of tuples), with
    its mechanism on the true loss (``mechanism_excess_loss`` and its ``_se`` over ``draws`` draws,
    :func:`mechanism_excess_loss`); ``problems`` maps a dataset name to its problem with the optimum
    attached (training split with a holdout). One eigendecomposition per dataset."""
    import pandas as pd  # imported on use: pandas costs ~0.2 s at start-up (the CLI imports this module)

    eigen, rows = {}, []
    for ds, conv, eps, delta in cells:
        p = problems[ds]
        if ds not in eigen:
            l, U = hessian_eigen(p)
            eigen[ds] = (l, U, U.T @ p.w_opt, mechanism_draws(ds, p.d, draws))
        l, U, b, z = eigen[ds]
        rec = dataset_floor(p, eps, delta, conv, (l, b))
        mean, se = mechanism_excess_loss(p, l, U, rec["ridge_lambda"], rec["noise_variance"], z)
        rows.append({"dataset": ds, **rec, "mechanism_excess_loss": mean, "mechanism_excess_loss_se": se,
                     "mechanism_draws": int(draws)})
    cols = ["dataset", "conversion", "epsilon", "delta", "rho", "noise_variance", "ridge_floor", "ridge_lambda",
            "mechanism_excess_loss", "mechanism_excess_loss_se", "mechanism_draws",
            "trivial_excess_loss", "quadratic_trivial_excess_loss", "loss_opt", "n", "d", "label"]
    if not rows:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(rows)[cols].sort_values(["dataset", "conversion", "epsilon"]).reset_index(drop=True)
