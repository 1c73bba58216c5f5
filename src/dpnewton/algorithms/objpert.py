"""Objective perturbation with the tight privacy profile of Redberg, Koskela & Wang (``objpert``).

[docs/algorithms.md §15] Source: R. Redberg, A. Koskela, Y.-X. Wang, *Improving the Privacy and
Practicality of Objective Perturbation for Differentially Private Linear Learners*, NeurIPS 2023,
arXiv:2401.00583. The profile and its derivation are in :mod:`dpnewton.privacy.objpert_profile`.

Loss constants on the projected rows Z (||z_i|| <= 1, docs/algorithms.md §1.2), logistic loss
l(m) = log(1 + e^-m) of the margin m = <z, theta>: |l'(m)| = sigma(-m) < 1, so ||grad l(theta; z)|| <= L = 1;
0 < l''(m) = sigma(m) sigma(-m) <= 1/4, so the per-row Hessian l'' z z^T has norm <= beta = 1/4.

Mechanism (``n`` = the run's row count; scaling stated explicitly):

    sum form   J_D(theta) = sum_i l(<z_i, theta>) + (Lambda/2) ||theta||^2 + <b, theta>,  b ~ N(0, sigma^2 I_d)
    mean form  J_D(theta)/n = l(theta) + (Lambda/(2n)) ||theta||^2 + <b/n, theta>       (what is solved)

Both have the same minimiser theta^, so the privacy analysis is in sum form, where neither Lambda nor sigma
depends on n (add/remove one row; the neighbour's mean form divides by its own count). The solver works on
the mean form, i.e. :func:`.aop.aop_objective` with Lambda and the noise b/n (std sigma_obj = sigma/n).

1. Split (named constant :data:`OUTPUT_FRAC` = 0.01, as AOP's eps_out_frac): eps_out = 0.01 eps,
   delta_out = 0.01 delta for the output Gaussian; eps_obj = eps - eps_out, delta_obj = delta - delta_out.
2. Lambda rule (declared, data-independent; :data:`JACOBIAN_SHARE` = 0.1): the Jacobian term
   eps0 = log(1 + beta/Lambda) gets 10 % of eps_obj, Lambda = beta/(exp(0.1 eps_obj) - 1) (sum form;
   2.4 at eps = 1, 25 at eps = 0.1), at least :data:`LAMBDA_FLOOR` = 0.01 (:func:`regulariser`).
   ``Lambda=...`` fixes it instead (infeasible if eps0 >= eps_obj: ValueError).
3. sigma: the root of delta_op(eps_obj; sigma, Lambda) = delta_obj (:func:`calibrate_sigma`), stepped up
   until delta_op <= delta_obj.
4. Solve: b drawn once; Newton (:func:`.aop.minimize_objective`, the project's :func:`.newton.newton_iterate`:
   exact float64 gradients, Hessians from a row subsample where n is large, a warm start from a subsample's
   minimiser; all deterministic in (Z, b)) to ||grad (J_D/n)(theta~)|| <= gamma = :data:`TOLERANCE`
   = 1e-12, a constant fixed before the data are read (Newton converges quadratically and ends near the
   float64 floor of that gradient, ~1e-15 sqrt(d); AOP's 1/n^2 is 1e-9 on a1a and would make the output
   noise below dominate at small n). Not met within :data:`MAX_NEWTON_ITERATIONS`: RuntimeError, no redraw.
5. Output: theta~ + N(0, sigma_out^2 I_d).

Output noise (approximate minimum). J_D is Lambda-strongly convex in sum form, and the sum-form gradient at
theta~ has norm <= n gamma, so ||theta~ - theta^|| <= r(n) = n gamma/Lambda. Given the released theta^ = t,
b = -grad(sum_D l)(t) - Lambda t is a function of (D, t) and the solver is deterministic, so theta~ is a
function q(D, t) within r of t; for a neighbour (n - 1 or n + 1 rows; r increases with the row count)
||q(D, t) - q(D', t)|| <= Delta_out = r(n) + r(n + 1) = (2n + 1) gamma/Lambda. Releasing q(D, t) + N(0, sigma_out^2)
is then a Gaussian mechanism with sensitivity Delta_out given t, calibrated exactly (GDP profile) to
(eps_out, delta_out): sigma_out = Delta_out/mu_out. Adaptive basic composition with theta^'s (eps_obj, delta_obj)
gives (eps, delta) for the pair, and the output is post-processing of the pair [Iyengar et al. 2019, AMP].

Under the ``add-remove`` relation (n private, :mod:`dpnewton.privacy.neighbouring`) the output
sensitivity may not depend on n: the solver then stops on the sum-form gradient,
||grad J_D(theta~)|| <= gamma_sum = :data:`SUM_TOLERANCE` (mean form: gamma_sum/n; at least
:data:`SOLVER_FLOOR` x the public noise norm scale), so r = gamma_sum/Lambda
for every dataset and Delta_out = 2 gamma_sum/Lambda. No count is released. Under
``add-remove-public-n`` (the benchmark) the rule above, (2n + 1) gamma/Lambda, is kept.

Accounting: an (epsilon, delta) mechanism, calibrated directly (rows are the same under every
conversion; rho is the run's nominal budget and is not spent, as for AOP). The ledger holds one
:class:`~dpnewton.privacy.ObjectivePerturbationEvent` with the split, Lambda, sigma, sigma_out, the profile's
delta at the calibration and the parts' sums (eps_spent, delta_spent); the parts are summed by
:func:`~dpnewton.privacy.objpert_profile.check_spend`, which raises PrivacyBudgetExceeded if they
exceed (epsilon, delta).

Pure epsilon-DP (delta = 0; :func:`pure_parameters`): the same objective and split, with the Gaussians
replaced by L2-norm Laplace noise (:mod:`dpnewton.privacy.norm_laplace`). Given theta^ = t, the density of t
on D is p_b(b_D(t)) |det grad b_D(t)|, b_D(t) = -grad(sum_D l)(t) - Lambda t; adding a row z moves b by
l'(<z, t>) z (norm <= L) and multiplies the Jacobian by 1 + l'' z^T (H + Lambda I)^-1 z <= 1 + beta/Lambda.
With p_b(b) proportional to exp(-eps_noise ||b|| / L) the log-density ratio is at most
eps0 + eps_noise = eps_obj [Chaudhuri, Monteleoni & Sarwate 2011, JMLR, Theorem 9 (their Algorithm 2);
Kifer, Smith & Thakurta 2012, Theorem 2], with eps0 = log(1 + beta/Lambda) from the Lambda rule above.
The output noise has density proportional to exp(-eps_out ||v|| / Delta_out) (eps_out-DP given t), and
basic composition gives eps_obj + eps_out = epsilon at delta = 0.

Not iterative: T is ignored (the pipeline gives T = 1). The result has two points: excess_loss =
[excess at theta = 0, excess at the output], elapsed = [0, calibration + solver time].
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..loss import LogisticProblem
from ..privacy.conversions import MAX_EPSILON, _gdp_delta, check_epsilon_delta
from ..privacy.ledger import GAUSSIAN, NORM_LAPLACE, ObjectivePerturbationEvent
from ..privacy.neighbouring import BENCHMARK_RELATION, LIBRARY_RELATION
from ..privacy.neighbouring import RELATIONS
from ..privacy.norm_laplace import norm_laplace_scale
from ..privacy.objpert_profile import (calibrate_sigma, check_spend, gaussian_mu_for, jacobian_epsilon,
                                       lambda_for_share, objpert_delta)
from .aop import minimize_objective
from .base import RunContext, RunResult
from .registry import AlgorithmSpec, AuditCase, register, runner

L_CONST = 1.0          # |l'| <= 1 on ||z|| <= 1
BETA = 0.25            # 0 <= l'' <= 1/4
OUTPUT_FRAC = 0.01     # share of epsilon and of delta for the output Gaussian
JACOBIAN_SHARE = 0.1   # share of eps_obj spent on the Jacobian term eps0 = log(1 + beta/Lambda)
MAX_NEWTON_ITERATIONS = 100
LAMBDA_FLOOR = 1e-2   # the smallest sum-form Lambda the rule gives (regulariser)
TOLERANCE = 1e-12    # gamma on the mean-form gradient, the same for every n (n public)
SUM_TOLERANCE = 1e-6  # gamma_sum on the sum-form gradient (n private): mean form gamma_sum/n, 1e-12 at n = 1e6
SOLVER_FLOOR = 1e-13
"""The tolerance is at least SOLVER_FLOOR times the public scale of the objective noise's norm, ||b|| ~
sigma sqrt(d) (Gaussian) or d x scale (norm-Laplace), both sum form: the float64 floor of ||grad J|| is
about 1e-16 ||b|| (at J's minimiser Lambda theta ~ -b), so at a tiny epsilon (sigma ~ 1e10 at epsilon
5e-11) a fixed 1e-6 would be below rounding and the solve would fail on some draws of b. A function of
(epsilon, delta, d), so the output sensitivity 2 gamma_sum/Lambda stays data-independent; it binds only
where sigma sqrt(d) > 1e7, far below every benchmark epsilon."""
MECHANISM = "objective perturbation, tight profile (Redberg-Koskela-Wang 2023)"
MECHANISM_PURE = "objective perturbation, pure epsilon-DP (Chaudhuri-Monteleoni-Sarwate 2011)"


@dataclass(frozen=True)
class ObjpertConfig:
    """``jacobian_share``: share of eps_obj for eps0 (the Lambda rule); ``Lambda``: a fixed sum-form
    regulariser instead (a public number chosen without the data)."""

    jacobian_share: float = JACOBIAN_SHARE
    Lambda: float | None = None

    def validated(self) -> "ObjpertConfig":
        if not (isinstance(self.jacobian_share, (int, float)) and 0 < self.jacobian_share < 1):
            raise ValueError(f"jacobian_share={self.jacobian_share!r} must lie in (0, 1)")
        if self.Lambda is not None and not (isinstance(self.Lambda, (int, float)) and not isinstance(self.Lambda, bool)
                                            and math.isfinite(self.Lambda) and self.Lambda > 0):
            raise ValueError(f"Lambda={self.Lambda!r} must be None or a finite number > 0")
        return self


def check_epsilon_cap(epsilon: float) -> None:
    """ValueError above :data:`MAX_EPSILON`, before any noise is drawn."""
    if epsilon > MAX_EPSILON:
        raise ValueError(f"epsilon={epsilon!r} is above objpert's cap of {MAX_EPSILON:g}: no privacy is left at such "
                         "an epsilon; fit a non-private model (e.g. scikit-learn's LogisticRegression) instead")


def regulariser(eps_obj: float, cfg: ObjpertConfig) -> float:
    """Lambda (sum form): ``cfg.Lambda`` when given, else the Jacobian-share rule
    beta/(exp(share eps_obj) - 1), floored at :data:`LAMBDA_FLOOR` (the rule's Lambda falls below it only
    above eps_obj = log(1 + beta/LAMBDA_FLOOR)/share ~ 33; a larger Lambda only lowers eps0, and the
    calibration spends the rest on the noise). A public rule: without the floor, a Lambda of 1e-14 at
    epsilon = 300 leaves a problem Newton cannot solve to the tolerance."""
    if cfg.Lambda is not None:
        return float(cfg.Lambda)
    if cfg.jacobian_share * eps_obj >= math.log1p(BETA / LAMBDA_FLOOR):
        return LAMBDA_FLOOR
    return lambda_for_share(eps_obj, cfg.jacobian_share, BETA)


def output_sensitivity(n: int, lam: float, gamma: float) -> float:
    """Delta_out = r(n) + r(n + 1), r(m) = m gamma/Lambda (module docstring; n public)."""
    if n < 2:
        raise ValueError(f"n={n!r}: objpert needs at least 2 rows")
    return (2 * n + 1) * gamma / lam


def solver_tolerance(n: int, neighbouring: str, noise_norm: float) -> tuple[float, float]:
    """(gamma on the mean-form gradient, Delta_out / (1/Lambda)) for the relation (module docstring);
    ``noise_norm`` is the public sum-form scale of ||b|| (:data:`SOLVER_FLOOR`)."""
    floor = SOLVER_FLOOR * noise_norm
    if neighbouring == LIBRARY_RELATION:
        gamma_sum = max(SUM_TOLERANCE, floor)
        return gamma_sum / n, 2.0 * gamma_sum
    gamma = max(TOLERANCE, floor / n)
    return gamma, output_sensitivity(n, 1.0, gamma)


def objpert_parameters(epsilon: float, delta: float, n: int, cfg: ObjpertConfig = ObjpertConfig(),
                       neighbouring: str = BENCHMARK_RELATION, *, d: int) -> dict:
    """The split, Lambda, sigma (sum form), the noise scales of the run and the spend check."""
    check_epsilon_delta(epsilon, delta)
    check_epsilon_cap(epsilon)
    cfg = cfg.validated()
    eps_out, delta_out = OUTPUT_FRAC * epsilon, OUTPUT_FRAC * delta
    eps_obj, delta_obj = epsilon - eps_out, delta - delta_out
    lam = regulariser(eps_obj, cfg)
    sigma = calibrate_sigma(eps_obj, delta_obj, lam, L_CONST, BETA)
    delta_obj_spent = objpert_delta(eps_obj, sigma, lam, L_CONST, BETA)
    gamma, sens_lambda = solver_tolerance(n, neighbouring, sigma * math.sqrt(d))
    sens_out = sens_lambda / lam
    mu_out = gaussian_mu_for(eps_out, delta_out)
    delta_out_spent = _gdp_delta(eps_out, mu_out)
    eps_spent, delta_spent = check_spend({"objective": (eps_obj, delta_obj_spent),
                                          "output": (eps_out, delta_out_spent)}, epsilon, delta)
    return {"output_frac": OUTPUT_FRAC, "jacobian_share": None if cfg.Lambda is not None else cfg.jacobian_share,
            "eps_obj": eps_obj, "eps_out": eps_out, "delta_obj": delta_obj, "delta_out": delta_out,
            "L": L_CONST, "beta": BETA, "Lambda": lam, "eps0": jacobian_epsilon(lam, BETA),
            "sigma": sigma, "mu_obj": L_CONST / sigma, "sigma_obj": sigma / n,
            "delta_obj_profile": delta_obj_spent, "gamma": gamma, "sensitivity_out": sens_out,
            "mu_out": mu_out, "sigma_out": sens_out / mu_out, "delta_out_profile": delta_out_spent,
            "eps_spent": eps_spent, "delta_spent": delta_spent, "returned_zero": False,
            **({"sum_gradient_tolerance": sens_lambda / 2.0} if neighbouring == LIBRARY_RELATION else {})}


def pure_parameters(epsilon: float, n: int, cfg: ObjpertConfig = ObjpertConfig(),
                    neighbouring: str = BENCHMARK_RELATION, *, d: int) -> dict:
    """delta = 0 (module docstring): the split eps_out = OUTPUT_FRAC epsilon, eps0 from the Lambda rule,
    eps_noise = eps_obj - eps0 > 0; the objective noise's sum-form scale L / eps_noise and the output
    noise's scale Delta_out / eps_out (:func:`~dpnewton.privacy.norm_laplace.norm_laplace_scale`)."""
    if not (isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and math.isfinite(epsilon)
            and epsilon > 0):
        raise ValueError(f"epsilon={epsilon!r} must be a finite number > 0")
    check_epsilon_cap(epsilon)
    cfg = cfg.validated()
    eps_out = OUTPUT_FRAC * epsilon
    eps_obj = epsilon - eps_out
    lam = regulariser(eps_obj, cfg)
    eps0 = jacobian_epsilon(lam, BETA)
    eps_noise = eps_obj - eps0
    if not eps_noise > 0:
        raise ValueError(f"Lambda={lam:.6g}: its Jacobian term eps0 = log(1 + beta/Lambda) = {eps0:.6g} leaves "
                         f"nothing of eps_obj = {eps_obj:.6g} for the noise; pass a larger public Lambda")
    scale = norm_laplace_scale(L_CONST, eps_noise)
    gamma, sens_lambda = solver_tolerance(n, neighbouring, d * scale)
    sens_out = sens_lambda / lam
    return {"output_frac": OUTPUT_FRAC, "jacobian_share": None if cfg.Lambda is not None else cfg.jacobian_share,
            "eps_obj": eps_obj, "eps_out": eps_out, "L": L_CONST, "beta": BETA, "Lambda": lam, "eps0": eps0,
            "eps_noise": eps_noise, "scale": scale, "scale_obj": scale / n, "gamma": gamma,
            "sensitivity_out": sens_out, "scale_out": norm_laplace_scale(sens_out, eps_out),
            "eps_spent": eps0 + eps_noise + eps_out, "delta_spent": 0.0, "returned_zero": False,
            **({"sum_gradient_tolerance": sens_lambda / 2.0} if neighbouring == LIBRARY_RELATION else {})}


def n_dependent_parameters(neighbouring: str) -> tuple[str, ...]:
    """The parameters of :func:`objpert_parameters` that are functions of n under ``neighbouring``: the
    mean-form noise scale sigma/n and, with n private, the mean-form tolerance gamma_sum/n. A released
    record withholds them (:mod:`dpnewton.privacy.release`); ``sigma`` and ``sum_gradient_tolerance``
    state the same in sum form."""
    return ("sigma_obj", "scale_obj", "gamma") if neighbouring == LIBRARY_RELATION else ()


def run_objpert_single(problem: LogisticProblem, ctx: RunContext, cfg: ObjpertConfig) -> RunResult:
    n, d, rng = problem.n, problem.d, ctx.rng
    start = time.perf_counter()
    pure = ctx.delta == 0.0
    if pure:
        params = pure_parameters(ctx.epsilon, n, cfg, ctx.neighbouring, d=d)
        scale_obj, law = params["scale_obj"], NORM_LAPLACE
    else:
        params = objpert_parameters(ctx.epsilon, ctx.delta, n, cfg, ctx.neighbouring, d=d)
        scale_obj, law = params["sigma_obj"], GAUSSIAN
    # b is the linear term's noise (its input is 0), mean form: sensitivity L/n (sum form L)
    b = ctx.ledger.draw_noise("objective", np.zeros(d), ctx.ledger.noise("objective", scale_obj), rng,
                              sensitivity=params["L"] / n, law=law)
    try:
        theta_hat, reached, steps = minimize_objective(problem, params["Lambda"], b, params["gamma"],
                                                       MAX_NEWTON_ITERATIONS)
    except RuntimeError as err:
        raise RuntimeError(f"objpert: {err} "
                           "(objpert's cap: dpnewton.algorithms.objpert.MAX_NEWTON_ITERATIONS)") from err
    scale_out = params["scale_out"] if pure else params["sigma_out"]
    theta = theta_hat + ctx.ledger.draw_noise("output", theta_hat, ctx.ledger.noise("output", scale_out), rng,
                                              sensitivity=params["sensitivity_out"], law=law)
    elapsed = time.perf_counter() - start
    loss_opt = np.nan if problem.loss_opt is None else problem.loss_opt
    m = problem.margins(theta)   # one pass for the output's loss and training accuracy; at theta = 0 every margin is 0
    losses = np.array([float(problem.loss_from_margins(np.zeros(n))), float(problem.loss_from_margins(m))])
    ctx.ledger.charge_event(ObjectivePerturbationEvent(ctx.epsilon, ctx.delta, tuple(params.items()), reached,
                                                       steps, MECHANISM_PURE if pure else MECHANISM,
                                                       n_dependent_parameters(ctx.neighbouring)))
    return RunResult(ctx.identity, theta, losses - loss_opt, np.array([0.0, elapsed]), ctx.ledger, 0,
                     {"diverged": bool(not np.isfinite(theta).all()), "iterations_ignored": ctx.iterations,
                      "solver_iterations": steps, "gradient_norm": reached},
                     train_accuracy=problem.accuracy_from_margins(m))


def run_objpert(problem: LogisticProblem, contexts: list[RunContext],
                cfg: ObjpertConfig = ObjpertConfig()) -> list[RunResult]:
    cfg = cfg.validated()
    return [run_objpert_single(problem, ctx, cfg) for ctx in contexts]


register(AlgorithmSpec("objpert", runner(ObjpertConfig, run_objpert),
                       "objective perturbation with the tight privacy profile (Redberg-Koskela-Wang 2023) "
                       "+ approximate-minimum output noise, on Z; T is ignored", label="objpert", role="one-shot",
                       paper=False, iterative=False, timed_as="hess-clip", relations=RELATIONS, pure_dp=True,
                       calibration="one-shot", family="objective perturbation", colour="#800000", marker="*",
                       # its output noise is tiny (tolerance 1e-12): the output level sees the objective-
                       # perturbation release almost unblurred (docs/algorithms.md §15)
                       audit=(AuditCase("objpert", ("output", "objective-release"), "objective perturbation, "
                                        "tight profile (Newton to 1e-12 + output noise)", pin_start=False),)))
