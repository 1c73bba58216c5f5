"""precond-dp-gd: replay from the formula, ledger shares, the clipped preconditioner, convergence,
batch independence, refresh, bad hyper-parameters and the empirical audit (docs/algorithms.md §13)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from dpnewton.algorithms import get_algorithm
from dpnewton.algorithms.newton_direction import modified_newton_direction
from dpnewton.algorithms.precond import bohning_bound, clipped_inverse, release_symmetric
from dpnewton.audit import audit_mechanism
from dpnewton.experiment import run_algorithm
from dpnewton.privacy import epsilon_to_rho
from dpnewton.seeding import RunIdentity

ALG = "precond-dp-gd"
EPS = 3.0


def _replay(p, eps, seed, T, step=1.0, frac=0.1, mult=2.0, refresh=0, soi="hessian", mode="spectral"):
    """w_T written out from the formula with numpy only (no package code but the run's generator)."""
    n, d, Z = p.n, p.d, p.Z
    rng = RunIdentity("toy", ALG, float(eps), seed, T).generator()
    u = rng.standard_normal(d)
    w = u / np.linalg.norm(u)
    rho = epsilon_to_rho(eps, 1 / n**2, "bs16")
    releases = 1 if refresh == 0 else math.ceil(T / refresh)
    s_b = (1 / (4 * n)) / math.sqrt(2 * frac * rho / releases)
    lams = []

    def preconditioner(C):
        xi = rng.standard_normal(d * (d + 1) // 2)
        S, k = np.zeros((d, d)), 0
        for i in range(d):
            for j in range(i, d):
                S[i, j] = S[j, i] = s_b * xi[k]
                k += 1
        if mode == "spectral":
            lam = mult * s_b * math.sqrt(d)
        else:   # docs/algorithms.md §2.3 (v2 constants) on tr B~, with the release's rho
            tau = 0.5 * max(np.trace(C + S), 0.0)
            lam = max((tau / (n * n * frac * rho / releases)) ** (1 / 3), 1 / n)
        lams.append(lam)
        vals, vecs = np.linalg.eigh(C + S)
        return vecs @ np.diag(np.maximum(vals, lam)) @ vecs.T

    P = preconditioner(Z.T @ Z / (4 * n))
    s_g = (1 / n) / math.sqrt(2 * (1 - frac) * rho / T)
    for t in range(T):
        m = Z @ w
        if refresh and t > 0 and t % refresh == 0:
            c = special.expit(m) * special.expit(-m) if soi == "hessian" else np.tanh(m / 2) / (2 * m)
            P = preconditioner((Z * c[:, None]).T @ Z / n)
        g = -(Z.T @ special.expit(-m)) / n + s_g * rng.standard_normal(d)
        w = w - step * np.linalg.solve(P, g)
    return w, lams


@pytest.mark.parametrize("eps,T,hyper", [
    (1.0, 1, {}), (2.0, 7, {}), (0.5, 4, {"step": 0.5, "precond_frac": 0.3, "lambda_mult": 1.0}),
    (5.0, 7, {"refresh": 3}), (5.0, 6, {"refresh": 2, "refresh_soi": "qu", "precond_frac": 0.4}),
    (2.0, 3, {"refresh": 5}), (1.0, 4, {"lambda_mode": "adaptive"}),
    (5.0, 5, {"lambda_mode": "adaptive", "refresh": 2, "precond_frac": 0.5})])
def test_replay_from_the_formula(toy_problem, eps, T, hyper):
    (res,) = run_algorithm(toy_problem, "toy", ALG, eps, [3], [T], hyper=hyper)
    w, lam = _replay(toy_problem, eps, 3, T, hyper.get("step", 1.0), hyper.get("precond_frac", 0.1),
                     hyper.get("lambda_mult", 2.0), hyper.get("refresh", 0), hyper.get("refresh_soi", "hessian"),
                     hyper.get("lambda_mode", "spectral"))
    np.testing.assert_allclose(res.w, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.diagnostics["lambdas"], lam, rtol=1e-9)
    assert res.diagnostics["lambda"] == res.diagnostics["lambdas"][0]


@pytest.mark.parametrize("frac", [0.1, 0.5, 0.9])
def test_ledger_entries_and_rho_shares(toy_problem, frac):
    eps = 0.5
    n = toy_problem.n
    rho = epsilon_to_rho(eps, 1 / n**2, "bs16")
    for res in run_algorithm(toy_problem, "toy", ALG, eps, [0, 1], [1, 6], hyper={"precond_frac": frac}):
        T = res.identity.iterations
        entries = res.ledger.entries
        assert [e.quantity for e in entries] == ["curvature"] + ["gradient"] * T
        assert [e.step for e in entries] == [0] + list(range(T))
        assert entries[0].sensitivity == pytest.approx(1 / (4 * n), rel=1e-15)
        assert entries[0].rho == pytest.approx(frac * rho, rel=1e-15)
        for e in entries[1:]:
            assert e.sensitivity == pytest.approx(1 / n, rel=1e-15)
            assert e.rho == pytest.approx((1 - frac) * rho / T, rel=1e-12)
        for e in entries:
            assert e.sigma == pytest.approx(e.sensitivity / math.sqrt(2 * e.rho), rel=1e-15)
        assert math.isclose(res.ledger.spent_rho, rho, rel_tol=1e-12)
        assert res.ledger.rho_by_quantity()["curvature"] == pytest.approx(frac * rho, rel=1e-15)
        assert res.diagnostics["sigma_curvature"] == entries[0].sigma


@pytest.mark.parametrize("refresh,T,at", [(1, 3, [0, 1, 2]), (2, 5, [0, 2, 4]), (4, 8, [0, 4]), (9, 4, [0])])
def test_refresh_ledger_releases_and_shares(toy_problem, refresh, T, at):
    eps, frac = 0.5, 0.2
    rho = epsilon_to_rho(eps, 1 / toy_problem.n**2, "bs16")
    (res,) = run_algorithm(toy_problem, "toy", ALG, eps, [0], [T], hyper={"refresh": refresh, "precond_frac": frac})
    curv = [e for e in res.ledger.entries if e.quantity == "curvature"]
    assert [e.step for e in curv] == at and res.diagnostics["curvature_releases"] == len(at)
    assert all(e.rho == pytest.approx(frac * rho / len(at), rel=1e-12) for e in curv)
    assert all(e.sensitivity == 1 / (4 * toy_problem.n) for e in curv)
    assert [e.quantity for e in res.ledger.entries if e.step == at[-1]][0] == "curvature"   # before the gradient
    assert math.isclose(res.ledger.spent_rho, rho, rel_tol=1e-12)


def test_bohning_bound_is_one_gram_pass_and_majorises_the_hessian(toy_problem):
    p = toy_problem
    B = bohning_bound(p)
    np.testing.assert_allclose(B, p.Z.T @ p.Z / (4 * p.n), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(B, p.qu(np.zeros(p.d)), rtol=1e-12, atol=1e-15)
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert np.linalg.eigvalsh(B - p.hessian(3 * rng.standard_normal(p.d))).min() >= -1e-14


@pytest.mark.parametrize("seed", range(5))
def test_preconditioner_is_psd_with_eigenvalues_at_least_lambda(toy_problem, seed):
    rng = np.random.default_rng(seed)
    d = toy_problem.d
    noisy = release_symmetric(bohning_bound(toy_problem), 0.05, rng)   # noise large enough to go negative
    assert np.array_equal(noisy, noisy.T) and np.linalg.eigvalsh(noisy).min() < 0
    lam = 0.03
    Pinv, eig = clipped_inverse(noisy, lam)
    assert eig.min() >= lam
    P = np.linalg.inv(Pinv)
    np.testing.assert_allclose(P, P.T, atol=1e-12)
    assert np.linalg.eigvalsh(0.5 * (P + P.T)).min() >= lam * (1 - 1e-10)
    # P^-1 g is the project's eigenvalue clip Psi_lambda (newton_direction), applied once
    g = rng.standard_normal(d)
    np.testing.assert_allclose(Pinv @ g, modified_newton_direction(noisy, g, lam, "clip"), rtol=1e-10, atol=1e-12)


def test_symmetric_release_draws_the_upper_triangle_once():
    class Recorder:
        def __init__(self):
            self.sizes = []

        def standard_normal(self, size):
            self.sizes.append(size)
            return np.arange(1.0, size + 1.0)

    rec = Recorder()
    out = release_symmetric(np.zeros((3, 3)), 2.0, rec)
    assert rec.sizes == [6]
    np.testing.assert_array_equal(out, 2.0 * np.array([[1, 2, 3], [2, 4, 5], [3, 5, 6]]))


@pytest.mark.parametrize("hyper,T", [({}, 60), ({"refresh": 1}, 12), ({"refresh": 3, "refresh_soi": "qu"}, 40)])
def test_huge_epsilon_converges_near_the_optimum(toy_problem, hyper, T):
    (res,) = run_algorithm(toy_problem, "toy", ALG, 1e9, [0], [T], hyper=hyper)
    assert -1e-12 < res.final_excess_loss < 1e-9
    assert res.diagnostics["clipped_eigenvalues"] == 0


@pytest.mark.parametrize("hyper", [{}, {"refresh": 2, "refresh_soi": "qu"}])
def test_batch_independence_and_determinism(toy_problem, hyper):
    a = run_algorithm(toy_problem, "toy", ALG, 1.0, [0, 1, 2], [2, 5], hyper=hyper)
    b = run_algorithm(toy_problem, "toy", ALG, 1.0, [2, 1, 0], [5, 2], hyper=hyper)
    by_id = {r.identity: r for r in b}
    for r in a:
        other = by_id[r.identity]
        assert np.array_equal(r.w, other.w) and np.array_equal(r.excess_loss, other.excess_loss)
        assert r.diagnostics["lambda"] == other.diagnostics["lambda"]
    single = run_algorithm(toy_problem, "toy", ALG, 1.0, [1], [5], hyper=hyper)[0]
    assert np.array_equal(single.w, by_id[single.identity].w)
    assert not np.array_equal(a[0].w, a[2].w)
    assert get_algorithm(ALG).batched


@pytest.mark.parametrize("hyper,match", [
    ({"step": 0.0}, "step=0.0"), ({"step": -1.0}, "step=-1.0"), ({"step": float("nan")}, "step=nan"),
    ({"precond_frac": 0.0}, "precond_frac=0.0"), ({"precond_frac": 1.0}, "precond_frac=1.0"),
    ({"precond_frac": 1.5}, "precond_frac=1.5"),
    ({"lambda_mult": 0.0}, "lambda_mult=0.0"), ({"lambda_mult": -2.0}, "lambda_mult=-2.0"),
    ({"refresh": -1}, "refresh=-1"), ({"refresh": 1.5}, "refresh=1.5"), ({"refresh": True}, "refresh=True"),
    ({"refresh_soi": "gauss"}, "refresh_soi='gauss'"), ({"lambda_mode": "fixed"}, "lambda_mode='fixed'"),
    ({"momentum": 0.9}, "unknown hyper-parameter"),
])
def test_bad_hyper_values_raise(toy_problem, hyper, match):
    with pytest.raises(ValueError, match=match):
        run_algorithm(toy_problem, "toy", ALG, 1.0, [0], [2], hyper=hyper)


# ---- empirical audit (tests/audit/test_audit.py style, CI-sized) -----------------------------------------
def _rows(name, broken, trials):
    return {r.level: r for r in audit_mechanism(name, trials=trials, epsilon=EPS, broken=broken, seed=1)}


def test_audit_gradient_release_within_claim_and_wrong_sensitivity_flagged():
    ok = _rows("precond-dp-gd", "none", 2000)
    assert all(r.epsilon_lb <= min(EPS, r.epsilon_audited_part) + 1e-12 for r in ok.values())
    assert ok["gradient-release"].epsilon_audited_part == pytest.approx(
        _rows("precond-dp-gd", "none", 300)["gradient-release"].epsilon_audited_part)
    assert ok["gradient-release"].epsilon_lb > 0.8          # the canary attains the gradient sensitivity
    assert _rows("precond-dp-gd", "wrong-sensitivity", 2000)["gradient-release"].epsilon_lb > EPS


def test_audit_curvature_release_within_claim_and_half_noise_on_b_flagged():
    """SOI canary: B~_11 carries the canary's u u^T/(4(n+1)); half the noise on B must be caught."""
    ok = _rows("precond-dp-gd-soi", "none", 2000)
    curv = ok["curvature-release"]
    assert curv.epsilon_audited_part < EPS                  # the share 0.9 of rho
    assert all(r.epsilon_lb <= min(EPS, r.epsilon_audited_part) + 1e-12 for r in ok.values())
    assert curv.epsilon_lb > 0.8                            # not vacuous
    broken = _rows("precond-dp-gd-soi", "half-noise", 5000)["curvature-release"]
    assert broken.epsilon_lb > broken.epsilon_audited_part and broken.epsilon_lb > EPS


# ---- iterate averaging (as dp-gd: post-processing by the batched driver) ------------------------------
@pytest.mark.parametrize("average", ["uniform", "tail"])
def test_averaging_is_post_processing_and_batch_independent(toy_problem, average):
    plain = {r.identity: r for r in run_algorithm(toy_problem, "toy", ALG, 1.0, [0, 1], [3, 6])}
    avg = run_algorithm(toy_problem, "toy", ALG, 1.0, [0, 1], [3, 6], hyper={"average": average})
    for b in avg:
        a = plain[b.identity]
        assert a.ledger.as_records() == b.ledger.as_records()
        assert np.array_equal(a.w, b.w_last) and np.array_equal(a.excess_loss, b.excess_loss)
        assert b.average == average
        assert b.averaged_excess_loss == pytest.approx(toy_problem.excess_loss(b.w), rel=1e-10, abs=1e-14)
        (alone,) = run_algorithm(toy_problem, "toy", ALG, 1.0, [b.identity.seed], [b.identity.iterations],
                                 hyper={"average": average})
        assert np.array_equal(alone.w, b.w)
    with pytest.raises(ValueError, match="average='foo' is unknown"):
        run_algorithm(toy_problem, "toy", ALG, 1.0, [0], [2], hyper={"average": "foo"})
