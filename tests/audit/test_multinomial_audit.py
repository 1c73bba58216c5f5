"""Black-box audit of the private softmax fit for K > 2 classes (dpnewton.audit.multinomial): the statistic
reads the fit's canary direction with the known shift, a correct fit stays within its claim and a broken
variant is caught (800 pilot and 800 evaluation fits per side). The full-size run (5,000 + 5,000 fits per
side, every variant, both methods) is
``python -m dpnewton.audit.multinomial --out benchmarks/results/multinomial_audit.csv``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpnewton.audit.multinomial import (CONVERSION, attained_fraction, audit_multinomial, fit_statistics,
                                        multinomial_pair, releases_mu, softmax_statistic,
                                        variant_factor)
from dpnewton.multinomial import GRADIENT_SENSITIVITY, fit_multinomial
from dpnewton.privacy.conversions import epsilon_to_rho, rho_to_epsilon


def test_pair_adds_one_canary_row_of_the_last_class():
    (ZD, yD), (ZP, yP) = multinomial_pair(n=7, d=2, K=3)
    assert np.array_equal(ZP[:7], ZD) and np.array_equal(yP[:7], yD) and not ZD.any()
    assert ZP[-1].tolist() == [1.0, 0.0] and yP[-1] == 2 and set(yD.tolist()) == {0, 1, 2}


def test_attained_fraction_is_the_canary_gradient_at_the_uniform_softmax():
    for K in (3, 5):
        s = np.full(K, 1.0 / K)
        s[-1] -= 1.0
        assert attained_fraction(K) == pytest.approx(np.linalg.norm(s) / GRADIENT_SENSITIVITY, rel=1e-12)


def test_statistic_shift_is_the_canary_gradient_step():
    """With the noise cut 100-fold, the statistic on D' is 2 (K - 1)/(K (n + 1)) (one DP-GD step of size 2
    from W = 0 along the canary's gradient, over the released count) and 0 on D, up to the noise."""
    K, n = 3, 50
    expected = 2.0 * (K - 1) / (K * (n + 1))
    delta = 1.0 / n**2
    spent = rho_to_epsilon(epsilon_to_rho(3.0, delta, CONVERSION) * 1e4, delta, CONVERSION)
    (ZD, yD), (ZP, yP) = multinomial_pair(n, 2, K)
    stats = [np.mean([softmax_statistic(fit_multinomial(Z, y, K, spent, delta, np.random.default_rng(i),
                                                        method="gd", iterations=1, conversion=CONVERSION)[0], K)
                      for i in range(20)]) for Z, y in ((ZD, yD), (ZP, yP))]
    assert abs(stats[0]) < 0.05 * expected and stats[1] == pytest.approx(expected, rel=0.05)


def test_variant_scales_every_noise_by_its_factor():
    """A variant is the production fit at the budget rho/c^2: every ledger sigma is c times the correct one."""
    (Z, y), _ = multinomial_pair()
    delta = 1.0 / 50**2
    rho = epsilon_to_rho(3.0, delta, CONVERSION)
    sigmas = {}
    for variant in ("none", "wrong-sensitivity"):
        spent = rho_to_epsilon(rho / variant_factor(variant, 3) ** 2, delta, CONVERSION)
        ledger = fit_multinomial(Z, y, 3, spent, delta, np.random.default_rng(0), method="gd", iterations=1,
                                 conversion=CONVERSION)[1]
        sigmas[variant] = np.array([e.sigma for e in ledger.entries])
    np.testing.assert_allclose(sigmas["wrong-sensitivity"], 0.25 * sigmas["none"], rtol=1e-9)
    assert variant_factor("per-class-noise", 4) == pytest.approx(0.5)


@pytest.mark.parametrize("method", ["gd", "bohning"])
def test_releases_mu_is_the_ledgers_shift_over_sigma(method):
    """mu_releases from the ledger of a fit on D': the count, Gram and gradient shifts (1, 1, f sqrt(2))
    over the sigmas the ledger charged, composed as sqrt(sum mu_i^2)."""
    _, (Z, y) = multinomial_pair()
    delta = 1.0 / 50**2
    ledger = fit_multinomial(Z, y, 3, 3.0, delta, np.random.default_rng(0), method=method, iterations=1,
                             conversion=CONVERSION)[1]
    shift = {"count": 1.0, "gram": 1.0, "gradient": attained_fraction(3) * GRADIENT_SENSITIVITY}
    mu = math.sqrt(sum((shift[e.quantity] / e.sigma) ** 2 for e in ledger.entries))
    rho = epsilon_to_rho(3.0, delta, CONVERSION)
    assert releases_mu(rho, 3, method) == pytest.approx(mu, rel=1e-9)
    assert releases_mu(rho, 3, method, 0.25) == pytest.approx(4 * mu, rel=1e-9)
    assert mu < math.sqrt(2 * rho)                     # the canary attains less than the claim: room for the test


def test_fits_are_replayable_and_sides_differ():
    a, b = fit_statistics(1, 5, first_seed=3), fit_statistics(1, 5, first_seed=3)
    assert np.array_equal(a, b) and not np.array_equal(a, fit_statistics(0, 5, first_seed=3))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gd", "bohning"])
def test_correct_fit_stays_within_its_claim(method):
    out = audit_multinomial("none", trials=800, pilot=800, seed=0, method=method)
    assert out.epsilon_lb <= out.claimed_epsilon and out.mu_lb <= out.mu_claimed and not out.violates_claim
    # the test has power: gd's statistic is the Gaussian shift of the gradient release; the Böhning step's
    # preconditioner (the inverse of a noisy Gram matrix) spreads it, so less of the signal is seen
    assert out.mu_lb > {"gd": 0.5, "bohning": 0.25}[method] * out.mu_releases


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gd", "bohning"])
def test_wrong_sensitivity_is_caught(method):
    out = audit_multinomial("wrong-sensitivity", trials=800, pilot=800, seed=0, method=method)
    assert out.mu_lb > out.mu_claimed and out.violates_claim
    assert out.epsilon_lb_gdp > out.claimed_epsilon


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant='quarter'"):
        variant_factor("quarter", 3)
    with pytest.raises(ValueError, match="K >= 3"):
        multinomial_pair(K=2)
    assert math.isclose(variant_factor("tenth-noise", 3), 0.1)
