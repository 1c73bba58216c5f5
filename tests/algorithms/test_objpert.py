"""Objective perturbation with the tight profile (objpert): the profile against independent
computations, the calibration, the solver tolerance, end-to-end runs, determinism, the ledger, errors."""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from dpnewton.algorithms import get_algorithm, objpert
from dpnewton.algorithms.aop import aop_objective, minimize_objective
from dpnewton.experiment import make_contexts, resolve_budget, run_algorithm
from dpnewton.privacy import PrivacyBudgetExceeded
from dpnewton.privacy.conversions import _gdp_delta
from dpnewton.privacy.objpert_profile import (calibrate_sigma, check_spend, gaussian_mu_for, jacobian_epsilon,
                                              lambda_for_share, objpert_delta)
from dpnewton.seeding import RunIdentity
from tests.conftest import make_problem
from dpnewton.loss import LogisticProblem

PROBLEM = make_problem(1500, 4, seed=1)


# ---- the profile ---------------------------------------------------------------------------------
def _profile_by_quadrature(eps, sigma, lam, L=1.0, beta=0.25):
    """E[(1 - exp(eps - U))_+], U = log(1 + beta/lam) + mu^2/2 + mu |g|, g ~ N(0, 1), by quadrature
    over the half-normal |g| (the dominating privacy-loss distribution, no closed form used)."""
    mu, e0 = L / sigma, math.log1p(beta / lam)
    f = lambda g: 2.0 * stats.norm.pdf(g) * max(0.0, -math.expm1(eps - e0 - 0.5 * mu * mu - mu * g))  # noqa: E731
    return integrate.quad(f, 0.0, np.inf, epsabs=1e-16, epsrel=1e-12, limit=400)[0]


@pytest.mark.parametrize("eps,sigma,lam", [(1.0, 1.0, 1.0), (0.1, 3.0, 10.0), (3.0, 0.8, 0.7), (0.01, 0.5, 5.0),
                                           (5.0, 0.5, 0.3), (2.0, 2.0, 0.05), (8.0, 0.7, 0.15)])
def test_profile_closed_form_equals_quadrature(eps, sigma, lam):
    assert objpert_delta(eps, sigma, lam) == pytest.approx(_profile_by_quadrature(eps, sigma, lam), rel=1e-8, abs=1e-15)


def test_profile_known_values_and_branches():
    # large-epsilon branch: twice the exact Gaussian profile at epsilon - eps0
    eps, sigma, lam = 3.0, 0.8, 0.7
    mu, e0 = 1 / sigma, math.log1p(0.25 / lam)
    gauss = stats.norm.cdf(mu / 2 - (eps - e0) / mu) - math.exp(eps - e0) * stats.norm.cdf(-mu / 2 - (eps - e0) / mu)
    assert objpert_delta(eps, sigma, lam) == pytest.approx(2 * gauss, rel=1e-12)
    # small-epsilon branch: 1 - 2 e^(eps - eps0) Phi(-mu); continuous where the branches meet
    eps = 0.2
    assert objpert_delta(eps, sigma, lam) == pytest.approx(1 - 2 * math.exp(eps - e0) * stats.norm.cdf(-mu), rel=1e-12)
    edge = e0 + mu * mu / 2
    assert objpert_delta(edge * (1 - 1e-12), sigma, lam) == pytest.approx(objpert_delta(edge, sigma, lam), rel=1e-9)


def test_profile_monotone_and_limits():
    eps = np.linspace(0.0, 10.0, 201)
    for sigma, lam in ((0.5, 0.2), (1.3, 2.0), (6.0, 25.0)):
        d = np.array([objpert_delta(e, sigma, lam) for e in eps])
        assert np.all(np.diff(d) <= 1e-15) and np.all((d >= 0) & (d <= 1))
    sigmas = np.geomspace(0.2, 20.0, 100)
    d = np.array([objpert_delta(1.0, s, 2.0) for s in sigmas])
    assert np.all(np.diff(d) < 0) and 0 < d[-1] < d[0] < 1
    # sigma -> inf: (1 - e^(eps - eps0))_+ (0 above eps0, positive below it); sigma -> 0: 1
    e0 = jacobian_epsilon(2.0, 0.25)
    assert objpert_delta(1.0, 1e6, 2.0) < 1e-5
    assert objpert_delta(0.5 * e0, 1e6, 2.0) == pytest.approx(-math.expm1(-0.5 * e0), rel=1e-4)
    assert objpert_delta(1.0, 1e-3, 2.0) == pytest.approx(1.0)
    # beta = 0 (no Jacobian term): twice the Gaussian profile of mu = L/sigma
    assert objpert_delta(2.0, 0.7, 1.0, beta=0.0) == pytest.approx(2 * _gdp_delta(2.0, 1 / 0.7), rel=1e-12)
    assert objpert_delta(2.0, 0.7, 1.0, L=2.0) == pytest.approx(objpert_delta(2.0, 0.35, 1.0), rel=1e-12)


def _exact_1d_delta(eps, k, lam, sigma, half_width=80.0, points=320_001):
    """The exact hockey-stick divergence (both orders) of 1-D objective perturbation with the logistic
    loss: D = k rows z = -1, D' = D + {z = +1}, by numerical integration of the densities
    p_D(theta) = phi_sigma(b_D(theta)) (H_D(theta) + lam) (change of variables b -> theta)."""
    theta = np.linspace(-half_width, half_width, points)

    def density(Z):
        m = np.outer(theta, Z)
        b = (special.expit(-m) * Z).sum(axis=1) - lam * theta
        return stats.norm.pdf(b, scale=sigma) * ((special.expit(m) * special.expit(-m) * Z * Z).sum(axis=1) + lam)

    p, q = density(-np.ones(k)), density(np.append(-np.ones(k), 1.0))
    dx = theta[1] - theta[0]
    assert p.sum() * dx == pytest.approx(1.0, abs=1e-8) and q.sum() * dx == pytest.approx(1.0, abs=1e-8)
    return max(np.maximum(q - math.exp(eps) * p, 0).sum() * dx, np.maximum(p - math.exp(eps) * q, 0).sum() * dx)


@pytest.mark.parametrize("k", [0, 50])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_profile_bounds_the_exact_one_dimensional_mechanism(k, eps):
    """The profile is an upper bound on the real mechanism, and with 50 rows pushing the canary's
    |l'| towards L = 1 it is within a factor of 15 of it (the |g| of the bound, a factor ~2 at most, is
    what the logistic loss, whose l' has one sign, cannot attain)."""
    lam, sigma = 0.2, 1.0
    exact, bound = _exact_1d_delta(eps, k, lam, sigma), objpert_delta(eps, sigma, lam)
    assert exact <= bound
    if k == 50:
        assert exact >= bound / 15


# ---- calibration ---------------------------------------------------------------------------------
@pytest.mark.parametrize("eps,delta", [(0.01, 1e-6), (0.1, 1e-9), (1.0, 1e-9), (3.0, 4e-4), (10.0, 1e-12)])
def test_calibration_meets_the_target_tightly(eps, delta):
    lam = lambda_for_share(eps, 0.1)
    assert jacobian_epsilon(lam, 0.25) == pytest.approx(0.1 * eps, rel=1e-12)
    sigma = calibrate_sigma(eps, delta, lam)
    assert objpert_delta(eps, sigma, lam) <= delta
    assert objpert_delta(eps, sigma * (1 - 1e-9), lam) > delta * (1 - 1e-6)     # tight: no slack left
    assert objpert_delta(eps, sigma * (1 - 1e-6), lam) > delta


def test_output_gaussian_calibration_is_exact():
    mu = gaussian_mu_for(0.01, 1e-11)
    assert _gdp_delta(0.01, mu) <= 1e-11 and _gdp_delta(0.01, mu * (1 + 1e-6)) > 1e-11


def test_parameters_split_and_spend():
    n, eps, delta = 1000, 1.0, 1e-6
    prm = objpert.objpert_parameters(eps, delta, n, d=PROBLEM.d)
    assert prm["eps_out"] == pytest.approx(0.01) and prm["eps_obj"] == pytest.approx(0.99)
    assert prm["delta_out"] == pytest.approx(1e-8) and prm["delta_obj"] == pytest.approx(0.99e-6)
    assert prm["Lambda"] == pytest.approx(0.25 / math.expm1(0.099), rel=1e-12)
    assert prm["delta_obj_profile"] == objpert_delta(prm["eps_obj"], prm["sigma"], prm["Lambda"]) <= prm["delta_obj"]
    assert prm["sigma_obj"] == pytest.approx(prm["sigma"] / n) and prm["gamma"] == objpert.TOLERANCE == 1e-12
    assert prm["sensitivity_out"] == pytest.approx((2 * n + 1) * 1e-12 / prm["Lambda"])
    assert prm["sigma_out"] == pytest.approx(prm["sensitivity_out"] / gaussian_mu_for(0.01, 1e-8))
    assert prm["eps_spent"] <= eps * (1 + 1e-12) and prm["delta_spent"] <= delta * (1 + 1e-12)
    assert prm["delta_spent"] == pytest.approx(delta, rel=1e-6)     # the whole delta is used
    # the objective noise beats AOP's: a smaller sigma on the same mean-form objective
    from dpnewton.algorithms.aop import aop_parameters
    assert prm["sigma_obj"] < aop_parameters(eps, delta, n, 1 / n**2)["sigma_obj"] / 2


def test_overspending_raises():
    assert check_spend({"a": (0.5, 1e-6), "b": (0.5, 0.0)}, 1.0, 1e-6) == pytest.approx((1.0, 1e-6))
    with pytest.raises(PrivacyBudgetExceeded):
        check_spend({"a": (0.6, 0.0), "b": (0.5, 0.0)}, 1.0, 1e-6)
    with pytest.raises(PrivacyBudgetExceeded):
        check_spend({"a": (0.5, 1e-6), "b": (0.5, 1e-7)}, 1.0, 1e-6)


# ---- runs ----------------------------------------------------------------------------------------
def test_solver_meets_the_tolerance_and_output_is_replayed():
    for eps in (0.1, 1.0, 10.0):
        for res in run_algorithm(PROBLEM, "syn", "objpert", eps, [0, 1], [1]):
            (ev,) = res.ledger.events
            assert ev["mechanism"] == objpert.MECHANISM and ev["gamma"] == objpert.TOLERANCE
            assert 0 <= ev["gradient_norm"] <= ev["gamma"] and 1 <= ev["solver_iterations"] <= 100
            rng = RunIdentity("syn", "objpert", eps, res.identity.seed, 1).generator()
            b = ev["sigma_obj"] * rng.standard_normal(PROBLEM.d)
            theta_hat = res.w - ev["sigma_out"] * rng.standard_normal(PROBLEM.d)
            grad = aop_objective(PROBLEM, ev["Lambda"], b)(theta_hat)[1]
            assert np.linalg.norm(grad) <= ev["gamma"] * (1 + 1e-6)
            assert res.excess_loss.shape == (2,) and np.isfinite(res.excess_loss).all()


def test_one_objective_draw_and_no_redraw_on_failure(monkeypatch):
    delta, rho = resolve_budget(1.0, None, PROBLEM.n, "bs16")
    (ctx,) = make_contexts("syn", "objpert", 1.0, delta, "bs16", rho, [(0, 1)])
    objpert.run_objpert(PROBLEM, [ctx])
    rng = RunIdentity("syn", "objpert", 1.0, 0, 1).generator()
    rng.standard_normal(PROBLEM.d), rng.standard_normal(PROBLEM.d)
    assert ctx.rng.bit_generator.state == rng.bit_generator.state      # b, then the output noise
    monkeypatch.setattr(objpert, "MAX_NEWTON_ITERATIONS", 1)
    (ctx,) = make_contexts("syn", "objpert", 1.0, delta, "bs16", rho, [(0, 1)])
    with pytest.raises(RuntimeError, match=r"objpert: .*not redrawn.*objpert.MAX_NEWTON_ITERATIONS"):
        objpert.run_objpert(PROBLEM, [ctx])
    rng = RunIdentity("syn", "objpert", 1.0, 0, 1).generator()
    rng.standard_normal(PROBLEM.d)
    assert ctx.rng.bit_generator.state == rng.bit_generator.state and not ctx.ledger.events


def test_excess_loss_decreases_with_epsilon_on_average():
    seeds = list(range(6))
    means = [np.mean([r.final_excess_loss for r in run_algorithm(PROBLEM, "syn", "objpert", eps, seeds, [1])])
             for eps in (0.1, 1.0, 10.0)]
    assert np.all(np.isfinite(means)) and means[0] > means[1] > means[2] > 0
    assert means[2] < 0.01 * (PROBLEM.loss(np.zeros(PROBLEM.d)) - PROBLEM.loss_opt)


def test_deterministic_with_a_seed_whatever_the_batch():
    batch = run_algorithm(PROBLEM, "syn", "objpert", 1.0, [0, 1, 2], [1])
    alone = [run_algorithm(PROBLEM, "syn", "objpert", 1.0, [s], [1])[0] for s in (2, 0)]
    assert np.array_equal(batch[2].w, alone[0].w) and np.array_equal(batch[0].w, alone[1].w)
    assert batch[0].ledger.events == alone[1].ledger.events
    assert len({tuple(r.w) for r in batch}) == 3                      # seeds give different noise


def test_ledger_sums_to_the_total_and_record():
    from dpnewton.experiment import result_record

    (res,) = run_algorithm(PROBLEM, "syn", "objpert", 0.5, [3], [1], conversion="cks")
    (ev,) = res.ledger.events
    assert ev["eps_obj"] + ev["eps_out"] == pytest.approx(0.5, rel=1e-12) == ev["eps_spent"]
    assert ev["delta_obj_profile"] + ev["delta_out_profile"] == pytest.approx(ev["delta_spent"], rel=1e-12)
    assert ev["delta_spent"] <= ev["delta"] == 1 / PROBLEM.n**2
    assert not res.ledger.entries and res.ledger.spent_rho == 0.0
    rec = result_record(res, "cks", 0.5, ev["delta"])
    assert rec["algorithm"] == "objpert" and rec["conversion"] == "cks" and rec["delta"] == ev["delta"]
    assert rec["rho"] == res.ledger.budget_rho > 0 and math.isnan(rec["ledger_rho_total"])
    assert '"eps_spent"' in rec["accounting_events"]


def test_fixed_lambda_and_bad_input_errors():
    prm = objpert.objpert_parameters(1.0, 1e-6, 500, objpert.ObjpertConfig(Lambda=5.0), d=5)
    assert prm["Lambda"] == 5.0 and prm["jacobian_share"] is None
    with pytest.raises(ValueError, match="infeasible.*eps0"):
        objpert.objpert_parameters(0.01, 1e-6, 500, objpert.ObjpertConfig(Lambda=1.0), d=5)
    with pytest.raises(ValueError, match="epsilon"):
        objpert.objpert_parameters(0.0, 1e-6, 500, d=5)
    with pytest.raises(ValueError, match="delta"):
        objpert.objpert_parameters(1.0, 1.5, 500, d=5)
    with pytest.raises(ValueError, match="jacobian_share"):
        run_algorithm(PROBLEM, "syn", "objpert", 1.0, [0], [1], hyper={"jacobian_share": 1.0})
    with pytest.raises(ValueError, match="Lambda"):
        run_algorithm(PROBLEM, "syn", "objpert", 1.0, [0], [1], hyper={"Lambda": -1.0})
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        run_algorithm(PROBLEM, "syn", "objpert", 1.0, [0], [1], hyper={"average": "tail"})
    with pytest.raises(ValueError, match="sigma"):
        objpert_delta(1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="at least 2 rows"):
        objpert.output_sensitivity(1, 1.0, 1e-12)
    assert not get_algorithm("objpert").iterative


def test_losses_and_training_accuracy_come_from_one_pass_with_the_same_bits():
    for res in run_algorithm(PROBLEM, "syn", "objpert", 1.0, [0, 1], [1]):
        zero, out = res.excess_loss + PROBLEM.loss_opt
        assert zero == PROBLEM.loss(np.zeros(PROBLEM.d)) - PROBLEM.loss_opt + PROBLEM.loss_opt
        assert res.excess_loss[1] == PROBLEM.loss(res.w) - PROBLEM.loss_opt
        assert res.train_accuracy == PROBLEM.accuracy(res.w)


def test_tiny_epsilon_solves_on_every_draw_and_the_tolerance_is_public():
    """At epsilon 1e-10 the objective noise's norm is ~1e10, so a fixed sum-form tolerance of 1e-6 sits
    below float64 rounding (~1e-16 ||b||) and about 6 % of draws failed; the public floor
    (SOLVER_FLOOR x sigma sqrt(d)) makes every one of 200 seeded fits solve, and the tolerance is the
    same on neighbouring datasets (a function of epsilon, delta and d only)."""
    from dpnewton.privacy.neighbouring import LIBRARY_RELATION
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    problem = LogisticProblem(np.column_stack([X, np.ones(100)]) / 6.0, y)
    runs = run_algorithm(problem, "tiny", "objpert", 1e-10, list(range(200)), [1], delta=1e-10,
                         neighbouring=LIBRARY_RELATION)
    assert len(runs) == 200 and all(np.isfinite(r.w).all() for r in runs)
    small, large = (objpert.objpert_parameters(1e-10, 1e-10, n, neighbouring=LIBRARY_RELATION, d=4)
                    for n in (100, 101))
    assert small["sum_gradient_tolerance"] == large["sum_gradient_tolerance"] > objpert.SUM_TOLERANCE
    assert small["sensitivity_out"] == large["sensitivity_out"]
    usual = objpert.objpert_parameters(0.01, 1e-10, 100, neighbouring=LIBRARY_RELATION, d=4)
    assert usual["sum_gradient_tolerance"] == objpert.SUM_TOLERANCE   # the floor binds only at tiny epsilon


def test_a_failed_solve_names_no_value_computed_from_the_data():
    b = 0.01 * np.ones(PROBLEM.d)
    with pytest.raises(RuntimeError) as err:
        minimize_objective(PROBLEM, 3.0, b, 1e-9, max_iterations=0)
    message = str(err.value)
    assert "within 0 steps" in message and "MAX_NEWTON_ITERATIONS" in message
    assert str(PROBLEM.n) not in message and "n =" not in message and "reached" not in message
