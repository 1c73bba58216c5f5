"""Approximate objective perturbation: constants, replayed noise and solver, one objective draw,
no redraw on solver failure, eps >= 10.1 cut-off, errors."""

import math

import numpy as np
import pytest
from scipy import optimize, special

from dpnewton.algorithms import aop
from dpnewton.algorithms.optimum import find_optimum
from dpnewton.experiment import make_contexts, resolve_budget, run_algorithm
from dpnewton.loss import LogisticProblem
from dpnewton.seeding import RunIdentity


def _problem(n=1500, d=4, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = np.where(rng.random(n) < special.expit(X @ rng.standard_normal(d)), 1.0, -1.0)
    p = LogisticProblem.from_xy(X, y)
    opt = find_optimum(p)
    p.set_optimum(opt.w, opt.loss)
    return p


PROBLEM = _problem()


def test_reference_constants():
    n, eps, delta = 1000, 1.0, 1e-6
    prm = aop.aop_parameters(eps, delta, n, 1.0 / n**2)
    assert math.isclose(prm["eps_out"], 0.01) and math.isclose(prm["eps_obj"], 0.99)
    assert math.isclose(prm["eps_p"], 0.891)
    assert math.isclose(prm["Lambda"], 2.0 / 0.099)
    assert math.isclose(prm["sigma_obj"], (2.0 / n) * (1 + math.sqrt(2 * math.log(1 / 0.99e-6))) / 0.891)
    assert math.isclose(prm["sigma_out"], (n / n**2 / prm["Lambda"]) * (1 + math.sqrt(2 * math.log(1 / 1e-8))) / 0.01)
    assert not prm["returned_zero"] and aop.aop_parameters(10.2, delta, n, 1e-6)["returned_zero"]


def _contexts(epsilon, seeds):
    delta, rho = resolve_budget(epsilon, None, PROBLEM.n, "bs16")
    return make_contexts("syn", "aop", epsilon, delta, "bs16", rho, [(s, 1) for s in seeds])


def test_output_matches_replayed_noise_and_records_split():
    res = run_algorithm(PROBLEM, "syn", "aop", 2.0, [0], [1])[0]
    ev = res.ledger.events[0]
    assert "attempts" not in ev and ev["solver_iterations"] >= 1
    rng = RunIdentity("syn", "aop", 2.0, 0, 1).generator()
    b = ev["sigma_obj"] * rng.standard_normal(PROBLEM.d)
    theta_hat, reached, steps = aop.minimize_objective(PROBLEM, ev["Lambda"], b, ev["gamma"])
    expected = theta_hat + ev["sigma_out"] * rng.standard_normal(PROBLEM.d)
    np.testing.assert_array_equal(res.w, expected)
    assert (reached, steps) == (ev["gradient_norm"], ev["solver_iterations"])
    for key in ("eps_obj", "eps_out", "delta_obj", "delta_out", "sigma_obj", "sigma_out", "Lambda"):
        assert key in ev
    assert res.excess_loss.shape == (2,) and res.elapsed[0] == 0.0 and res.elapsed[1] > 0
    assert math.isclose(res.excess_loss[0], PROBLEM.loss(np.zeros(PROBLEM.d)) - PROBLEM.loss_opt)


def test_one_objective_draw_then_output_noise():
    """The run consumes exactly two d-vectors of its generator: b (first), then the output noise."""
    for eps in (0.01, 1.0, 10.0):
        (ctx,) = _contexts(eps, [3])
        res = aop.run_aop(PROBLEM, [ctx])[0]
        ev = res.ledger.events[0]
        rng = RunIdentity("syn", "aop", eps, 3, 1).generator()
        b = ev["sigma_obj"] * rng.standard_normal(PROBLEM.d)
        theta_hat = aop.minimize_objective(PROBLEM, ev["Lambda"], b, ev["gamma"])[0]
        np.testing.assert_array_equal(res.w, theta_hat + ev["sigma_out"] * rng.standard_normal(PROBLEM.d))
        assert ctx.rng.bit_generator.state == rng.bit_generator.state


def test_solver_failure_raises_and_never_redraws(monkeypatch):
    monkeypatch.setattr(aop, "MAX_NEWTON_ITERATIONS", 1)
    (ctx,) = _contexts(1.0, [0])
    with pytest.raises(RuntimeError, match=r"within 1 steps.*not redrawn.*MAX_NEWTON_ITERATIONS"):
        aop.run_aop(PROBLEM, [ctx])
    rng = RunIdentity("syn", "aop", 1.0, 0, 1).generator()
    rng.standard_normal(PROBLEM.d)
    assert ctx.rng.bit_generator.state == rng.bit_generator.state   # one objective draw, nothing else
    assert not ctx.ledger.events
    b = 0.01 * np.ones(PROBLEM.d)
    with pytest.raises(RuntimeError, match="within 0 steps"):
        aop.minimize_objective(PROBLEM, 3.0, b, 1e-9, max_iterations=0)


def test_reached_gradient_norm_recorded_and_within_gamma():
    for eps in (0.01, 0.1, 1.0, 10.0):
        for res in run_algorithm(PROBLEM, "syn", "aop", eps, [0, 1, 2], [1]):
            ev = res.ledger.events[0]
            assert ev["gamma"] == 1.0 / PROBLEM.n**2
            assert 0.0 <= ev["gradient_norm"] <= ev["gamma"]
            assert res.diagnostics["gradient_norm"] == ev["gradient_norm"]
            assert 1 <= ev["solver_iterations"] <= aop.MAX_NEWTON_ITERATIONS
            rng = RunIdentity("syn", "aop", eps, res.identity.seed, 1).generator()
            b = ev["sigma_obj"] * rng.standard_normal(PROBLEM.d)
            theta_hat = res.w - ev["sigma_out"] * rng.standard_normal(PROBLEM.d)
            grad = aop.aop_objective(PROBLEM, ev["Lambda"], b)(theta_hat)[1]
            assert np.linalg.norm(grad) <= ev["gamma"] * (1.0 + 1e-6)


def test_large_epsilon_is_accurate_and_cutoff_returns_zero():
    res = run_algorithm(PROBLEM, "syn", "aop", 10.0, [0, 1], [1])
    for r in res:
        assert r.final_excess_loss < 0.2 * r.excess_loss[0]
    r = run_algorithm(PROBLEM, "syn", "aop", 10.2, [0], [1])[0]
    assert np.array_equal(r.w, np.zeros(PROBLEM.d)) and r.ledger.events[0]["returned_zero"]


def test_objective_gradient():
    rng = np.random.default_rng(0)
    fun = aop.aop_objective(PROBLEM, 3.0, 0.01 * rng.standard_normal(PROBLEM.d))
    theta = rng.standard_normal(PROBLEM.d)
    num = optimize.approx_fprime(theta, lambda t: fun(t)[0], 1e-7)
    np.testing.assert_allclose(fun(theta)[1], num, atol=1e-6)


def test_deterministic():
    a = run_algorithm(PROBLEM, "syn", "aop", 1.0, [0, 1], [1])
    b = run_algorithm(PROBLEM, "syn", "aop", 1.0, [0, 1], [1])
    for x, y in zip(a, b):
        assert np.array_equal(x.w, y.w) and np.array_equal(x.excess_loss, y.excess_loss)
    assert not np.array_equal(a[0].w, a[1].w)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="delta"):
        aop.aop_parameters(1.0, 1.5, 100, 1e-4)
    with pytest.raises(ValueError, match="epsilon"):
        aop.aop_parameters(0.0, 1e-5, 100, 1e-4)
    with pytest.raises(ValueError, match="max_attempts"):
        run_algorithm(PROBLEM, "syn", "aop", 1.0, [0], [1], hyper={"max_attempts": 0})


def test_official_conversion_runs_at_the_v1_drivers_epsilon():
    """Under official-fsolve AOP is calibrated to zcdp_to_eps(rho_fsolve, delta), as the V1 driver passed it:
    about 0.27 where fsolve failed (epsilon 0.01), the nominal epsilon where it converged (epsilon 1)."""
    from dpnewton.privacy import epsilon_to_rho, rho_to_epsilon

    for eps in (0.01, 1.0):
        delta, rho = resolve_budget(eps, None, PROBLEM.n, "official-fsolve")
        (ctx,) = make_contexts("syn", "aop", eps, delta, "official-fsolve", rho, [(0, 1)])
        expected = rho_to_epsilon(epsilon_to_rho(eps, delta, "official-fsolve"), delta, "official-fsolve")
        assert aop.aop_epsilon(ctx) == pytest.approx(expected, rel=1e-12)
        ev = aop.run_aop(PROBLEM, [ctx])[0].ledger.events[0]
        assert ev["target_epsilon"] == pytest.approx(expected, rel=1e-12)
        if eps == 0.01:
            assert 0.2 < expected < 0.35
        else:
            assert expected == pytest.approx(1.0, rel=1e-6)
    # every other conversion: the run's epsilon
    (ctx,) = _contexts(0.01, [0])
    assert aop.aop_epsilon(ctx) == 0.01


# ---- the solver on problems large enough for its warm start and subsample Hessians -----------------
def _large_problem(rare_column: bool, n=16000, d=5, seed=3):
    """n // 8 >= 1000 rows: a warm start from every 8th row and Hessians from those rows. ``rare_column``:
    the last feature is nonzero on 40 rows, none of them among every 8th row, so the subsample Hessian is
    blind to it (only mu) and the solver must fall back to Hessians from all rows."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    if rare_column:
        X[:, -1] = 0.0
        X[8 * np.arange(40) + 3, -1] = 0.9
    y = np.where(rng.random(n) < special.expit(X @ rng.standard_normal(d)), 1.0, -1.0)
    if rare_column:   # half of its rows each way: the feature stays unsaturated, its curvature far above mu
        y[8 * np.arange(40) + 3] = np.resize([1.0, -1.0], 40)
    return LogisticProblem.from_xy(X, y)


def _reference_minimiser(p, lam, b):
    """scipy's trust-region Newton on J with the exact Hessian: an independent solver."""
    mu = lam / p.n
    fun = aop.aop_objective(p, lam, b)
    res = optimize.minimize(lambda t: fun(t)[0], np.zeros(p.d), jac=lambda t: fun(t)[1],
                            hess=lambda t: p.hessian(t) + mu * np.eye(p.d), method="trust-exact",
                            options={"gtol": 1e-13, "maxiter": 500})
    return res.x, float(np.linalg.norm(fun(res.x)[1]))


@pytest.mark.parametrize("rare_column", [False, True])
def test_warm_started_solve_meets_the_tolerance_and_matches_an_independent_solver(rare_column, monkeypatch):
    p = _large_problem(rare_column)
    lam, gamma = 0.3, 1e-12   # mu = lam/n far below the rare feature's Hessian entry
    b = 1e-6 * np.random.default_rng(4).standard_normal(p.d)   # small: the rare feature's optimum stays near 0
    rows_seen = []
    gram = LogisticProblem.weighted_gram
    monkeypatch.setattr(LogisticProblem, "weighted_gram", lambda self, c: rows_seen.append(self.n) or gram(self, c))
    theta, reached, steps = aop.minimize_objective(p, lam, b, gamma)
    monkeypatch.undo()
    assert reached == float(np.linalg.norm(aop.aop_objective(p, lam, b)(theta)[1])) <= gamma
    ref, ref_norm = _reference_minimiser(p, lam, b)
    # strong convexity: ||theta - ref|| <= ||grad J(theta) - grad J(ref)|| / mu
    assert np.linalg.norm(theta - ref) <= (reached + ref_norm) / (lam / p.n) * (1 + 1e-6)
    assert p.n // 8 in rows_seen                       # Hessians from every 8th row were used
    assert (p.n in rows_seen) == rare_column           # ... and all rows only when those missed a feature
    assert steps <= 30


def test_solver_is_deterministic_and_the_warm_start_is_only_a_start():
    p = _large_problem(False)
    b = 1e-3 * np.random.default_rng(5).standard_normal(p.d)
    a1, a2 = aop.minimize_objective(p, 3.0, b, 1e-12), aop.minimize_objective(p, 3.0, b, 1e-12)
    assert np.array_equal(a1[0], a2[0]) and a1[1:] == a2[1:]
    cold = aop._newton_solve(p, 3.0 / p.n, b, 1e-12, 100, None)   # from theta = 0, no warm start
    assert cold[3] and np.linalg.norm(cold[0] - a1[0]) <= 2e-12 / (3.0 / p.n)
