"""Private cubic-regularised Newton: constants, solver step, ledger, noiseless limit, n^-2 rate."""

import math

import numpy as np
import pytest
from scipy import special

from dpnewton.algorithms import cubic_newton as cn
from dpnewton.experiment import run_algorithm
from dpnewton.loss import LogisticProblem

HYPER = {"mu": 0.1, "diameter": 4.0, "max_inner": 200}


def _problem(n, d=3, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = np.where(rng.random(n) < special.expit(X @ np.array([1.0, -1.0, 0.5])), 1.0, -1.0)
    return LogisticProblem.from_xy(X, y)


def test_constants():
    L0, L1, L2 = cn.lipschitz_constants(0.1, 4.0)
    assert math.isclose(L0, 1.2) and math.isclose(L1, 0.35)
    m = np.linspace(-10, 10, 200001)
    s = special.expit(m)
    assert math.isclose(np.abs(s * (1 - s) * (1 - 2 * s)).max(), L2, rel_tol=1e-8)
    assert math.isclose(L2, 1 / (6 * math.sqrt(3)))
    # N = 2 rho (L0 + L1 D + L2 D^2)^2 n^2 / ((L0 + L1 D)^2 d)
    G = L0 + L1 * 4.0
    N = 2 * 1e-4 * (G + L2 * 16) ** 2 * 100**2 / (G * G * 3)
    assert cn.inner_steps(1e-4, 100, 3, 0.1, 4.0, 10**6) == math.ceil(N)
    assert cn.inner_steps(1.0, 10**4, 3, 0.1, 4.0, 50) == 50


def test_solver_matches_hand_computation():
    rng = np.random.default_rng(4)
    g, H0 = rng.standard_normal(3), rng.standard_normal((3, 3))
    H, theta0 = H0 @ H0.T / 3, np.array([0.2, -0.1, 0.3])
    mu, L2, R, sigma, N = 0.5, 0.1, 1.0, 0.3, 3
    out = cn.dp_cubic_solver(g, H, theta0, N, mu, L2, R, sigma, np.random.default_rng(9))
    rng = np.random.default_rng(9)
    theta, thetas = theta0.copy(), []
    for i in range(N):
        u = theta - theta0
        step = theta - 2 / (mu * (i + 2)) * (g + H @ u + L2 / 2 * np.linalg.norm(u) * u
                                             + sigma * rng.standard_normal(3))
        theta = step * min(1.0, R / np.linalg.norm(step))
        thetas.append(theta)
    expected = sum(2 * (i + 1) / (N * (N + 1)) * thetas[i] for i in range(N))
    np.testing.assert_allclose(out, expected, rtol=1e-13)


def test_ledger_sums_to_rho_and_deterministic():
    p = _problem(500)
    a = run_algorithm(p, "syn", "cubic-newton", 1.0, [0, 1], [3], delta=1e-6, hyper=HYPER)
    b = run_algorithm(p, "syn", "cubic-newton", 1.0, [0, 1], [3], delta=1e-6, hyper=HYPER)
    for x, y in zip(a, b):
        assert np.array_equal(x.w, y.w) and np.array_equal(x.excess_loss, y.excess_loss)
        assert len(x.ledger.entries) == 3 * 200
        assert math.isclose(x.ledger.spent_rho, x.ledger.budget_rho, rel_tol=1e-9)
        assert math.isclose(x.ledger.entries[0].sensitivity, (1.2 + 0.35 * 4.0) / 500)
        assert np.linalg.norm(x.w) <= 2.0 + 1e-12
    assert not np.array_equal(a[0].w, a[1].w)


def test_record_releases_changes_nothing_and_records_n_by_d_per_outer_step():
    p = _problem(300)
    hyper = {**HYPER, "max_inner": 7}
    off = run_algorithm(p, "syn", "cubic-newton", 1.0, [0, 1], [1, 3], delta=1e-6, hyper=hyper)
    on = run_algorithm(p, "syn", "cubic-newton", 1.0, [0, 1], [1, 3], delta=1e-6,
                       hyper={**hyper, "record_releases": True})
    assert len(on) == len(off) == 4
    for x, y in zip(off, on):
        assert np.array_equal(x.w, y.w) and np.array_equal(x.excess_loss, y.excess_loss)
        assert x.ledger.entries == y.ledger.entries and x.ledger.spent_rho == y.ledger.spent_rho
        assert "inner_releases" not in x.diagnostics                 # default off: nothing stored
        assert {k: v for k, v in y.diagnostics.items() if k != "inner_releases"} == x.diagnostics
        steps = y.diagnostics["inner_releases"]
        N = y.diagnostics["inner_steps"]
        assert N == 7 and len(steps) == len(y.excess_loss) - 1        # one (thetas, releases) per outer step
        for thetas, releases in steps:
            assert thetas.shape == releases.shape == (N, 3)
            for i in range(N - 1):       # theta_{i+1} = Proj_W(theta_i - eta_i g^_i), eta_i = 2/(mu (i+2))
                step = thetas[i] - 2 / (0.1 * (i + 2)) * releases[i]
                assert np.array_equal(thetas[i + 1], cn.project_ball(step, 2.0))
        # the first inner point of the first outer step is the run's start (a unit vector in the ball)
        assert np.linalg.norm(steps[0][0][0]) == pytest.approx(1.0)


def test_noiseless_limit_reaches_constrained_optimum():
    p = _problem(500)
    res = run_algorithm(p, "syn", "cubic-newton", 1.0, [0], [8], delta=1e-6, hyper={**HYPER, "noise": False})
    assert abs(res[0].final_excess_loss) < 1e-9
    # binding constraint: optimum on the sphere, gradient of F points inwards (KKT)
    w, _ = cn.constrained_regularised_optimum(p, 0.01, 0.2)
    assert math.isclose(np.linalg.norm(w), 0.2, rel_tol=1e-9)
    g = p.grad(w) + 0.01 * w
    assert np.allclose(g / np.linalg.norm(g), -w / np.linalg.norm(w), atol=1e-6)


def test_excess_loss_shrinks_like_n_minus_two():
    ns = [500, 2000, 8000]
    means = []
    for n in ns:
        res = run_algorithm(_problem(n), "syn", "cubic-newton", 1.0, list(range(8)), [3], delta=1e-6, hyper=HYPER)
        means.append(np.mean([r.final_excess_loss for r in res]))
    assert means[0] > means[1] > means[2] > 0
    slope = np.polyfit(np.log(ns), np.log(means), 1)[0]
    assert -2.6 < slope < -1.3, slope


@pytest.mark.parametrize("hyper, name", [({"mu": 0.0}, "mu"), ({"diameter": -1.0}, "diameter"),
                                         ({"max_inner": 0}, "max_inner")])
def test_bad_arguments_raise(hyper, name):
    with pytest.raises(ValueError, match=name):
        run_algorithm(_problem(100), "syn", "cubic-newton", 1.0, [0], [1], hyper=hyper)
