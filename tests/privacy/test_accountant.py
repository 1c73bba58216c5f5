"""Subsampled-Gaussian RDP accountant: calibration exactness and independent cross-checks."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

from dpnewton.privacy import accountant as acc

# Orders that dp_accounting evaluates quickly with its own (loop) implementation; calibrations
# below have their optimal order inside this subset, so the minimum over the full grid is attained here.
SUB_ORDERS = [float(o) for o in acc.DEFAULT_ORDERS if o <= 64]


def _dp_accounting_epsilon(mechanisms, steps, delta):
    event = dp_accounting.ComposedDpEvent(
        [dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)) for q, z in mechanisms])
    a = RdpAccountant(SUB_ORDERS)
    a.compose(event, steps)
    return a.get_epsilon(delta)


def test_calibration_hits_target_and_never_exceeds():
    for eps in (0.5, 2.0):
        cal = acc.calibrate_poisson_gaussian(0.2, 5, eps, 1e-5)
        assert cal.accountant_epsilon <= eps
        assert abs(cal.accountant_epsilon - eps) <= 1e-6 * eps
        again = acc.accountant_epsilon(cal.qs, cal.multipliers, 5, 1e-5)
        assert again == cal.accountant_epsilon


def test_multiplier_agrees_with_dp_accounting_calibration():
    q, T, eps, delta = 0.2, 5, 1.0, 1e-5
    cal = acc.calibrate_poisson_gaussian(q, T, eps, delta)
    assert 2 <= cal.optimal_order <= 64
    z = cal.multipliers[0]
    # the accountant called another way: dp_accounting's own RDP code end to end
    assert math.isclose(_dp_accounting_epsilon([(q, z)], T, delta), cal.accountant_epsilon, rel_tol=1e-9)
    z_ref = dp_accounting.calibrate_dp_mechanism(
        lambda: RdpAccountant(SUB_ORDERS),
        lambda s: dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), T),
        eps, delta, bracket_interval=dp_accounting.ExplicitBracketInterval(0.3, 10.0), tol=1e-9)
    assert math.isclose(z, z_ref, rel_tol=1e-6)


def test_two_mechanisms_share_scale_with_grad_frac_ratio():
    cal = acc.calibrate_two_mechanisms(0.25, 0.15, 4, 1.0, 1e-5, grad_frac=0.7)
    z_g, z_h = cal.multipliers
    assert math.isclose(z_h / z_g, math.sqrt(0.7 / 0.3), rel_tol=1e-12)
    assert cal.accountant_epsilon <= 1.0 and 1.0 - cal.accountant_epsilon <= 1e-6
    assert math.isclose(_dp_accounting_epsilon([(0.25, z_g), (0.15, z_h)], 4, 1e-5),
                        cal.accountant_epsilon, rel_tol=1e-9)
    event = acc.calibration_event(cal, "test", ("grad", "dir")).as_dict()
    for key in ("q_grad", "q_dir", "noise_multiplier_grad", "noise_multiplier_dir", "steps",
                "accountant_epsilon", "target_epsilon", "delta", "orders", "accountant"):
        assert key in event


def test_full_batch_limit_is_plain_gaussian():
    # q = 1: RDP alpha/(2 z^2) per step, i.e. rho = T/(2 z^2)-zCDP
    rdp = acc.poisson_gaussian_rdp(1.0, 2.0, [2.0, 10.0])
    np.testing.assert_allclose(rdp, [2.0 / 8.0, 10.0 / 8.0])


def test_integer_orders_match_dp_accounting():
    orders = [2.0, 3.0, 17.0, 200.0]
    a = RdpAccountant(orders)
    a.compose(dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.3)))
    np.testing.assert_allclose(acc.poisson_gaussian_rdp(0.05, 1.3, orders), a.rdp, rtol=1e-10)


def test_calibration_is_cached():
    a = acc.calibrate_poisson_gaussian(0.2, 5, 1.0, 1e-5)
    b = acc.calibrate_poisson_gaussian(0.2, 5, 1.0, 1e-5)
    assert a is b


@pytest.mark.parametrize("kwargs, name", [
    ({"q": 0.0}, "q"), ({"q": 1.5}, "q"), ({"steps": 0}, "steps"), ({"epsilon": -1.0}, "epsilon"),
    ({"delta": 1.0}, "delta")])
def test_bad_arguments_raise(kwargs, name):
    args = {"q": 0.1, "steps": 3, "epsilon": 1.0, "delta": 1e-5, **kwargs}
    with pytest.raises(ValueError, match=name):
        acc.calibrate_poisson_gaussian(args["q"], args["steps"], args["epsilon"], args["delta"])


def test_bad_grad_frac_and_multiplier_raise():
    with pytest.raises(ValueError, match="grad_frac"):
        acc.calibrate_two_mechanisms(0.1, 0.1, 3, 1.0, 1e-5, grad_frac=1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.accountant_epsilon([0.1], [0.0], 3, 1e-5)


def _full_grid_epsilon(mechanisms, steps, delta):
    rdp = np.zeros(len(acc.DEFAULT_ORDERS))
    for q, z in mechanisms:
        rdp = rdp + acc.poisson_gaussian_rdp(q, z)
    eps, order = compute_epsilon(list(acc.DEFAULT_ORDERS), list(steps * rdp), delta)
    return float(eps), float(order)


def test_pruned_fractional_orders_give_the_full_grid_minimum_exactly():
    # composed_epsilon skips fractional orders that provably cannot win; the result must be the
    # same bits (value and order) as dp_accounting's compute_epsilon over the whole grid.
    rng = np.random.default_rng(7)
    for k in range(24):
        q = float(10 ** rng.uniform(-3, 0))
        z = float(10 ** rng.uniform(-0.5, 1.5))
        steps = int(10 ** rng.uniform(0, 4))
        delta = float(10 ** rng.uniform(-12, -4))
        mech = [(q, z)] if k % 2 else [(q, z), (min(1.0, 2 * q), 1.3 * z)]
        assert acc.composed_epsilon(mech, steps, delta) == _full_grid_epsilon(mech, steps, delta), (mech, steps, delta)
    # a large-epsilon case whose optimum is a fractional order (so pruning must keep it)
    eps, order = acc.composed_epsilon([(0.5, 0.8)], 3, 1e-5)
    assert order != round(order) and (eps, order) == _full_grid_epsilon([(0.5, 0.8)], 3, 1e-5)


def test_fractional_rdp_lower_bounds_hold():
    orders = acc.DEFAULT_ORDERS
    is_int = np.abs(orders - np.round(orders)) < 1e-12
    for q, z in [(0.01, 0.7), (0.2, 1.5), (0.9, 4.0)]:
        rdp = acc.poisson_gaussian_rdp(q, z)
        lower = acc._fractional_rdp_lower(orders[~is_int], orders[is_int], rdp[is_int])
        assert np.all(lower <= rdp[~is_int] * (1 + 1e-12))
        assert np.mean(lower > 0.5 * rdp[~is_int]) > 0.75  # not vacuous (they are 0 below order 2)


def _full_grid_root(mechanism_weights, steps, epsilon, delta):
    """Brent's method on log c with every evaluation on the whole grid (the reference search)."""
    from scipy import optimize

    f = lambda lc: _full_grid_epsilon([(q, math.exp(lc) * w) for q, w in mechanism_weights], steps,  # noqa: E731
                                      delta)[0] - epsilon
    return optimize.brentq(f, -10.0, 10.0, xtol=1e-14, rtol=1e-13, maxiter=200)


@pytest.mark.parametrize("qs, weights, steps, epsilon, delta", [
    ((0.1, 0.1), (1.195, 1.826), 160, 1.0, 3.9e-7),     # optimal order 23
    ((0.1, 0.1), (1.195, 1.826), 640, 10.0, 3.9e-7),    # fractional optimal order 3.9
    ((0.1,), (1.0,), 40, 0.05, 1e-6),                   # optimal order in the geometric tail (> 256)
    ((0.0193,), (1.0,), 452, 4.32, 1e-9)])               # fractional optimal order 7.1
def test_root_searched_on_order_subsets_is_the_whole_grid_root(qs, weights, steps, epsilon, delta):
    cal = acc._calibrate.__wrapped__(qs, weights, steps, epsilon, delta)
    log_c = math.log(cal.multipliers[0] / weights[0])
    assert abs(log_c - _full_grid_root(list(zip(qs, weights)), steps, epsilon, delta)) <= 1e-12
    eps, order = _full_grid_epsilon(list(zip(qs, cal.multipliers)), steps, delta)
    assert (eps, order) == (cal.accountant_epsilon, cal.optimal_order)
    assert eps <= epsilon and epsilon - eps <= 1e-11 * epsilon


@pytest.mark.parametrize("window", [0, 1])
def test_root_is_the_whole_grid_root_when_the_window_has_to_move(monkeypatch, window):
    # a window of one or three orders rarely holds the whole grid's optimum at its root: the search
    # moves the window (or, after 8 moves, searches the whole grid) and still returns the whole grid's root
    monkeypatch.setattr(acc, "WINDOW", window)
    args = ((0.1, 0.1), (1.195, 1.826), 640, 10.0, 3.9e-7)
    cal = acc._calibrate.__wrapped__(*args)
    log_c = math.log(cal.multipliers[0] / 1.195)
    assert abs(log_c - _full_grid_root([(0.1, 1.195), (0.1, 1.826)], 640, 10.0, 3.9e-7)) <= 1e-12
    assert cal.accountant_epsilon <= 10.0
