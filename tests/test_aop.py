"""Approximate objective perturbation: constants, replayed noise, eps >= 10.1 cut-off, errors."""

import math

import numpy as np
import pytest
from scipy import optimize, special

from dpnewton.algorithms import aop
from dpnewton.algorithms.optimum import find_optimum
from dpnewton.experiment import run_algorithm
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


def test_output_matches_replayed_noise_and_records_split():
    res = run_algorithm(PROBLEM, "syn", "aop", 2.0, [0], [1])[0]
    ev = res.ledger.events[0]
    assert ev["attempts"] == 1
    rng = RunIdentity("syn", "aop", 2.0, 0, 1).generator()
    b = ev["sigma_obj"] * rng.standard_normal(PROBLEM.d)
    sol = optimize.minimize(aop.aop_objective(PROBLEM, ev["Lambda"], b), np.zeros(PROBLEM.d), jac=True,
                            method="BFGS", options={"gtol": ev["gamma"], "norm": 2})
    expected = sol.x + ev["sigma_out"] * rng.standard_normal(PROBLEM.d)
    np.testing.assert_array_equal(res.w, expected)
    for key in ("eps_obj", "eps_out", "delta_obj", "delta_out", "sigma_obj", "sigma_out", "Lambda"):
        assert key in ev
    assert res.excess_loss.shape == (2,) and res.elapsed[0] == 0.0 and res.elapsed[1] > 0
    assert math.isclose(res.excess_loss[0], PROBLEM.loss(np.zeros(PROBLEM.d)) - PROBLEM.loss_opt)


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
