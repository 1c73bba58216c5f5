"""epsilon <-> rho conversions: known answers, orderings, monotonicity and round trips."""

import math

import numpy as np
import pytest
from scipy import stats

from dpnewton.privacy import (CONVERSIONS, epsilon_to_rho, official_fsolve_failed,
                              rho_to_epsilon)
from dpnewton.privacy.neighbouring import paper_delta

# CKS known answers: OpenDP's unit test value and the table of docs/algorithms.md §6.4.
CKS_KATS = [(1 / 32, 1e-3, 0.6880024554878086), (0.025, 1e-6, 1.014074), (0.5, 1e-5, 4.728387),
            (0.005, 1e-6, 0.429941), (2.0, 1e-6, 11.688596)]


@pytest.mark.parametrize("rho,delta,eps", CKS_KATS)
def test_cks_known_answers(rho, delta, eps):
    tol = 1e-12 if eps == 0.6880024554878086 else 2e-6  # table values have 7 significant digits
    assert rho_to_epsilon(rho, delta, "cks") == pytest.approx(eps, rel=tol)


def test_cks_inverse_known_answers():
    # docs/algorithms.md §6.4: rho granted at delta = 1e-6
    assert epsilon_to_rho(0.01, 1e-6, "cks") == pytest.approx(4.359e-06, rel=1e-3)
    assert epsilon_to_rho(1.0, 1e-6, "cks") == pytest.approx(2.436e-02, rel=1e-3)
    assert epsilon_to_rho(0.01, 1e-6, "bs16") == pytest.approx(3.105e-06, rel=1e-3)
    assert epsilon_to_rho(10.0, 1e-6, "bs16") == pytest.approx(1.303, rel=1e-3)


# docs/algorithms.md §6.4: (exact root of the code's formula, paper closed form) for a1a.t, n = 30956.
A1A_TABLE = {0.01: (1.710e-6, 1.208e-6), 0.1: (1.480e-4, 1.203e-4), 1.0: (1.2775e-2, 1.1531e-2),
             10.0: (0.96179, 0.81485)}


@pytest.mark.parametrize("eps", sorted(A1A_TABLE))
def test_bs16_and_paper_match_spec_table(eps):
    delta = paper_delta(30956)
    bs16, paper = A1A_TABLE[eps]
    assert epsilon_to_rho(eps, delta, "bs16") == pytest.approx(bs16, rel=2e-3)
    assert epsilon_to_rho(eps, delta, "paper") == pytest.approx(paper, rel=2e-3)


def test_paper_closed_form():
    eps, delta = 0.5, 1e-6
    assert epsilon_to_rho(eps, delta, "paper") == eps**2 / (4 * math.log(1 / delta) + 4 * eps)


def test_official_fsolve_bug_reproduced():
    delta = paper_delta(30956)
    for eps in (0.01, 0.1):
        assert epsilon_to_rho(eps, delta, "official-fsolve") == 1e-3
        assert official_fsolve_failed(eps, delta)
    # where fsolve converges it equals the exact root
    assert epsilon_to_rho(1.0, delta, "official-fsolve") == pytest.approx(
        epsilon_to_rho(1.0, delta, "bs16"), rel=1e-8)
    assert not official_fsolve_failed(1.0, delta)
    # rho = 1e-3 really costs about epsilon 0.27 (docs/algorithms.md §6.3)
    assert 0.24 < rho_to_epsilon(1e-3, delta, "bs16") < 0.29


def test_gdp_matches_gaussian_formula():
    """mu-GDP delta(eps) evaluated independently with scipy.stats.norm."""
    rho, delta = 0.1, 1e-5
    eps = rho_to_epsilon(rho, delta, "gdp")
    mu = math.sqrt(2 * rho)
    d = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert d == pytest.approx(delta, rel=1e-8)


@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_ordering_tight_conversions_grant_more(delta):
    for eps in (0.01, 0.1, 1.0, 10.0):
        r = {c: epsilon_to_rho(eps, delta, c) for c in ("paper", "bs16", "cks", "gdp")}
        assert r["paper"] < r["cks"] <= r["gdp"] * (1 + 1e-12)
        assert r["bs16"] < r["cks"]


@pytest.mark.parametrize("conversion", ["paper", "bs16", "cks", "gdp"])
def test_round_trip_and_monotone(conversion):
    delta = 1e-8
    eps_grid = np.logspace(-2.5, 1.3, 15)
    rhos = [epsilon_to_rho(e, delta, conversion) for e in eps_grid]
    assert all(a < b for a, b in zip(rhos, rhos[1:]))
    for e, r in zip(eps_grid, rhos):
        back = rho_to_epsilon(r, delta, conversion)
        assert back == pytest.approx(e, rel=1e-9)
        assert back <= e * (1 + 1e-12)  # never claims less epsilon than spent
    # larger delta grants more rho
    assert epsilon_to_rho(1.0, 1e-4, conversion) > epsilon_to_rho(1.0, 1e-8, conversion)


@pytest.mark.parametrize("kwargs,match", [
    ({"epsilon": 0.0, "delta": 1e-5}, "epsilon=0.0"),
    ({"epsilon": -1.0, "delta": 1e-5}, "epsilon=-1.0"),
    ({"epsilon": float("nan"), "delta": 1e-5}, "epsilon=nan"),
    ({"epsilon": 1.0, "delta": 0.0}, "delta=0.0"),
    ({"epsilon": 1.0, "delta": 1.0}, "delta=1.0"),
    ({"epsilon": 1.0, "delta": 1e-5, "conversion": "fancy"}, "conversion='fancy'"),
])
def test_bad_arguments_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        epsilon_to_rho(**kwargs)


def test_all_conversions_listed():
    assert set(CONVERSIONS) == {"paper", "bs16", "cks", "gdp", "official-fsolve"}


@pytest.mark.parametrize("conversion", ["paper", "bs16", "cks", "gdp", "official-fsolve"])
def test_every_conversion_answers_or_refuses_at_extreme_inputs(conversion):
    """Never a hang or an OverflowError: a positive finite rho, or a ValueError naming the request."""
    import signal

    def expire(signum, frame):
        raise TimeoutError("conversion still running after 10 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        for eps in (5e-324, 1e-300, 1e-12, 0.01, 1.0, 50.0, 1e300):
            for delta in (1e-300, 1e-5, 0.5, 0.99):
                try:
                    rho = epsilon_to_rho(eps, delta, conversion)
                except ValueError as exc:
                    assert f"epsilon={eps!r}, delta={delta!r}, conversion={conversion!r}" in str(exc)
                else:
                    assert np.isfinite(rho) and rho > 0, (eps, delta, rho)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("delta", [1e-5, 0.5])
def test_bs16_floor_is_the_smallest_representable_epsilon(delta):
    floor = delta**2 / np.pi
    with pytest.raises(ValueError, match=r"below .* = delta\^2/pi.*use epsilon >= .*'cks' or 'gdp'"):
        epsilon_to_rho(floor * (1 - 1e-9), delta, "bs16")
    assert epsilon_to_rho(floor, delta, "bs16") == floor
    rho = epsilon_to_rho(floor * 1.01, delta, "bs16")
    assert floor <= rho and rho_to_epsilon(rho, delta, "bs16") <= floor * 1.01
    # the tight conversions represent every epsilon > 0
    assert epsilon_to_rho(floor * 1e-3, delta, "cks") > 0


@pytest.mark.parametrize("rho", [1e40, 1e200, 1e308])
def test_cks_epsilon_of_a_huge_rho_is_a_valid_bound(rho):
    """Past rho ~ 1e30 the optimal order is below 1 + 1e-15: the bound at that order is still valid
    (CKS Prop. 12 holds at every alpha > 1), at least rho and never below the exact GDP epsilon."""
    eps = rho_to_epsilon(rho, 1e-10, "cks")
    assert eps >= rho and eps <= rho_to_epsilon(rho, 1e-10, "bs16") * (1 + 1e-12) or eps == float("inf")
