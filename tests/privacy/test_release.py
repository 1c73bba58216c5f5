"""What a library fit releases beside the weights (:mod:`dpnewton.privacy.release`): the same on
neighbouring datasets, nothing read off the exact data or the private n, and nothing that is not a guarantee."""

import json
import warnings

import numpy as np
import pytest

import dpnewton
from dpnewton.privacy.release import RELEASED_FIELDS


def _neighbours(n: int, d: int = 3, seed: int = 0):
    """D (n rows) and D' = D plus one row far from the others (a canary)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / 3.0
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    canary = np.full((1, d), 5.0)
    return (X, y), (np.vstack([X, canary]), np.append(y, 1.0))


@pytest.mark.parametrize("algorithm, hyper", [("objpert", {}), ("objpert", {"delta": 0}),
                                              ("dp-gd", {"average": "tail"}), ("precond-dp-gd", {})])
@pytest.mark.parametrize("n", [2, 50])
def test_released_fields_are_identical_on_neighbours(algorithm, hyper, n):
    """Same seed on D and D': every released field other than the weights is identical, so no
    distinguisher reading them can separate the two (the weights carry the guarantee)."""
    (X, y), (X2, y2) = _neighbours(n)
    a = dpnewton.fit(X, y, algorithm, epsilon=1.0, iterations=5, seed=3, **hyper)
    b = dpnewton.fit(X2, y2, algorithm, epsilon=1.0, iterations=5, seed=3, **hyper)
    assert a.record == b.record
    assert set(a.record) <= set(RELEASED_FIELDS)
    assert a.ledger.released_events() == b.ledger.released_events()
    assert not np.array_equal(a.weights, b.weights)          # the noisy output itself differs


def test_objpert_record_holds_no_n_and_no_solver_diagnostics():
    """The mean-form noise scale sigma/n and tolerance gamma_sum/n would give n away exactly; the
    solver's gradient norm and step count are read off the data. The sum-form scales stand instead."""
    (X, y), _ = _neighbours(40)
    fit = dpnewton.fit(X, y, "objpert", epsilon=1.0, seed=0)
    (event,) = json.loads(fit.record["accounting_events"])
    for key in ("sigma_obj", "gamma", "gradient_norm", "solver_iterations"):
        assert key not in event
    assert event["sigma"] > 0 and event["sum_gradient_tolerance"] > 0
    assert "rho" not in fit.record and "ledger_rho_total" not in fit.record      # objpert spends no rho
    assert not any(isinstance(v, float) and np.isnan(v) for v in fit.record.values())
    assert fit.evaluation == {}


def test_evaluation_only_on_request():
    (X, y), _ = _neighbours(60)
    fit = dpnewton.fit(X, y, "dp-gd", epsilon=1.0, iterations=5, seed=0, excess_loss=True)
    assert set(fit.evaluation) >= {"excess_loss", "train_accuracy"}
    assert "excess_loss" not in fit.record and "train_accuracy" not in fit.record


@pytest.mark.parametrize("kwargs, match", [
    ({"conversion": "official-fsolve"}, "conversion='official-fsolve' is refused here: the official code"),
    ({"reset": True}, r"is not private \(explosion reset"),
])
def test_library_refuses_what_is_not_a_guarantee(kwargs, match):
    (X, y), _ = _neighbours(30)
    with pytest.raises(ValueError, match=match):
        dpnewton.fit(X, y, "dp-gd", epsilon=0.001, iterations=5, seed=0, **kwargs)


def test_library_refuses_non_private_steps_even_with_n_public():
    (X, y), _ = _neighbours(30)
    with pytest.raises(ValueError, match="is not private .*line search"):
        dpnewton.fit(X, y, "dp-gd-oracle", epsilon=1.0, iterations=5, seed=0, neighbouring="add-remove-public-n")


NOISY_OUTPUTS = {("preprocessing", "lower"), ("preprocessing", "upper")}
"""The private feature ranges are noisy releases themselves: the only record fields allowed to differ."""


def _record_differences(a, b, path=()):
    """The paths at which two privacy records differ (nested dicts and lists compared exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for key in sorted(set(a) | set(b))
                for p in ([path + (key,)] if key not in a or key not in b
                          else _record_differences(a[key], b[key], path + (key,)))]
    return [] if json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) else [path]


@pytest.mark.parametrize("classes, params", [
    (2, {}), (3, {}), (3, {"multi_class": "ovr"}), (2, {"delta": 0}), (3, {"delta": 0, "multi_class": "ovr"}),
    (2, {"data_norm": 3.0}), (2, {"bounds": [(-3.0, 3.0)] * 4}),
    (2, {"algorithm": "dp-gd", "iterations": 5}), (3, {"algorithm": "precond-dp-gd", "iterations": 5})],
    ids=["objpert", "softmax", "ovr", "pure", "pure-ovr", "data_norm", "bounds", "dp-gd", "precond-softmax"])
def test_estimator_privacy_record_is_identical_on_neighbours(classes, params):
    """DPLogisticRegression, same random_state on D and D' = D + one row inside the features' ranges:
    ``privacy_record_`` (the model's record, the totals and the preprocessing's) is identical except for
    the noisy ranges themselves, in every mode (private ranges, public bounds or data_norm, softmax,
    one-vs-rest, pure epsilon-DP, iterative cards)."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((80, 4)) * np.array([1.0, 10.0, 100.0, 1000.0])
    y = rng.integers(0, classes, 80)
    X2, y2 = np.vstack([X, 0.5 * X.max(axis=0)]), np.append(y, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # PrivacyWarning, BudgetWarning: not what is tested here
        a = dpnewton.DPLogisticRegression(epsilon=1.0, random_state=3, **params).fit(X, y)
        b = dpnewton.DPLogisticRegression(epsilon=1.0, random_state=3, **params).fit(X2, y2)
    differing = set(_record_differences(a.privacy_record_, b.privacy_record_))
    assert differing <= NOISY_OUTPUTS, differing
    assert not np.array_equal(a.coef_, b.coef_)               # the weights carry the guarantee
