"""The Gaussian-DP-shaped audit (dpnewton.audit.gdp): known answers on exact Gaussian mechanisms."""

import numpy as np
import pytest
from scipy import stats

from dpnewton.audit import audit_mechanism
from dpnewton.audit.bounds import clopper_pearson_upper, gaussian_epsilon_at_delta
from dpnewton.audit.distinguisher import threshold_audit
from dpnewton.audit.gdp import gdp_audit, gdp_mu_lower_bound

DELTA = 4e-4


def _gaussian_trials(mu: float, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact mu-GDP mechanism: N(0, 1) on D, N(mu, 1) on D' (Dong-Roth-Su's G_mu is its trade-off)."""
    rng = np.random.default_rng([seed, 11])
    return rng.standard_normal(trials), mu + rng.standard_normal(trials)


def test_mu_bound_is_the_formula_on_clopper_pearson_rates():
    fp, fn, n = 400, 700, 5000
    fpr_u, fnr_u = clopper_pearson_upper(fp, n, 0.025), clopper_pearson_upper(fn, n, 0.025)
    expected = stats.norm.ppf(1 - fpr_u) - stats.norm.ppf(fnr_u)
    assert gdp_mu_lower_bound(fp, n, fn, n) == pytest.approx(expected, rel=1e-12)
    assert gdp_mu_lower_bound(fp, n, fn, n) == pytest.approx(gdp_mu_lower_bound(fn, n, fp, n))  # G_mu symmetric
    assert gdp_mu_lower_bound(fp + 50, n, fn, n) < gdp_mu_lower_bound(fp, n, fn, n)   # more errors, less mu
    assert gdp_mu_lower_bound(n // 2, n, n // 2, n) == 0.0       # a coin flip refutes nothing


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_bound_approaches_a_known_mu_from_below(mu):
    """Exact Gaussian mechanism, 20,000 trials per side, five seeds: mu_lb <= mu every time, within 15 % of it."""
    bounds = []
    for seed in range(5):
        neg, pos = _gaussian_trials(mu, 20_000, seed)
        out = gdp_audit(neg, pos, DELTA, rng=np.random.default_rng(seed))
        assert out.mu_lb <= mu
        assert out.epsilon_lb <= gaussian_epsilon_at_delta(mu, DELTA)
        bounds.append(out.mu_lb)
    assert min(bounds) > 0.85 * mu


def test_more_trials_bring_the_bound_closer():
    def mean_bound(trials):
        return np.mean([gdp_audit(*_gaussian_trials(1.0, trials, s), DELTA, rng=np.random.default_rng(s)).mu_lb
                        for s in range(5)])
    assert mean_bound(2_000) < mean_bound(40_000) <= 1.0


def test_confidence_holds_on_small_samples():
    """A 95 % bound: on 300 repetitions with 200 trials per side the bound exceeds the true mu in at most
    5 % of them (binomial 99.9 % quantile 25 of 300 allows for the test's own noise)."""
    over = sum(gdp_audit(*_gaussian_trials(1.0, 200, s), DELTA, rng=np.random.default_rng(s)).mu_lb > 1.0
               for s in range(300))
    assert over <= stats.binom.ppf(0.999, 300, 0.05)


def test_tighter_than_tail_counting_at_the_same_trials():
    """At mu = 1 (epsilon 3.42 at delta 4e-4), 10,000 trials per side: the GDP bound's epsilon is about 1.5x
    the tail-counting bound's, both from the same trials and the same halves."""
    gdp, tail = [], []
    for seed in range(5):
        neg, pos = _gaussian_trials(1.0, 10_000, seed)
        gdp.append(gdp_audit(neg, pos, DELTA, rng=np.random.default_rng(seed)).epsilon_lb)
        tail.append(threshold_audit(neg, pos, DELTA, rng=np.random.default_rng(seed)).epsilon_lb)
    assert np.mean(gdp) > 1.3 * np.mean(tail)
    assert max(gdp) <= gaussian_epsilon_at_delta(1.0, DELTA)


def test_audit_rows_carry_the_gdp_bound_for_gaussian_mechanisms_only():
    rows = audit_mechanism("dp-gd", trials=2000, epsilon=3.0, broken="half-noise")
    [row] = rows
    assert row.mu_claimed == pytest.approx(np.sqrt(2 * row.rho))
    assert row.mu_audited_part == pytest.approx(row.mu_claimed)
    assert 0 < row.mu_lb and row.epsilon_lb_gdp == pytest.approx(gaussian_epsilon_at_delta(row.mu_lb, row.delta))
    # half the noise doubles mu: refuted by the GDP test at 2,000 trials per side
    assert row.violates_gdp_claim
    [objective] = [r for r in audit_mechanism("objpert", trials=200, epsilon=3.0) if r.level == "objective-release"]
    assert np.isnan(objective.mu_lb) and not objective.violates_gdp_claim   # not a Gaussian trade-off
