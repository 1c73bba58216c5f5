"""Full-batch optimizers: noiseless limit, ledger, determinism and one step computed by hand."""

import math

import numpy as np
import pytest
from scipy import linalg, special

from dpnewton.algorithms.base import random_unit_vector
from dpnewton.algorithms.minibatch import MinibatchNewtonConfig, minibatch_newton_step
from dpnewton.experiment import run_algorithm
from dpnewton.loss import LogisticProblem
from dpnewton.privacy import PrivacyBudgetExceeded, PrivacyLedger, epsilon_to_rho
from dpnewton.seeding import RunIdentity

NEWTON = ["hess-clip", "hess-add", "qu-clip", "qu-add"]
FULL_BATCH = NEWTON + ["dp-gd", "dp-gd-oracle", "damped-newton"]
# Iterations that reach the optimum without noise, and the excess-loss tolerance reached.
NOISELESS = {"hess-clip": (30, 1e-9), "hess-add": (30, 1e-9), "qu-clip": (60, 1e-9), "qu-add": (60, 1e-9),
             "dp-gd": (3000, 1e-6), "dp-gd-oracle": (300, 1e-7), "damped-newton": (40, 1e-9)}
HUGE_EPS = 1e9  # rho ~ 1e16: every noise scale is ~1e-10 or smaller


@pytest.mark.parametrize("algorithm", FULL_BATCH)
def test_noiseless_limit_reaches_optimum(toy_problem, algorithm):
    T, tol = NOISELESS[algorithm]
    (res,) = run_algorithm(toy_problem, "toy", algorithm, HUGE_EPS, [0], [T])
    assert res.final_excess_loss < tol
    assert res.final_excess_loss > -1e-12  # the optimum really is the minimum


@pytest.mark.parametrize("algorithm", FULL_BATCH)
@pytest.mark.parametrize("conversion", ["bs16", "cks", "official-fsolve"])
def test_ledger_sums_to_rho(toy_problem, algorithm, conversion):
    eps = 0.5
    results = run_algorithm(toy_problem, "toy", algorithm, eps, [0, 1], [3, 5], conversion=conversion)
    rho = epsilon_to_rho(eps, 1 / toy_problem.n**2, conversion)
    for res in results:
        assert res.ledger.budget_rho == rho
        assert math.isclose(res.ledger.spent_rho, rho, rel_tol=1e-12)
        per_step = {}
        for e in res.ledger.entries:
            per_step[e.step] = per_step.get(e.step, 0.0) + e.rho
            assert e.sigma == pytest.approx(e.sensitivity / math.sqrt(2 * e.rho), rel=1e-15)
        assert sorted(per_step) == list(range(res.identity.iterations))
        assert all(math.isclose(v, rho / res.identity.iterations, rel_tol=1e-12) for v in per_step.values())


@pytest.mark.parametrize("algorithm", FULL_BATCH)
def test_deterministic_and_order_independent(toy_problem, algorithm):
    a = run_algorithm(toy_problem, "toy", algorithm, 1.0, [0, 1, 2], [2, 4])
    b = run_algorithm(toy_problem, "toy", algorithm, 1.0, [2, 1, 0], [4, 2])
    by_id = {r.identity: r for r in b}
    for r in a:
        other = by_id[r.identity]
        assert np.array_equal(r.w, other.w)
        assert np.array_equal(r.excess_loss, other.excess_loss)
    single = run_algorithm(toy_problem, "toy", algorithm, 1.0, [1], [4])[0]
    assert np.array_equal(single.w, by_id[single.identity].w)
    # different seeds give different runs
    assert not np.array_equal(a[0].w, a[2].w)


def test_overspending_raises():
    ledger = PrivacyLedger(1.0)
    ledger.charge(0, "gradient", 1.0, 0.6)
    with pytest.raises(PrivacyBudgetExceeded, match="only 0.4"):
        ledger.charge(1, "gradient", 1.0, 0.5)


def _replayed_generator(toy_problem, algorithm, eps, seed, T):
    rng = RunIdentity("toy", algorithm, float(eps), seed, T).generator()
    w0 = random_unit_vector(rng, toy_problem.d)
    return rng, w0


def _grad(Z, w):
    return -(Z.T @ special.expit(-(Z @ w))) / Z.shape[0]


def test_hess_clip_one_step_by_hand(toy_problem):
    """Algorithm 3 with the released code's adaptive lambda, written out from docs/algorithms.md §2.3."""
    p, eps = toy_problem, 2.0
    n, d, Z = p.n, p.d, p.Z
    (res,) = run_algorithm(p, "toy", "hess-clip", eps, [5], [1])
    rng, w = _replayed_generator(p, "hess-clip", eps, 5, 1)
    rho = epsilon_to_rho(eps, 1 / n**2, "bs16")
    rho_g, rho_h = 0.7 * rho, 0.3 * rho
    rho_tr, rho_dir = 0.1 * rho_h, 0.9 * rho_h
    g = _grad(Z, w) + 1e-8 * w + (1 / n) / math.sqrt(2 * rho_g) * rng.standard_normal(d)
    m = Z @ w
    c = special.expit(m) * special.expit(-m)
    H = (Z * c[:, None]).T @ Z / n
    tau = 0.5 * max(np.trace(H) + (0.25 / n) * math.sqrt(0.5 / rho_tr) * rng.standard_normal(), 0.0)
    lam = max((tau / (n * n * rho_dir)) ** (1 / 3), 1 / n)
    vals, vecs = np.linalg.eigh(H)
    direction = vecs @ np.diag(1 / np.maximum(vals, lam)) @ vecs.T @ g
    s2 = np.linalg.norm(g) * 0.25 / (n * lam**2 - 0.25 * lam)
    w1 = w - direction + s2 * math.sqrt(0.5 / rho_dir) * rng.standard_normal(d)
    np.testing.assert_allclose(res.w, w1, rtol=1e-10, atol=1e-13)
    assert res.diagnostics["lambda"][0] == pytest.approx(lam, rel=1e-12)


def test_qu_add_fixed_lambda_one_step_by_hand(toy_problem):
    """Algorithm 3 as printed: fixed lambda0, theta = 1 - grad_frac, sigma_1 and sigma_2 of P 5.1."""
    p, eps, lam, theta = toy_problem, 3.0, 0.05, 0.4
    n, d, Z = p.n, p.d, p.Z
    (res,) = run_algorithm(p, "toy", "qu-add", eps, [2], [1],
                           hyper={"lambda_mode": "fixed", "lambda0": lam, "grad_frac": 1 - theta})
    rng, w = _replayed_generator(p, "qu-add", eps, 2, 1)
    rho, T = epsilon_to_rho(eps, 1 / n**2, "bs16"), 1
    sigma1 = math.sqrt(T) / (n * math.sqrt(2 * rho * (1 - theta)))
    sigma2 = math.sqrt(T) / ((4 * n * lam**2 + lam) * math.sqrt(2 * rho * theta))
    g = _grad(Z, w) + 1e-8 * w + sigma1 * rng.standard_normal(d)
    m = Z @ w
    q = np.tanh(m / 2) / (2 * m)
    H = (Z * q[:, None]).T @ Z / n
    w1 = w - np.linalg.solve(H + lam * np.eye(d), g) + np.linalg.norm(g) * sigma2 * rng.standard_normal(d)
    np.testing.assert_allclose(res.w, w1, rtol=1e-10, atol=1e-13)


def test_dp_gd_one_step_by_hand(toy_problem):
    p, eps, T = toy_problem, 1.0, 4
    n, d = p.n, p.d
    (res,) = run_algorithm(p, "toy", "dp-gd", eps, [3], [T])
    rng, w = _replayed_generator(p, "dp-gd", eps, 3, T)
    rho = epsilon_to_rho(eps, 1 / n**2, "bs16")
    s = 4 * math.sqrt(T) / (n * math.sqrt(2 * rho))  # docs/algorithms.md §3.1
    for _ in range(T):  # the noise is added to the gradient, hence subtracted after the step
        w = w - 4 * _grad(p.Z, w) - s * rng.standard_normal(d)
    np.testing.assert_allclose(res.w, w, rtol=1e-10, atol=1e-13)


def test_dp_gd_oracle_armijo_step_by_hand(toy_problem):
    p, eps = toy_problem, 1.0
    n, d, Z = p.n, p.d, p.Z
    (res,) = run_algorithm(p, "toy", "dp-gd-oracle", eps, [4], [1])
    rng, w = _replayed_generator(p, "dp-gd-oracle", eps, 4, 1)
    rho = epsilon_to_rho(eps, 1 / n**2, "bs16")
    grad = _grad(Z, w) + 1e-8 * w
    g = grad + (1 / n) / math.sqrt(2 * rho) * rng.standard_normal(d)

    def loss(v):
        return np.mean(np.log1p(np.exp(-(Z @ v)))) + 0.5e-8 * v @ v

    t = 100.0
    while t >= 1e-6 and not loss(w - t * g) < loss(w) - 0.4 * t * g @ grad:
        t *= 0.95
    np.testing.assert_allclose(res.w, w - t * g, rtol=1e-9, atol=1e-12)
    assert "line search" in res.ledger.nonprivate[0]


def test_damped_newton_one_step_by_hand(toy_problem):
    p, eps = toy_problem, 5.0
    n, d, Z = p.n, p.d, p.Z
    (res,) = run_algorithm(p, "toy", "damped-newton", eps, [1], [1])
    rng, w = _replayed_generator(p, "damped-newton", eps, 1, 1)
    rho = epsilon_to_rho(eps, 1 / n**2, "bs16")
    grad = _grad(Z, w) + 1e-8 * w
    m = Z @ w
    c = special.expit(m) * special.expit(-m)
    H = (Z * c[:, None]).T @ Z / n + 1e-8 * np.eye(d)
    g = grad + (1 / n) / math.sqrt(2 * 0.7 * rho) * rng.standard_normal(d)
    E = (0.25 / n) * math.sqrt(0.5 / (0.3 * rho)) * rng.standard_normal((d, d))
    vals, vecs = np.linalg.eigh(H + (E + E.T) / 2)
    p_dir = vecs @ np.diag(1 / np.maximum(vals, 1e-5)) @ vecs.T @ g
    beta = np.linalg.norm(linalg.solve(H, grad))
    np.testing.assert_allclose(res.w, w - np.log1p(beta) / beta * p_dir, rtol=1e-9, atol=1e-12)
    assert "not" not in res.ledger.nonprivate[0] and "damped" in res.ledger.nonprivate[0]


def test_explosion_reset_counts_and_is_labelled(toy_problem):
    (res,) = run_algorithm(toy_problem, "toy", "hess-add", 1e-3, [0], [5], hyper={"reset": True})
    assert res.resets >= 0
    assert any("reset" in part for part in res.ledger.nonprivate)
    (off,) = run_algorithm(toy_problem, "toy", "hess-add", 1e-3, [0], [5])
    assert off.resets == 0 and not off.ledger.nonprivate


@pytest.mark.parametrize("algorithm", ["hess-clip", "qu-add"])
def test_overflowing_newton_run_is_recorded_as_diverged(algorithm):
    """reg = 1 puts ||w|| into the direction's sensitivity, so the iterate grows geometrically until the
    float32 margins overflow: the run must end diverged (NaN), with a full ledger, not raise."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3))
    problem = LogisticProblem.from_xy(X, np.where(X[:, 0] > 0, 1.0, -1.0), precision="float32")
    with np.errstate(all="ignore"):
        (res,) = run_algorithm(problem, "toy", algorithm, 0.1, [0], [256], hyper={"reg": 1.0})
    assert res.diagnostics["diverged"] and np.isnan(res.w).all()
    assert math.isclose(res.ledger.spent_rho, res.ledger.budget_rho, rel_tol=1e-9)
    unbounded = [e for e in res.ledger.entries if math.isinf(e.sensitivity)]
    assert unbounded and all(e.quantity == "direction" and math.isinf(e.sigma) for e in unbounded)
    assert len(res.ledger.dp_event().events) == len(res.ledger.entries)


def test_minibatch_newton_step_of_an_overflowing_iterate_is_nan():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    problem = LogisticProblem.from_xy(X, np.where(X[:, 0] > 0, 1.0, -1.0), precision="float32")
    with np.errstate(all="ignore"):
        w, *_ = minibatch_newton_step(problem, np.full(3, 1e300), rng, MinibatchNewtonConfig(), 10.0, 10.0, 1.0, 1.0)
    assert np.isnan(w).all()


def test_v1_constants_switch(toy_problem):
    (v1,) = run_algorithm(toy_problem, "toy", "hess-clip", 1.0, [0], [2], hyper={"constants": "v1"})
    (v2,) = run_algorithm(toy_problem, "toy", "hess-clip", 1.0, [0], [2])
    assert min(v1.diagnostics["lambda"]) >= 8e-4
    assert not np.array_equal(v1.w, v2.w)
    grads = [e for e in v1.ledger.entries if e.quantity == "gradient"]
    assert sum(e.rho for e in grads) == pytest.approx(0.75 * v1.ledger.budget_rho, rel=1e-12)


@pytest.mark.parametrize("kwargs,match", [
    ({"algorithm": "newton-magic"}, "algorithm='newton-magic'"),
    ({"epsilon": 0.0}, "epsilon=0.0"),
    ({"epsilon": -2.0}, "epsilon=-2.0"),
    ({"delta": 1.5}, "delta=1.5"),
    ({"delta": 0.0}, "delta=0.0"),
    ({"iterations": [0]}, "iterations=0"),
    ({"conversion": "loose"}, "conversion='loose'"),
    ({"hyper": {"grad_frak": 0.5}}, "grad_frak"),
    ({"hyper": {"grad_frac": 1.5}}, "grad_frac=1.5"),
])
def test_bad_arguments(toy_problem, kwargs, match):
    args = {"algorithm": "hess-clip", "epsilon": 1.0, "iterations": [2], "delta": None,
            "conversion": "bs16", "hyper": None}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        run_algorithm(toy_problem, "toy", args["algorithm"], args["epsilon"], [0], args["iterations"],
                      delta=args["delta"], conversion=args["conversion"], hyper=args["hyper"])


def test_fixed_clip_lambda_must_exceed_quarter_over_n(toy_problem):
    with pytest.raises(ValueError, match="lambda0"):
        run_algorithm(toy_problem, "toy", "hess-clip", 1.0, [0], [1],
                      hyper={"lambda_mode": "fixed", "lambda0": 0.1 / toy_problem.n})


def test_armijo_bisection_matches_the_official_linear_scan():
    """armijo_step (bisection) returns exactly the official scan's step on convex line functions,
    with O(log K) evaluations; including slopes <= 0 (no step passes)."""
    from dpnewton.algorithms.line_search import armijo_step

    def scan(phi, phi0, slope):
        t = 100.0
        while t >= 1e-6:
            if phi(t) < phi0 - 0.4 * t * slope:
                return t
            t *= 0.95
        return t

    rng = np.random.default_rng(0)
    interior = 0
    for _ in range(200):
        m, z = rng.standard_normal(50) * 3, rng.standard_normal(50) * rng.uniform(0.01, 5)
        reg = rng.uniform(0, 1e-2)

        def phi(t, m=m, z=z, reg=reg):
            calls.append(t)
            return float(np.logaddexp(0.0, -(m - t * z)).mean()) + 0.5 * reg * t * t

        slope = -float(np.mean(z / (1 + np.exp(m)))) * rng.choice([1.0, -1.0, 0.0])  # = -phi'(0) or not
        calls = []
        expected = scan(phi, phi(0.0), slope)
        n_scan = len(calls)
        calls = []
        assert armijo_step(phi, phi(0.0), slope) == expected
        assert len(calls) <= 12  # phi(0) + 2 end checks + ceil(log2 360) bisection steps
        interior += 1e-6 <= expected < 100.0 and n_scan > 12
    assert interior >= 50  # the comparison covers steps the scan needed many evaluations for
