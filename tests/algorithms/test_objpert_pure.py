"""Objective perturbation at delta = 0 (pure epsilon-DP): the L2-norm Laplace sampler, the split, the
refusal of delta = 0 elsewhere, and an empirical audit that passes the mechanism and catches a broken one."""

import numpy as np
import pytest
from scipy import stats

import dpnewton
from dpnewton.algorithms import RunContext, get_algorithm
from dpnewton.algorithms.objpert import pure_parameters
from dpnewton.audit.distinguisher import threshold_audit
from dpnewton.audit.variants import AuditLedger
from dpnewton.loss import LogisticProblem
from dpnewton.privacy.norm_laplace import norm_laplace
from dpnewton.seeding import RunIdentity


def test_norm_laplace_radius_is_gamma_and_direction_uniform():
    """||v|| ~ Gamma(d, s) (density r^(d-1) e^(-r/s)), direction uniform: mean ~ 0, E||v|| = d s."""
    rng = np.random.default_rng(0)
    d, s = 5, 0.3
    V = np.stack([norm_laplace(rng, d, s) for _ in range(4000)])
    radii = np.linalg.norm(V, axis=1)
    assert stats.kstest(radii, stats.gamma(d, scale=s).cdf).pvalue > 1e-3
    assert radii.mean() == pytest.approx(d * s, rel=0.03)
    assert np.abs((V / radii[:, None]).mean(axis=0)).max() < 0.05


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_pure_split_spends_exactly_epsilon(epsilon):
    p = pure_parameters(epsilon, 100, neighbouring="add-remove", d=5)
    assert p["eps0"] + p["eps_noise"] + p["eps_out"] == pytest.approx(epsilon, rel=1e-12)
    assert p["eps0"] == pytest.approx(np.log1p(0.25 / p["Lambda"]), rel=1e-12) and p["eps_noise"] > 0
    assert p["scale"] == pytest.approx(1.0 / p["eps_noise"]) and p["delta_spent"] == 0.0
    assert p["scale_out"] == pytest.approx(p["sensitivity_out"] / p["eps_out"])


def test_delta_zero_is_pure_objpert_only():
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((200, 3)) / 3, np.where(rng.random(200) < 0.5, 1.0, -1.0)
    fit = dpnewton.fit(X, y, "objpert", epsilon=1.0, delta=0, seed=0)
    assert fit.record["delta"] == 0.0 and "pure epsilon-DP" in fit.record["accounting_events"]
    with pytest.raises(ValueError, match=r"delta=0 \(pure epsilon-DP\) needs an algorithm with a pure mechanism"):
        dpnewton.fit(X, y, "dp-gd", epsilon=1.0, delta=0, iterations=3, seed=0)


def _released(problem: LogisticProblem, broken: str, trials: int, epsilon: float, side: int) -> np.ndarray:
    run = get_algorithm("objpert").run
    base = np.random.default_rng([7, side])
    contexts = [RunContext(RunIdentity(problem.name, "objpert", epsilon, i, 1), epsilon, 0.0, "bs16",
                           0.5 * epsilon**2, AuditLedger(0.5 * epsilon**2, broken),
                           np.random.default_rng(base.integers(2**63))) for i in range(trials)]
    return np.array([r.w[0] for r in run(problem, contexts, {})])


@pytest.mark.parametrize("broken, caught", [("none", False), ("tenth-noise", True)])
def test_empirical_audit_of_the_pure_mechanism(broken, caught):
    """1-D canary pair: D = 20 rows z = -1, D' = D + one row z = +1 (|l'| <= 1 attained in the limit).
    The threshold audit's 95 % lower bound stays below the claim epsilon = 1 for the mechanism and
    exceeds it when the noise is cut to a tenth (the broken variant's only change)."""
    epsilon, n = 1.0, 20
    D = LogisticProblem.from_xy(np.ones((n, 1)), -np.ones(n), name="canary")
    D_prime = LogisticProblem.from_xy(np.ones((n + 1, 1)), np.append(-np.ones(n), 1.0), name="canary")
    neg = _released(D, broken, 3000, epsilon, 0)
    pos = _released(D_prime, broken, 3000, epsilon, 1)
    bound = threshold_audit(neg, pos, delta=0.0).epsilon_lb
    assert (bound > epsilon) == caught, bound


@pytest.mark.parametrize("delta", [None, 0])
@pytest.mark.parametrize("epsilon", [300.0, 3000.0, 1e5])
def test_large_epsilon_fits_and_beyond_the_cap_is_a_clear_error(epsilon, delta):
    """Lambda's public floor keeps the objective solvable at large epsilon (without it: Newton missed its
    tolerance at epsilon 300 and Cholesky failed at 3000); above MAX_EPSILON a clear refusal."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 4))
    y = np.where(X @ np.array([3.0, -2.0, 1.0, 0.5]) > 0, 1.0, -1.0)      # separable: the hardest case
    fit = dpnewton.fit(X / 4, y, "objpert", epsilon=epsilon, delta=delta, seed=0)
    assert np.isfinite(fit.weights).all() and np.mean(np.sign(X @ fit.weights) == y) > 0.9
    with pytest.raises(ValueError, match="above objpert's cap of 1e\\+06: no privacy is left"):
        dpnewton.fit(X / 4, y, "objpert", epsilon=1e300, delta=delta, seed=0)


@pytest.mark.parametrize("relation", ["add-remove", "add-remove-public-n"])
def test_greybox_replay_of_the_pure_mode(relation):
    """Same seed on D and D' (replaying D's releases): identical control flow and noise scales, each
    release's input moved within its declared sensitivity; broken variants are caught."""
    from dpnewton.audit.greybox import greybox_audit

    assert not greybox_audit("objpert", relation, delta=0.0).violations
    for broken in ("wrong-sensitivity", "tenth-noise") + (("public-n",) if relation == "add-remove" else ()):
        assert greybox_audit("objpert", relation, broken=broken, delta=0.0).violations, broken
