"""DP-SGD and minibatch double-noise Newton: hand-checked steps, limits, determinism, errors."""

import numpy as np
import pytest
from scipy import special

from dpnewton.algorithms import minibatch as mb
from dpnewton.algorithms.optimum import find_optimum
from dpnewton.experiment import run_algorithm
from dpnewton.loss import LogisticProblem


def _problem(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    w = 2.0 * rng.standard_normal(d)
    y = np.where(rng.random(n) < special.expit(X @ w), 1.0, -1.0)
    p = LogisticProblem.from_xy(X, y)
    opt = find_optimum(p)
    p.set_optimum(opt.w, opt.loss)
    return p


PROBLEM = _problem()


def test_dp_sgd_step_matches_hand_computation():
    p, w = PROBLEM, np.array([0.3, -0.2, 0.1, 0.5])
    b, z = 40.0, 1.7
    out = mb.dp_sgd_step(p, w, np.random.default_rng(11), b, z, 4.0)
    rng = np.random.default_rng(11)
    mask = rng.random(p.n) < b / p.n
    xi = rng.standard_normal(p.d)
    s = sum(-special.expit(-(p.Z[i] @ w)) * p.Z[i] for i in np.flatnonzero(mask))
    np.testing.assert_allclose(out, w - 4.0 * (s + z * xi) / b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("soi, mod", [("hessian", "clip"), ("qu", "add")])
def test_newton_step_matches_hand_computation(soi, mod):
    p, w = PROBLEM, np.array([0.3, -0.2, 0.1, 0.5])
    b_g, b_h, z_g, z_h = 50.0, 30.0, 1.3, 2.1
    cfg = mb.MinibatchNewtonConfig(soi=soi, modification=mod, lambda0=0.01)
    out, lam, _, _ = mb.minibatch_newton_step(p, w, np.random.default_rng(3), cfg, b_g, b_h, z_g, z_h)
    rng = np.random.default_rng(3)
    mg = rng.random(p.n) < b_g / p.n
    mh = rng.random(p.n) < b_h / p.n
    xi_g, xi_d = rng.standard_normal(p.d), rng.standard_normal(p.d)
    g = (sum(-special.expit(-(p.Z[i] @ w)) * p.Z[i] for i in np.flatnonzero(mg)) + z_g * xi_g) / b_g
    H = np.zeros((p.d, p.d))
    for i in np.flatnonzero(mh):
        m = p.Z[i] @ w
        c = special.expit(m) * special.expit(-m) if soi == "hessian" else np.tanh(m / 2) / (2 * m)
        H += c * np.outer(p.Z[i], p.Z[i])
    H /= b_h
    if mod == "clip":
        lam_c = max(0.01, 1.0 / b_h)
        vals, vecs = np.linalg.eigh(H)
        direction = vecs @ np.diag(1.0 / np.maximum(vals, lam_c)) @ vecs.T @ g
        s2 = np.linalg.norm(g) * 0.25 / (b_h * lam_c**2 - 0.25 * lam_c)
    else:
        lam_c = 0.01
        direction = np.linalg.solve(H + lam_c * np.eye(p.d), g)
        s2 = np.linalg.norm(g) * 0.25 / (b_h * lam_c**2 + 0.25 * lam_c)
    assert lam == lam_c
    np.testing.assert_allclose(out, w - direction + s2 * z_h * xi_d, rtol=1e-10, atol=1e-12)


def test_empty_batches_give_no_nan():
    empty = PROBLEM.batch(np.array([], dtype=int))
    assert mb.gradient_sum(empty, np.zeros(4)).tolist() == [0.0] * 4
    assert mb.soi_sum(empty, np.zeros(4), "hessian").tolist() == [[0.0] * 4] * 4
    res = run_algorithm(PROBLEM, "syn", "minibatch-hess-clip", 1.0, [0], [20],
                        hyper={"batch_grad": 1, "batch_hess": 1, "noise_multipliers": (0.5, 0.5)})
    sizes = res[0].diagnostics["realised_batches"]
    assert any(kg == 0 for kg, _ in sizes) and any(kh == 0 for _, kh in sizes)
    assert np.isfinite(res[0].w).all() and np.isfinite(res[0].excess_loss).all()
    res = run_algorithm(PROBLEM, "syn", "dp-sgd", 1.0, [0], [20], hyper={"batch_size": 1, "noise_multiplier": 0.5})
    assert np.isfinite(res[0].excess_loss).all()


def test_noiseless_limit_reaches_optimum():
    full = {"batch_frac": 1.0}
    res = run_algorithm(PROBLEM, "syn", "minibatch-hess-add", 1.0, [0], [12],
                        hyper={**full, "lambda0": 1e-6, "noise_multipliers": (0.0, 0.0)})
    assert res[0].final_excess_loss < 1e-9
    res = run_algorithm(PROBLEM, "syn", "minibatch-qu-clip", 1.0, [0], [40],
                        hyper={**full, "lambda0": 1e-3, "noise_multipliers": (0.0, 0.0)})
    assert res[0].final_excess_loss < 1e-6
    res = run_algorithm(PROBLEM, "syn", "dp-sgd", 1.0, [0], [300],
                        hyper={"batch_size": PROBLEM.n, "noise_multiplier": 0.0})
    assert res[0].final_excess_loss < 1e-4


def test_calibrated_runs_are_deterministic_and_recorded():
    for alg in ("minibatch-qu-add", "dp-sgd"):
        a = run_algorithm(PROBLEM, "syn", alg, 0.5, [0, 1], [4])
        b = run_algorithm(PROBLEM, "syn", alg, 0.5, [0, 1], [4])
        for x, y in zip(a, b):
            assert np.array_equal(x.w, y.w) and np.array_equal(x.excess_loss, y.excess_loss)
            assert not x.ledger.entries and len(x.ledger.events) == 1
            ev = x.ledger.events[0]
            assert ev["accountant_epsilon"] <= 0.5 and abs(ev["accountant_epsilon"] - 0.5) <= 5e-7
            assert ev["delta"] == 1.0 / PROBLEM.n**2
            assert ev["steps"] == 4
        assert not np.array_equal(a[0].w, a[1].w)


@pytest.mark.parametrize("alg, hyper, name", [
    ("minibatch-hess-clip", {"batch_grad": 0}, "batch_grad"),
    ("minibatch-hess-clip", {"batch_hess": 10_000}, "batch_hess"),
    ("minibatch-hess-add", {"lambda0": -1.0}, "lambda0"),
    ("minibatch-qu-add", {"grad_frac": 1.5}, "grad_frac"),
    ("minibatch-qu-add", {"soi": "qu"}, "fixed"),
    ("dp-sgd", {"batch_size": 0}, "batch_size"),
    ("dp-sgd", {"step": 0.0}, "step"),
    ("dp-sgd", {"bogus": 1}, "bogus")])
def test_bad_arguments_raise(alg, hyper, name):
    with pytest.raises(ValueError, match=name):
        run_algorithm(PROBLEM, "syn", alg, 1.0, [0], [2], hyper=hyper)
