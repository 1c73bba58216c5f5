"""Private selection (Papernot & Steinke 2022): the accounting against exact enumeration.

The heart: for base mechanisms with finitely many outputs (randomized response on one bit, 3-output
mechanisms) the output distribution of the whole selection A (K ~ D, best of K independent runs
under a fixed total order of the outputs, K = 0 -> a fixed output) is computed exactly on two
neighbouring inputs, in 60-digit arithmetic, and its Renyi divergence (both directions) must not
exceed the bound of dpnewton.privacy.selection (PS22 Thm. 2 for TNB, Thm. 6 for Poisson), fed
with the base mechanism's exact RDP curve and exact delta(eps_hat), and fed with a zCDP rho.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpnewton.privacy.selection import (PoissonCount, TruncatedNegativeBinomialCount, calibrate_candidate_rho,
                                        make_distribution, poisson_rdp_bound, rdp_to_epsilon_terms,
                                        selection_epsilon, selection_rdp_zcdp, tnb_constant_zcdp,
                                        tnb_rdp_bound, tnb_with_mean, zcdp_delta)

mp.mp.dps = 60

ORDERS = [1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0]
TNBS = [TruncatedNegativeBinomialCount(eta, g) for eta in (-0.5, 0.0, 0.5, 1.0, 2.0) for g in (0.5, 0.1, 0.01)]
POISSONS = [PoissonCount(mu) for mu in (1.0, 2.0, 5.0, 20.0)]


# ---------------------------------------------------------------------------------------------
# exact enumeration
# ---------------------------------------------------------------------------------------------
def mp_pgf(dist, x):
    """E[x^K] in mpmath (PS22 Def. 1 / Poisson)."""
    x = mp.mpf(x)
    if isinstance(dist, PoissonCount):
        return mp.e ** (mp.mpf(dist.mu) * (x - 1))
    eta, g = mp.mpf(dist.eta), mp.mpf(dist.gamma)
    base = 1 - (1 - g) * x
    if dist.eta == 0:
        return mp.log(base) / mp.log(g)
    return (base ** (-eta) - 1) / (g ** (-eta) - 1)


def selection_distribution(dist, p):
    """Exact output distribution of A for a base mechanism with output probabilities ``p`` listed
    best first (the total order): P[A = j] = f(S_j) - f(S_{j+1}) with S_j = P[Q in {j, ..., m-1}]
    (all K draws no better than j, minus all strictly worse; the K = 0 terms cancel), and the
    fixed K = 0 output with probability f(0)."""
    p = [mp.mpf(v) for v in p]
    surv = [mp.fsum(p[j:]) for j in range(len(p))] + [mp.mpf(0)]
    out = [mp_pgf(dist, surv[j]) - mp_pgf(dist, surv[j + 1]) for j in range(len(p))]
    return out + [mp_pgf(dist, 0)]


def selection_distribution_by_k(dist, p, kmax):
    """Same, as the sum over K of P[K = k] times the law of the best of k (float, for cross-checks)."""
    p = np.asarray(p, dtype=float)
    surv = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
    ks = np.arange(kmax + 1)
    pk = dist.pmf(ks)
    out = np.array([np.sum(pk * (surv[j] ** ks - surv[j + 1] ** ks)) for j in range(len(p))])
    return np.concatenate([out, [pk[0]]])


def renyi(P, Q, lam):
    lam = mp.mpf(lam)
    s = mp.fsum(pp ** lam * qq ** (1 - lam) for pp, qq in zip(P, Q) if pp > 0)
    return float(mp.log(s) / (lam - 1))


def exact_selection_rdp(dist, p, q, lam):
    P, Q = selection_distribution(dist, p), selection_distribution(dist, q)
    return max(renyi(P, Q, lam), renyi(Q, P, lam))


def base_rdp_curve(p, q):
    """The base mechanism's exact RDP curve, both directions, vectorised (float64 log-sum-exp)."""
    lp, lq = np.log(np.asarray(p, float)), np.log(np.asarray(q, float))

    def rdp(orders):
        o = np.atleast_1d(np.asarray(orders, float))[:, None]
        a = np.logaddexp.reduce(o * lp + (1 - o) * lq, axis=1)
        b = np.logaddexp.reduce(o * lq + (1 - o) * lp, axis=1)
        return np.maximum(a, b) / (o[:, 0] - 1)
    return rdp


def base_delta(p, q):
    p, q = np.asarray(p, float), np.asarray(q, float)
    return lambda e: float(max(np.maximum(p - math.exp(e) * q, 0).sum(), np.maximum(q - math.exp(e) * p, 0).sum()))


def randomized_response(eps0):
    """One bit, truth 1 on x and 0 on x'; output 1 ranks first (the higher quality)."""
    t = math.exp(eps0) / (1 + math.exp(eps0))
    return [t, 1 - t], [1 - t, t]


def three_output_mechanisms():
    fixed = [([0.5, 0.3, 0.2], [0.4, 0.35, 0.25]), ([0.2, 0.3, 0.5], [0.1, 0.3, 0.6]),
             ([0.6, 0.1, 0.3], [0.3, 0.2, 0.5])]
    rng = np.random.default_rng(20221)
    for _ in range(3):
        p = rng.dirichlet(np.ones(3))
        q = p * np.exp(rng.uniform(-1, 1, 3))
        fixed.append((list(p), list(q / q.sum())))
    out = []
    for p, q in fixed:  # every total order of the three outputs
        for perm in ([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]):
            out.append(([p[i] for i in perm], [q[i] for i in perm]))
    return out


BASES = [randomized_response(e) for e in (0.1, 0.5, 1.0, 2.0)] + three_output_mechanisms()


def _pure_eps(p, q):
    return float(np.max(np.abs(np.log(np.asarray(p)) - np.log(np.asarray(q)))))


# ---------------------------------------------------------------------------------------------
# the enumeration itself is right
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dist", TNBS[::2] + POISSONS[:2], ids=repr)
def test_enumeration_pgf_matches_sum_over_k(dist):
    for p, _q in BASES[:6]:
        exact = np.array([float(v) for v in selection_distribution(dist, p)])
        by_k = selection_distribution_by_k(dist, p, 20000)
        np.testing.assert_allclose(exact, by_k, rtol=1e-9, atol=1e-14)
        assert math.isclose(exact.sum(), 1.0, rel_tol=1e-12)


def test_enumeration_of_k_equal_one_is_the_base():
    """A distribution concentrated near K = 1 (TNB with gamma -> 1) gives the base mechanism."""
    p, q = randomized_response(1.0)
    dist = TruncatedNegativeBinomialCount(1.0, 1 - 1e-12)
    out = [float(v) for v in selection_distribution(dist, p)]
    np.testing.assert_allclose(out[:2], p, rtol=1e-9)


# ---------------------------------------------------------------------------------------------
# bounds >= exact divergence
# ---------------------------------------------------------------------------------------------
def _theorem_bound(kind, dist, p, q):
    """The selection's RDP bound over ORDERS from the base mechanism's exact curve: Thm. 2 (TNB) or
    Thm. 6 (Poisson, which also needs the base mechanism's delta)."""
    if kind == "tnb":
        return tnb_rdp_bound(base_rdp_curve(p, q), ORDERS, dist)
    return poisson_rdp_bound(base_rdp_curve(p, q), base_delta(p, q), ORDERS, dist)


@pytest.mark.parametrize("kind,dist", [("tnb", d) for d in TNBS] + [("poisson", d) for d in POISSONS],
                         ids=repr)
def test_bound_dominates_exact_divergence(kind, dist):
    ratios = []
    for p, q in BASES:
        bound = _theorem_bound(kind, dist, p, q)
        rho = _pure_eps(p, q) ** 2 / 2  # eps0-DP => eps0^2/2-zCDP [BS16 Prop. 1.4]
        zbound = selection_rdp_zcdp(rho, dist, ORDERS)
        for lam, b, zb in zip(ORDERS, bound, zbound):
            exact = exact_selection_rdp(dist, p, q, lam)
            assert exact <= b * (1 + 1e-9) + 1e-12, (dist, p, q, lam, exact, b)
            assert exact <= zb * (1 + 1e-9) + 1e-12, (dist, p, q, lam, exact, zb)
            if exact > 1e-9:
                ratios.append(b / exact)
    assert min(ratios) >= 1.0


def test_enumeration_has_power():
    """The check is not vacuous: Thm. 2 with its constant (1 + eta) (...) halved is violated by
    some base mechanism of the list (the tight cases are small-K, large-gamma ones)."""
    violated = 0
    for dist in TNBS:
        for p, q in BASES[:10]:
            rdp = base_rdp_curve(p, q)
            lams = np.array(ORDERS)
            full = tnb_rdp_bound(rdp, lams, dist)
            tail = math.log(dist.mean) / (lams - 1)
            halved = rdp(lams) + (full - rdp(lams) - tail) / 2 + tail
            violated += sum(exact_selection_rdp(dist, p, q, lam) > h for lam, h in zip(ORDERS, halved))
    assert violated > 0


def test_poisson_bound_needs_mean_at_least_one():
    """The Theorem 6 formula with mu < 1 falls below the exact divergence: why PoissonCount needs mu >= 1."""
    p, q = randomized_response(1.0)
    rdp, dfun = base_rdp_curve(p, q), base_delta(p, q)
    mu, lam = 0.1, 2.0
    e_hat = math.log1p(1 / (lam - 1))
    formula = float(rdp([lam])[0]) + mu * dfun(e_hat) + math.log(mu) / (lam - 1)
    d = object.__new__(PoissonCount)  # bypass the mu >= 1 check
    object.__setattr__(d, "mu", mu)
    exact = exact_selection_rdp(d, p, q, lam)
    assert exact > 0 > formula
    with pytest.raises(ValueError, match="mu"):
        PoissonCount(0.5)


def test_selection_is_tighter_than_composition_for_large_k_and_looser_for_k1():
    """Sanity of scale: with E[K] = 10 the selection costs far less than 10-fold composition
    at large orders, and more than a single run."""
    rho = 0.01
    dist = tnb_with_mean(1.0, 10.0)
    b = selection_rdp_zcdp(rho, dist, [10.0])[0]
    assert 10.0 * rho < b < 10 * 10.0 * rho


# ---------------------------------------------------------------------------------------------
# known answers
# ---------------------------------------------------------------------------------------------
def test_tnb_means_known_answers():
    assert math.isclose(TruncatedNegativeBinomialCount(1.0, 0.1).mean, 10.0, rel_tol=1e-14)
    assert math.isclose(TruncatedNegativeBinomialCount(0.0, math.exp(-1)).mean, math.e - 1, rel_tol=1e-14)
    assert math.isclose(TruncatedNegativeBinomialCount(2.0, 0.5).mean, 2 * 0.5 / (0.5 * 0.75), rel_tol=1e-14)
    assert math.isclose(TruncatedNegativeBinomialCount(-0.5, 0.25).mean, 1.5, rel_tol=1e-14)
    for d in TNBS + POISSONS:
        ks = np.arange(0, 40000)
        pk = d.pmf(ks)
        assert math.isclose(pk.sum(), 1.0, rel_tol=1e-10)
        assert math.isclose((ks * pk).sum(), d.mean, rel_tol=1e-8)
        assert math.isclose(float(d.pgf(1.0)), 1.0, rel_tol=1e-12)
    g = TruncatedNegativeBinomialCount(1.0, 0.25)
    np.testing.assert_allclose(g.pmf([0, 1, 2, 3]), [0, 0.25, 0.25 * 0.75, 0.25 * 0.75 ** 2], rtol=1e-14)
    lg = TruncatedNegativeBinomialCount(0.0, 0.5)
    np.testing.assert_allclose(lg.pmf([1, 2]), [0.5 / math.log(2), 0.25 / (2 * math.log(2))], rtol=1e-14)
    for eta in (0.0, 0.5, 1.0, 3.0):
        assert math.isclose(tnb_with_mean(eta, 7.0).mean, 7.0, rel_tol=1e-9)
    assert make_distribution("geometric", mean=4.0) == TruncatedNegativeBinomialCount(1.0, 0.25)


def test_bounds_known_answers_by_hand():
    # geometric, E[K] = 10, rho = 0.02, lambda = 10: lambda_hat* = sqrt(log 10 / 0.02) = 10.73 >= 1
    rho, lam = 0.02, 10.0
    hand = lam * rho + 2 * (2 * math.sqrt(rho * math.log(10)) - rho) + math.log(10) / (lam - 1)
    got = selection_rdp_zcdp(rho, TruncatedNegativeBinomialCount(1.0, 0.1), [lam])[0]
    assert math.isclose(got, hand, rel_tol=1e-13)
    assert math.isclose(hand, 1.2742292, rel_tol=1e-7)  # 0.2 + 0.818388 + 0.255843
    c, lam_hat = tnb_constant_zcdp(rho, TruncatedNegativeBinomialCount(1.0, 0.1))
    assert math.isclose(lam_hat, math.sqrt(math.log(10) / rho))
    # large rho: lambda_hat = 1, constant (1 + eta) log(1/gamma)
    c, lam_hat = tnb_constant_zcdp(5.0, TruncatedNegativeBinomialCount(0.0, 0.5))
    assert lam_hat == 1.0 and math.isclose(c, math.log(2))
    # the generic form at the closed-form minimiser equals it
    dist = TruncatedNegativeBinomialCount(0.5, 0.05)
    lh = math.sqrt(math.log(20) / rho)
    generic = tnb_rdp_bound(lambda o: np.asarray(o) * rho, [lam], dist, orders_hat=[lh])[0]
    assert math.isclose(generic, selection_rdp_zcdp(rho, dist, [lam])[0], rel_tol=1e-12)
    # Poisson, mu = 5, rho = 0.02, lambda = 3: eps_hat = log 1.5, delta_hat from CKS Prop. 12
    e_hat = math.log(1.5)
    d_hat = zcdp_delta(rho, e_hat)
    from dpnewton.privacy.conversions import rho_to_epsilon
    assert math.isclose(rho_to_epsilon(rho, d_hat, "cks"), e_hat, rel_tol=1e-9)
    hand = 3 * rho + 5 * d_hat + math.log(5) / 2
    assert math.isclose(selection_rdp_zcdp(rho, PoissonCount(5.0), [3.0])[0], hand, rel_tol=1e-13)


def test_agrees_with_dp_accounting_repeat_and_select():
    """dp-accounting's RDP accountant implements the same theorems on its order grid: ours (continuous
    orders) is never looser than it by more than rounding, and within 1 %."""
    import dp_accounting
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    orders = list(1 + np.geomspace(1e-3, 1e4, 400))
    for rho in (0.001, 0.05, 0.5):
        z = 1 / math.sqrt(2 * rho)
        for dist, shape in [(tnb_with_mean(1.0, 10.0), 1.0), (tnb_with_mean(0.0, 5.0), 0.0),
                            (tnb_with_mean(2.0, 30.0), 2.0), (PoissonCount(10.0), math.inf)]:
            acc = RdpAccountant(orders)
            acc.compose(dp_event.RepeatAndSelectDpEvent(dp_accounting.GaussianDpEvent(z), dist.mean, shape))
            theirs = acc.get_epsilon(1e-6)
            ours, _ = selection_epsilon(rho, dist, 1e-6)
            assert ours <= theirs * (1 + 1e-6), (rho, dist, ours, theirs)
            assert ours >= theirs * 0.99, (rho, dist, ours, theirs)


def test_rdp_to_epsilon_matches_dp_accounting():
    from dp_accounting.rdp import compute_epsilon

    orders = np.array([1.5, 2.0, 4.0, 16.0, 64.0])
    rdp = np.array([0.01, 0.02, 0.05, 0.3, 2.0])
    eps, _ = compute_epsilon(orders, rdp, 1e-5)
    assert math.isclose(float(np.min(rdp_to_epsilon_terms(orders, rdp, 1e-5))), eps, rel_tol=1e-12)


# ---------------------------------------------------------------------------------------------
# calibration
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dist", [tnb_with_mean(1.0, 10.0), tnb_with_mean(0.0, 10.0), tnb_with_mean(-0.5, 3.0),
                                  PoissonCount(10.0)], ids=repr)
@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-6), (0.1, 1e-5), (8.0, 1e-8)])
def test_calibration_meets_target(dist, epsilon, delta):
    rec = calibrate_candidate_rho(epsilon, delta, dist)
    assert rec.epsilon <= epsilon
    assert rec.epsilon >= epsilon - 1e-6
    eps, order = selection_epsilon(rec.candidate_rho, dist, delta)
    assert eps == rec.epsilon and order == rec.order
    # a slightly larger rho would exceed the target
    assert selection_epsilon(rec.candidate_rho * (1 + 1e-6), dist, delta)[0] > epsilon
    d = rec.as_dict()
    assert d["distribution"] == dist.name and d["expected_k"] == dist.mean and "Theorem" in d["theorem"]


@pytest.mark.parametrize("family", ["geometric", "logarithmic", "poisson"])
def test_more_candidates_smaller_rho(family):
    rhos = [calibrate_candidate_rho(1.0, 1e-6, make_distribution(family, mean=m)).candidate_rho
            for m in (2.0, 5.0, 10.0, 50.0)]
    assert all(a > b for a, b in zip(rhos, rhos[1:])), rhos


# ---------------------------------------------------------------------------------------------
# sampling K
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dist", [TruncatedNegativeBinomialCount(1.0, 0.2), TruncatedNegativeBinomialCount(0.0, 0.1),
                                  TruncatedNegativeBinomialCount(-0.5, 0.3), TruncatedNegativeBinomialCount(2.0, 0.4),
                                  PoissonCount(3.0)], ids=repr)
def test_sampling_follows_the_pmf(dist):
    rng = np.random.default_rng(7)
    draws = np.array([dist.sample(rng) for _ in range(20000)])
    assert abs(draws.mean() - dist.mean) < 5 * math.sqrt(np.var(draws) / draws.size) + 1e-9
    for k in range(0, 4):
        pk = float(dist.pmf(k)[0]) if isinstance(dist, TruncatedNegativeBinomialCount) else float(dist.pmf(k))
        freq = float(np.mean(draws == k))
        assert abs(freq - pk) < 5 * math.sqrt(pk * (1 - pk) / draws.size) + 1e-9, (k, freq, pk)
    # same Generator state, same draws
    a = [dist.sample(np.random.default_rng(3)) for _ in range(3)]
    assert len(set(a)) == 1


# ---------------------------------------------------------------------------------------------
# dpnewton.tuning.private_select on a tiny problem
# ---------------------------------------------------------------------------------------------
from dpnewton.tuning import DEFAULT_SCORE_CLIP, expand_grid, private_select  # noqa: E402

GRID = {"iterations": [2, 5, 10], "hyper": {"step": [1.0, 4.0]}}


@pytest.mark.parametrize("distribution", [("geometric", {"mean": 4.0}), ("poisson", {"mu": 3.0}),
                                          ("tnb", {"eta": 0.5, "gamma": 0.3})])
def test_private_select_ledger_and_argmin(toy_problem, distribution):
    out = private_select(toy_problem, "dp-gd", GRID, epsilon=1.0, delta=1e-5, distribution=distribution, seed=3)
    rec = out.record
    acc = rec.accounting
    k = rec.realised_k
    assert len(rec.ledgers) == len(rec.candidates) == k
    assert math.isclose(rec.ledger_rho_total, k * acc.candidate_rho, rel_tol=1e-9)
    assert acc.epsilon <= 1.0 and acc.epsilon >= 1.0 - 1e-6
    for led in rec.ledgers:  # optimizer (1 - score_frac) rho + score score_frac rho
        assert math.isclose(led.spent_rho, acc.candidate_rho, rel_tol=1e-9)
        assert math.isclose(led.rho_by_quantity()["selection score"], 0.1 * acc.candidate_rho, rel_tol=1e-12)
        score_entry = [e for e in led.entries if e.quantity == "selection score"][0]
        assert math.isclose(score_entry.sensitivity, DEFAULT_SCORE_CLIP / toy_problem.n)
    pub = rec.public()
    assert pub["distribution"] in ("tnb", "poisson") and "realised_k" not in pub
    assert rec.secret()["realised_k"] == k
    if k == 0:
        assert out.config is None and math.isnan(out.score) and not np.any(out.w)
        return
    scores = [c["score"] for c in rec.candidates]
    assert rec.selected == int(np.argmin(scores))
    assert out.score == min(scores)
    chosen = rec.candidates[rec.selected]
    assert out.config == (chosen["iterations"], chosen["hyper"])
    assert out.config in expand_grid(GRID)


def test_private_select_seeding_and_data_independence(toy_problem):
    """Integer seed: replayable; K, configurations and candidate seeds are drawn before the data is
    touched, so they are the same on another dataset of the same name and shape; seed None differs."""
    from conftest import make_problem

    dist = ("geometric", {"mean": 5.0})
    a = private_select(toy_problem, "dp-gd", GRID, 1.0, 1e-5, dist, seed=11, dataset="toy")
    b = private_select(toy_problem, "dp-gd", GRID, 1.0, 1e-5, dist, seed=11, dataset="toy")
    other = make_problem(n=toy_problem.n, d=toy_problem.d, seed=5)
    c = private_select(other, "dp-gd", GRID, 1.0, 1e-5, dist, seed=11, dataset="toy")
    assert a.record.candidates == b.record.candidates and np.array_equal(a.w, b.w)
    strip = lambda r: [(x["iterations"], x["hyper"], x["seed"]) for x in r.record.candidates]  # noqa: E731
    assert strip(a) == strip(c) and a.record.realised_k == c.record.realised_k
    assert [x["score"] for x in a.record.candidates] != [x["score"] for x in c.record.candidates]
    fresh = [private_select(toy_problem, "dp-gd", GRID, 1.0, 1e-5, dist, seed=None) for _ in range(3)]
    assert all(r.record.seed is None and all(x["seed"] is None for x in r.record.candidates) for r in fresh)
    assert len({tuple(x["score"] for x in r.record.candidates) for r in fresh}) == 3


def test_private_select_k_distribution_follows_theorem(toy_problem, monkeypatch):
    """K comes from the distribution's sample() with the selection Generator, called once."""
    from dpnewton.privacy import selection

    calls = []
    orig = selection.TruncatedNegativeBinomialCount.sample

    def spy(self, rng):
        calls.append(1)
        return orig(self, rng)

    monkeypatch.setattr(selection.TruncatedNegativeBinomialCount, "sample", spy)
    private_select(toy_problem, "dp-gd", GRID, 1.0, 1e-5, ("geometric", {"mean": 2.0}), seed=1)
    assert calls == [1]


def test_private_select_refuses_unsupported(toy_problem):
    for method in ("dp-sgd", "aop", "objpert", "minibatch-hess-clip"):
        with pytest.raises(ValueError, match="calibrated to \\(epsilon, delta\\)"):
            private_select(toy_problem, method, GRID, 1.0, 1e-5, seed=0)
    for method in ("dp-gd-oracle", "damped-newton"):
        with pytest.raises(ValueError, match="non-private part"):
            private_select(toy_problem, method, GRID, 1.0, 1e-5, seed=0)
    with pytest.raises(ValueError, match="score_frac"):
        private_select(toy_problem, "dp-gd", GRID, 1.0, 1e-5, seed=0, score_frac=1.0)
    with pytest.raises(ValueError, match="grid"):
        private_select(toy_problem, "dp-gd", [], 1.0, 1e-5, seed=0)


def test_private_select_newton_method(toy_problem):
    out = private_select(toy_problem, "hess-clip", {"iterations": [1, 3]}, 2.0, 1e-5,
                         ("poisson", {"mu": 2.0}), seed=4)
    rec = out.record
    assert math.isclose(rec.ledger_rho_total, rec.realised_k * rec.accounting.candidate_rho, rel_tol=1e-9)


def test_expand_grid():
    g = expand_grid({"iterations": [3, 1], "hyper": {"a": [1, 2], "b": "x"}})
    assert g == ((3, {"a": 1, "b": "x"}), (3, {"a": 2, "b": "x"}), (1, {"a": 1, "b": "x"}), (1, {"a": 2, "b": "x"}))
    assert expand_grid([{"iterations": 4}]) == ((4, {}),)
    with pytest.raises(ValueError, match="iterations"):
        expand_grid([{"iterations": 0}])


def test_record_dp_event_meets_target_with_dp_accounting():
    """The calibrated record's dp-accounting event, on dp-accounting's RDP accountant, lands within
    1 % above the target (its coarser order grid) and never below our epsilon."""
    from dp_accounting.rdp import RdpAccountant

    orders = list(1 + np.geomspace(1e-3, 1e4, 400))
    for dist in (tnb_with_mean(1.0, 10.0), tnb_with_mean(0.0, 5.0), PoissonCount(8.0)):
        rec = calibrate_candidate_rho(1.0, 1e-6, dist)
        acc = RdpAccountant(orders)
        acc.compose(rec.dp_event())
        eps = acc.get_epsilon(1e-6)
        assert rec.epsilon * (1 - 1e-6) <= eps <= 1.01
    import dp_accounting
    assert isinstance(calibrate_candidate_rho(1.0, 1e-6, tnb_with_mean(-0.5, 3.0)).dp_event(),
                      dp_accounting.UnsupportedDpEvent)
