"""DP-GD preconditioned by a privately released global curvature bound (``precond-dp-gd``).

[docs/algorithms.md §13] Böhning's bound (Böhning & Lindsay 1988): on rows with ||z|| <= 1 the
Hessian of the mean logistic loss satisfies H(w) <= B = Z^T Z/(4n) for every w (the QU SOI at
margin 0: q(0) = 1/4). The method

1. computes B with one Gram pass over Z (:meth:`LogisticProblem.weighted_gram` with weights 1/4);
2. releases it once, B~ = B + S, S symmetric with its upper triangle (diagonal included, row-major
   :func:`numpy.triu_indices` order) i.i.d. N(0, s_B^2), s_B = (1/(4n))/sqrt(2 rho_B),
   rho_B = precond_frac * rho (:func:`release_symmetric`);
3. sets P = Psi_lambda(B~), the eigenvalue clip at lambda of docs/algorithms.md §2.1, with the
   data-independent lambda = lambda_mult * s_B * sqrt(d) (about lambda_mult/2 times the spectral
   norm 2 s_B sqrt(d) of the noise S; ``lambda_mode="adaptive"``: the double-noise method's
   private minimum-eigenvalue rule on tr B~, :func:`adaptive_curvature_lambda`), and factors it once
   (one ``eigh``: P^-1 = V diag(1/max(v, lambda)) V^T);
4. runs T steps w <- w - eta P^-1 (g(w) + N(0, s_g^2 I)) with DP-GD's gradient release
   (sensitivity 1/n, rho_g = (1 - precond_frac) rho/T each; :func:`.gradient_descent.noisy_gradients`).

``refresh = k > 0``: the curvature is released again at every t = k, 2k, ... < T, as the SOI
(``refresh_soi``: Hessian or H_qu, §1.1) at the current iterate w_t, computed from the margins
Z w_t of the step's pass (one more Gram pass per run), with the same upper-triangle release; P is
recomputed and refactored. The R = ceil(T/k) releases of a run (B included) share rho_B evenly,
precond_frac rho / R each, and lambda follows their noise scale. A per-record SOI term is
c(m) z z^T/n with c <= 1/4, so the sensitivity below holds for every release.

Sensitivity of the curvature release: one added or removed row changes B by z z^T/(4n) (n public,
docs/algorithms.md §6.1; under ``add-remove`` n is the released count N and B = Z^T Z/(4N)), whose
Frobenius norm is ||z||^2/(4n) <= 1/(4n). The released vector is
the upper triangle u(B) = (B_ij)_{i <= j}; ||u(z z^T)||^2 = (||z||^4 + sum_i z_i^4)/2 <= ||z||^4, so
its L2 sensitivity is also <= 1/(4n), attained by an axis-aligned unit row (z = e_k: u(z z^T) has the
single entry 1/(4n)). The noise is calibrated to that 1/(4n), which is exact for the upper-triangle
vector (no looser than the full-matrix Frobenius bound, and not improvable); the symmetric matrix
B~, the clip, the factorisation and all later steps are post-processing of u(B) + noise.

All runs of a batch share the Gram pass and every pass over Z (:func:`.base.iterate_batched`); each
run releases its own B~ from its own generator and applies its own P^-1 (one d x d matrix-vector
product per step), so a run's noise does not depend on its batch. The card is ``lockstep``: a batch may
hold runs of several configurations (``cfg`` one per run), each with its own step, budget split, lambda
rule, refresh and average (memory: one d x d P^-1 per run). ``average`` (none | uniform | tail)
releases the last iterate or the mean of a window of iterates, as for DP-GD (:func:`.base.average_window`;
docs/algorithms.md §2.6): post-processing, the ledger is unchanged. The release of B~ and its
factorisation happen inside the first (timed) update step, after the driver has drawn w0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..loss import LogisticProblem
from ..privacy import PrivacyLedger
from ..privacy.ledger import gaussian_noise
from ..privacy.neighbouring import RELATIONS
from ..privacy.plan import PlannedRelease, PrivacyPlan
from .base import RunContext, RunResult, check_average, iterate_batched, per_run
from .costs import eigh, gram
from .double_noise import CONSTANTS, DoubleNoiseConfig, adaptive_lambda
from .gradient_descent import noisy_gradients, gradient_release
from .registry import AlgorithmSpec, AuditCase, costed, planner, register, runner

PRECOND_STEP = 1.0          # eta = 1: with P ~ B (majorises the Hessian) the Böhning-Lindsay MM step
PRECOND_FRAC = 0.1          # share of rho spent on the single release of B
LAMBDA_MULT = 2.0           # lambda = LAMBDA_MULT * s_B * sqrt(d) ~ the spectral norm of the noise S
BOHNING_WEIGHT = 0.25       # q(0) = 1/4: B = Z^T diag(1/4) Z / n
REFRESH_SOIS = ("hessian", "qu")
LAMBDA_MODES = ("spectral", "adaptive")


@dataclass(frozen=True)
class PrecondConfig:
    step: float = PRECOND_STEP
    precond_frac: float = PRECOND_FRAC
    lambda_mult: float = LAMBDA_MULT
    lambda_mode: str = "spectral"    # "spectral" (lambda_mult * s_B * sqrt(d)) | "adaptive" (§2.3 rule on tr B~)
    refresh: int = 0                 # re-release the curvature every k steps, at w_t (0 = never)
    refresh_soi: str = "hessian"     # SOI of a refresh at w_t: "hessian" | "qu" (unused while refresh = 0)
    reset: bool = False              # the code's data-dependent explosion reset (not private)
    average: str = "none"            # released model: "none" (w_T) | "uniform" | "tail" (base.average_window)

    def validated(self) -> "PrecondConfig":
        if not (isinstance(self.step, (int, float)) and math.isfinite(self.step) and self.step > 0):
            raise ValueError(f"step={self.step!r} must be a finite number > 0")
        if not (isinstance(self.precond_frac, (int, float)) and 0 < self.precond_frac < 1):
            raise ValueError(f"precond_frac={self.precond_frac!r} must lie in (0, 1)")
        if not (isinstance(self.lambda_mult, (int, float)) and math.isfinite(self.lambda_mult)
                and self.lambda_mult > 0):
            raise ValueError(f"lambda_mult={self.lambda_mult!r} must be a finite number > 0")
        if self.lambda_mode not in LAMBDA_MODES:
            raise ValueError(f"lambda_mode={self.lambda_mode!r} is unknown; choose 'spectral' or 'adaptive'")
        if self.refresh_soi not in REFRESH_SOIS:
            raise ValueError(f"refresh_soi={self.refresh_soi!r} is unknown; choose 'hessian' or 'qu'")
        if isinstance(self.refresh, bool) or not isinstance(self.refresh, (int, np.integer)) or self.refresh < 0:
            raise ValueError(f"refresh={self.refresh!r} must be an integer >= 0 (0 = never)")
        check_average(self.average)
        return self


def bohning_bound(problem: LogisticProblem) -> np.ndarray:
    """B = Z^T Z / (4n) (Böhning's bound, = H_qu(0)): one Gram pass over Z."""
    return problem.weighted_gram(np.full(problem.n, BOHNING_WEIGHT))


def curvature_sensitivity(n: int) -> float:
    """L2 sensitivity 1/(4n) of the upper triangle of B (module docstring)."""
    return 1.0 / (4.0 * n)


def release_symmetric(A: np.ndarray, sigma: float, rng, ledger: PrivacyLedger | None = None,
                      quantity: str = "curvature") -> np.ndarray:
    """A + S with S symmetric, S_ij = S_ji = sigma xi_k over the upper triangle (i <= j, the order
    of :func:`numpy.triu_indices`), xi ~ N(0, I) in one draw of d(d+1)/2 values: the release of A's
    upper triangle, drawn through ``ledger`` (:meth:`~dpnewton.privacy.PrivacyLedger.draw_noise` as
    ``quantity``; None: the draw alone)."""
    d = A.shape[0]
    rows, cols = np.triu_indices(d)
    noise = np.zeros((d, d))
    draw = gaussian_noise if ledger is None else ledger.draw_noise
    noise[rows, cols] = draw(quantity, A[rows, cols], sigma, rng)
    noise += np.triu(noise, 1).T
    return A + noise


def spectral_lambda(sigma_b: float, d: int, lambda_mult: float) -> float:
    """lambda = lambda_mult * s_B * sqrt(d): data-independent (s_B depends only on n, rho, precond_frac)."""
    return float(lambda_mult * sigma_b * math.sqrt(d))


def adaptive_curvature_lambda(noisy: np.ndarray, n: int, rho_release: float) -> float:
    """The double-noise method's private minimum-eigenvalue rule (docs/algorithms.md §2.3, released
    constants "v2": :func:`.double_noise.adaptive_lambda`) with tau~ = 0.5 max(tr B~, 0) and the
    curvature release's rho in place of rho_dir: lambda = max((tau~/(n^2 rho_release))^(1/3), 1/n).
    tr B~ is read off the released matrix (post-processing: no extra release, no extra budget)."""
    tau = CONSTANTS["v2"]["trace_coeff"] * max(float(np.trace(noisy)), 0.0)
    return adaptive_lambda(tau, n, rho_release, DoubleNoiseConfig())


def clipped_inverse(B: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """(Psi_lambda(B)^-1, eigenvalues of Psi_lambda(B)) for the clip of docs/algorithms.md §2.1.

    One ``eigh`` (the driver :func:`.newton_direction.modified_newton_direction` uses), then
    P^-1 = V diag(1/max(v, lambda)) V^T; ``P^-1 g`` equals ``modified_newton_direction(B, g, lam, "clip")``
    (tests/algorithms/test_precond.py), but the factor is computed once and each step is one matrix-vector product.
    """
    if not lam > 0:
        raise ValueError(f"lambda={lam!r} must be > 0")
    vals, vecs = linalg.eigh(B, check_finite=False, driver="evd")
    clipped = np.maximum(vals, lam)
    return (vecs / clipped) @ vecs.T, clipped


def curvature_releases(T: int, refresh: int) -> int:
    """Number R of curvature releases of a run of T updates: at t = 0 and, with refresh = k > 0, at
    every t = k, 2k, ... < T, i.e. ceil(T/k); 1 without refresh."""
    return 1 if refresh == 0 else -(-T // refresh)


def precond_plan(cfg: PrecondConfig, n: int, d: int, T: int, rho: float) -> PrivacyPlan:
    """R = :func:`curvature_releases` curvature releases of precond_frac rho / R each (sensitivity
    1/(4n), :func:`curvature_sensitivity`) and T gradient releases sharing (1 - precond_frac) rho
    (docs/algorithms.md §13)."""
    frac = float(cfg.precond_frac)
    R = curvature_releases(T, cfg.refresh)
    when = "t = 0" if cfg.refresh == 0 else f"t = 0, {cfg.refresh}, {2 * cfg.refresh}, ... < T"
    curvature = PlannedRelease("curvature", frac * rho / R, R, curvature_sensitivity(n),
                               "1/(4n): one row changes B (or the SOI) by z z^T/(4n), upper triangle "
                               "norm <= ||z||^2/(4n) (§13)", when)
    return PrivacyPlan("precond-dp-gd", rho, T, (curvature, gradient_release(n, T, (1.0 - frac) * rho))).check()


def run_precond_dp_gd(problem: LogisticProblem, contexts: list[RunContext],
                      cfg: PrecondConfig | list[PrecondConfig] = PrecondConfig()) -> list[RunResult]:
    """precond-dp-gd for every context, with ``cfg`` (or ``cfg[i]`` for context i, :func:`.base.per_run`)."""
    cfgs = [c.validated() for c in per_run(cfg, contexts)]
    d = problem.d
    for c, k in zip(contexts, cfgs):
        c.state = {"cfg": k, "plan": precond_plan(k, c.rows(problem), d, c.iterations, c.rho)}
    shared = {}

    def release_curvature(ctx: RunContext, t: int, margins: np.ndarray | None) -> None:
        """Release B (t = 0, margins None) or the refresh SOI at w_t (from its margins Z w_t)."""
        cfg = ctx.state["cfg"]
        if margins is None:
            if "B" not in shared:
                shared["B"] = bohning_bound(problem)
            curvature = ctx.rescale(shared["B"], problem)
        else:
            curvature = ctx.rescale(problem.soi_from_margins(margins, cfg.refresh_soi), problem)
        plan = ctx.state["plan"]
        releases, rho_release = plan.release("curvature").count, plan.release("curvature").rho
        s_b = plan.charge(ctx.ledger, t, "curvature")
        noisy = release_symmetric(curvature, s_b, ctx.rng, ctx.ledger)
        if cfg.lambda_mode == "spectral":
            lam = spectral_lambda(s_b, d, cfg.lambda_mult)
        else:
            lam = adaptive_curvature_lambda(noisy, ctx.rows(problem), rho_release)
        ctx.state["inverse"], eig = clipped_inverse(noisy, lam)
        if margins is None:
            ctx.state["info"] = {"lambda": lam, "sigma_curvature": s_b, "clipped_eigenvalues": int(np.sum(eig <= lam)),
                                 "curvature_releases": releases, "lambdas": []}
        ctx.state["info"]["lambdas"].append(lam)

    def step(W, M, G, ctxs, t):
        for j, ctx in enumerate(ctxs):
            refresh = ctx.state["cfg"].refresh
            if "inverse" not in ctx.state:        # t = 0: after the driver drew w0
                release_curvature(ctx, t, None)
            elif refresh and t % refresh == 0:
                release_curvature(ctx, t, M[:, j])
        noisy = noisy_gradients(problem, G, ctxs, t)
        out = np.empty_like(W)
        for j, ctx in enumerate(ctxs):
            out[j] = W[j] - ctx.state["cfg"].step * (ctx.state["inverse"] @ noisy[j])
        return out

    results = iterate_batched(problem, contexts, step, reset=[k.reset for k in cfgs], average=[k.average for k in cfgs])
    for ctx, res in zip(contexts, results):
        res.diagnostics.update(ctx.state.get("info", {}))
    return results


def precond_passes(cfg: PrecondConfig, n: int, d: int) -> tuple[float, float]:
    """First update 1 + G + E (the Gram pass and the eigh of B, then a gradient); each further update 1
    (a d x d product is negligible), plus (G + E)/k amortised with ``refresh`` = k (:mod:`.costs`)."""
    k = int(cfg.refresh or 0)
    return 1.0 + gram(d) + eigh(n, d), 1.0 + ((gram(d) + eigh(n, d)) / k if k > 0 else 0.0)


register(AlgorithmSpec("precond-dp-gd", runner(PrecondConfig, run_precond_dp_gd),
                       "DP-GD preconditioned by a privately released Böhning bound Z^T Z/(4n), eigenvalues "
                       "clipped at lambda_mult * sigma_B * sqrt(d) (or lambda_mode=adaptive); step 1, "
                       "precond_frac 0.1 of rho for B; refresh=k: SOI at w_t every k steps",
                       label="precond-dp-gd", role="second-order", paper=False,
                       calibration="zcdp-plan", family="gradient descent", colour="#6b6ecf", marker="o",
                       # opposed canary: B unchanged (+-u give the same u u^T), the output audits the gradient
                       # release through P^-1; SOI canary: moves B's entry (1, 1) by 1/(4(n+1)); precond_frac 0.9
                       # (a production option) gives the curvature release enough budget to be auditable
                       audit=(AuditCase("precond-dp-gd", ("output", "gradient-release"), "T=1, step 1: curvature "
                                        "release (unchanged by this canary) + one gradient release through P^-1"),
                              AuditCase("precond-dp-gd-soi", ("curvature-release", "output"),
                                        "SOI canary (zero records + one record orthogonal to w0); precond_frac 0.9",
                                        hyper={"precond_frac": 0.9}, canary="zero-orthogonal")),
                       passes=costed(PrecondConfig, precond_passes), batched=True, lockstep=True,
                       plan=planner(PrecondConfig, precond_plan), relations=RELATIONS))
