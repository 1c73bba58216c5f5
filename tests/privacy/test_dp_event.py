"""PrivacyLedger.dp_event(): every run's releases as a dp_accounting DpEvent, audited by
dp-accounting's own RDP and PLD accountants against the run's target (epsilon, delta)."""

import dataclasses
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpnewton.algorithms import ALGORITHMS
from dpnewton.experiment import run_algorithm
from dpnewton.privacy import (ObjectivePerturbationEvent, PrivacyLedger, SubsampledGaussianEvent,
                              official_fsolve_failed)
from dpnewton.privacy import accountant as acc
from dpnewton.privacy.conversions import _cks_optimal_order
from dpnewton.privacy.neighbouring import paper_delta
from tests.conftest import make_problem

# Closed-form RDP of Gaussian events: any grid is cheap, so a wide and dense one.
WIDE_ORDERS = [float(o) for o in np.concatenate([np.linspace(1.01, 20.0, 400), np.arange(21.0, 300.0),
                                                 np.geomspace(300.0, 1e6, 200)])]
# Subsampled events: dp_accounting evaluates integer orders by a Python loop over alpha terms, so
# the calibration's own grid up to 256 (the optimal orders of the runs below lie inside it).
SUBSAMPLED_ORDERS = [float(o) for o in acc.DEFAULT_ORDERS if o <= 256]
# Algorithms whose privacy is not a composition of (subsampled) Gaussian releases
# ((epsilon, delta)-DP by their own analyses [Iyengar et al. 2019; Redberg et al. 2023]).
NOT_GAUSSIAN = {"aop", "objpert"}
# (target epsilon, conversion): small and large budgets, every conversion; official-fsolve fails at 0.05.
CASES = [(0.1, "bs16"), (1.0, "cks"), (1.0, "gdp"), (0.5, "paper"), (0.05, "official-fsolve"),
         (1.0, "official-fsolve")]
PLD_MAX_RELEASES = 300  # PLD composes release by release; cubic Newton's ~1500 take ~5 s
N, D, T = 300, 4, 3


@pytest.fixture(scope="module")
def small_problem():
    return make_problem(N, D)


def _rdp_epsilon(event, delta, orders):
    a = RdpAccountant(orders)
    a.compose(event)
    return a.get_epsilon(delta)


def _pld_epsilon(event, delta):
    a = PLDAccountant()
    a.compose(event)
    return a.get_epsilon(delta)


def _is_subsampled(ledger):
    return not ledger.entries and any("accountant" in e for e in ledger.events)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("epsilon,conversion", CASES)
def test_accountants_on_dp_event_meet_target(small_problem, algorithm, epsilon, conversion):
    (res,) = run_algorithm(small_problem, "toy", algorithm, epsilon, [0], [T], conversion=conversion)
    ledger, delta = res.ledger, paper_delta(N)
    event = ledger.dp_event(ignore_nonprivate=True)
    assert isinstance(event, dp_accounting.ComposedDpEvent)
    if algorithm in NOT_GAUSSIAN:
        assert not RdpAccountant().supports(event) and not PLDAccountant().supports(event)
        assert any(isinstance(e, dp_accounting.UnsupportedDpEvent) for e in event.events)
        return
    assert RdpAccountant().supports(event)
    if ledger.nonprivate:  # the whole run: dp-accounting's NonPrivateDpEvent, epsilon = inf
        assert _rdp_epsilon(ledger.dp_event(), delta, [2.0, 8.0]) == math.inf
    else:
        assert ledger.dp_event() == event
    subsampled = _is_subsampled(ledger)
    if subsampled:  # calibrated to (epsilon, delta) directly: the conversion plays no part
        eps_rdp = _rdp_epsilon(event, delta, SUBSAMPLED_ORDERS)
        assert eps_rdp <= epsilon * (1 + 1e-9)  # dp_accounting's integer-order sums vs ours: rounding
        assert eps_rdp == pytest.approx(epsilon, rel=1e-2)  # and not far below: the calibration is tight
    else:
        assert len(ledger.entries) >= T
        assert math.isclose(math.fsum(1 / (2 * (e.sigma / e.sensitivity) ** 2) for e in ledger.entries),
                            ledger.budget_rho, rel_tol=1e-9)  # the events carry exactly the run's rho
        eps_rdp = _rdp_epsilon(event, delta, WIDE_ORDERS)
        failed = conversion == "official-fsolve" and official_fsolve_failed(epsilon, delta)
        if failed:  # rho = 1e-3 whatever epsilon: the run really spends ~3 times its target
            assert ledger.budget_rho == 1e-3
            assert eps_rdp > 2 * epsilon
        elif conversion == "cks":
            # RDP of a Gaussian composition is alpha rho and compute_epsilon is the CKS bound, so the
            # accountant equals the cks conversion at its optimal order; a grid can only miss it
            assert eps_rdp <= epsilon * (1 + 1e-8)
            orders = WIDE_ORDERS + [_cks_optimal_order(ledger.spent_rho, delta)]
            assert _rdp_epsilon(event, delta, orders) <= epsilon * (1 + 1e-12)
        elif conversion == "gdp":
            # gdp is exact for Gaussian compositions; RDP -> (epsilon, delta) is not: RDP overstates
            assert eps_rdp > epsilon
        else:  # bs16, paper and official-fsolve where it does not fail (= bs16) are looser than CKS
            assert eps_rdp <= epsilon
    if subsampled or len(ledger.entries) <= PLD_MAX_RELEASES:
        eps_pld = _pld_epsilon(event, delta)
        if conversion == "official-fsolve" and not subsampled and official_fsolve_failed(epsilon, delta):
            assert eps_pld > 2 * epsilon
        elif conversion == "gdp" and not subsampled:
            # exact target; the PLD accountant is pessimistic by its discretisation only
            assert eps_pld == pytest.approx(epsilon, rel=1e-5)
        else:
            assert eps_pld <= epsilon


# ------------------------------------------------------------------------------------------------
# Known answers
# ------------------------------------------------------------------------------------------------
def test_single_gaussian_equals_dp_accounting():
    delta, rho = 1e-6, 0.05
    ledger = PrivacyLedger(rho)
    sigma = ledger.charge(0, "gradient", 0.01, rho)
    z = sigma / 0.01
    assert z == pytest.approx(1 / math.sqrt(2 * rho), rel=1e-15)
    event = ledger.dp_event()
    assert event == dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(z)])
    ours = RdpAccountant(WIDE_ORDERS)
    ours.compose(event)
    ref = RdpAccountant(WIDE_ORDERS)
    ref.compose(dp_accounting.GaussianDpEvent(z))
    assert np.array_equal(ours.rdp, ref.rdp)
    np.testing.assert_allclose(ours.rdp, np.asarray(WIDE_ORDERS) * rho, rtol=1e-14)  # alpha/(2 z^2)
    assert ours.get_epsilon(delta) == ref.get_epsilon(delta)


def test_equal_releases_compose_like_one_with_z_over_sqrt_T():
    delta, rho, steps, sens = 1e-5, 0.2, 7, 1 / 300
    ledger = PrivacyLedger(rho)
    for t in range(steps):
        ledger.charge(t, "gradient", sens, rho / steps)
    z_step = ledger.entries[0].sigma / sens
    event = ledger.dp_event()
    assert len(event.events) == steps
    assert all(e == dp_accounting.GaussianDpEvent(z_step) for e in event.events)
    one = dp_accounting.GaussianDpEvent(z_step / math.sqrt(steps))
    for orders in (WIDE_ORDERS, None):
        composed = _rdp_epsilon(event, delta, orders)
        assert composed == pytest.approx(_rdp_epsilon(one, delta, orders), rel=1e-12)
    assert _pld_epsilon(event, delta) == pytest.approx(_pld_epsilon(one, delta), rel=1e-3)
    assert one.noise_multiplier == pytest.approx(1 / math.sqrt(2 * rho), rel=1e-14)


def test_zero_sensitivity_release_is_a_no_op():
    ledger = PrivacyLedger(1.0)
    ledger.charge(0, "nothing", 0.0, 0.5)
    assert ledger.dp_event().events == [dp_accounting.NoOpDpEvent()]


def test_subsampled_event_structure(small_problem):
    epsilon, delta = 1.0, paper_delta(N)
    (res,) = run_algorithm(small_problem, "toy", "minibatch-hess-clip", epsilon, [0], [T])
    (cal,) = res.ledger.events
    (event,) = res.ledger.dp_event().events
    step = dp_accounting.ComposedDpEvent([
        dp_accounting.PoissonSampledDpEvent(cal["q_grad"], dp_accounting.GaussianDpEvent(cal["noise_multiplier_grad"])),
        dp_accounting.PoissonSampledDpEvent(cal["q_dir"], dp_accounting.GaussianDpEvent(cal["noise_multiplier_dir"]))])
    assert event == dp_accounting.SelfComposedDpEvent(step, T)
    assert (cal["noise_multiplier_grad"], cal["noise_multiplier_dir"]) == res.diagnostics["noise_multipliers"]
    # the accountant's own epsilon of the recorded calibration
    assert acc.accountant_epsilon((cal["q_grad"], cal["q_dir"]), res.diagnostics["noise_multipliers"], T,
                                  delta) == cal["accountant_epsilon"]


def test_hand_fixed_multiplier_is_non_private(small_problem):
    (res,) = run_algorithm(small_problem, "toy", "dp-sgd", 1.0, [0], [T], hyper={"noise_multiplier": 2.0})
    event = res.ledger.dp_event()
    assert event.events == [dp_accounting.NonPrivateDpEvent()]
    assert _rdp_epsilon(event, 1e-5, [2.0, 8.0]) == math.inf
    assert res.ledger.dp_event(ignore_nonprivate=True).events == []



def test_typed_events_and_their_dict_view(small_problem):
    for name, kind in (("minibatch-hess-clip", SubsampledGaussianEvent), ("dp-sgd", SubsampledGaussianEvent),
                       ("aop", ObjectivePerturbationEvent)):
        (res,) = run_algorithm(small_problem, "toy", name, 0.5, [0], [T])
        (typed,) = res.ledger.accounting_events
        assert isinstance(typed, kind)
        with pytest.raises(dataclasses.FrozenInstanceError):
            typed.delta = 0.5
        assert res.ledger.events == [typed.as_dict()]
        # a ledger holding the dict view (an untyped record) gives the same DpEvent
        untyped = PrivacyLedger(res.ledger.budget_rho)
        untyped.charge_event(typed.as_dict())
        assert untyped.events == res.ledger.events
        assert untyped.dp_event() == res.ledger.dp_event()
    (res,) = run_algorithm(small_problem, "toy", "minibatch-hess-clip", 0.5, [0], [T], hyper={"grad_frac": 0.6})
    view = res.ledger.events[0]
    assert list(view)[-1] == "grad_frac" and view["grad_frac"] == 0.6
    assert list(view)[:9] == ["mechanism", "accountant", "orders", "steps", "target_epsilon", "delta",
                              "accountant_epsilon", "optimal_order", "order_at_grid_edge"]
