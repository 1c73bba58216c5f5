"""DPLogisticRegression on bad input: every case a ValueError (or TypeError) naming the problem, raised
before any noise is drawn, and a fitted estimator left unchanged by a failed refit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import sparse

from dpnewton import DPLogisticRegression

pytestmark = [pytest.mark.filterwarnings("ignore::dpnewton.estimator.PrivacyWarning"),
              pytest.mark.filterwarnings("ignore::dpnewton.estimator.BudgetWarning")]

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 3))
Y = np.where(X[:, 0] > 0, 1, 0)
ITERATIVE = {"algorithm": "dp-gd", "iterations": 50, "hyper": {"average": "tail"}}

BAD_PARAMETERS = [
    ({"epsilon": 0}, "epsilon"), ({"epsilon": -1}, "epsilon"), ({"epsilon": math.nan}, "epsilon"),
    ({"epsilon": math.inf}, "epsilon"), ({"epsilon": "1"}, "epsilon"), ({"epsilon": None}, "epsilon"),
    ({"epsilon": True}, "epsilon"), ({"epsilon": 1e-12, "delta": 1e-4}, "smallest epsilon|cannot be represented|below"),
    ({"delta": 1}, "delta"), ({"delta": -1e-5}, "delta"), ({"delta": math.nan}, "delta"),
    ({"delta": "1e-5"}, "delta"), ({"delta": 0, **ITERATIVE}, "pure epsilon-DP"),
    ({"algorithm": "nope"}, "unknown"), ({"algorithm": None}, "unknown"), ({"algorithm": 3}, "unknown"),
    ({"algorithm": "cubic-newton", "iterations": 2}, "not supported"),
    ({"algorithm": "dp-sgd", "iterations": 2}, "not supported"),
    ({"algorithm": "dp-gd-oracle", "iterations": 2}, "not supported|not private"),
    ({"algorithm": "dp-gd"}, "needs iterations"), ({"algorithm": "dp-gd", "iterations": 0}, "iterations"),
    ({"algorithm": "dp-gd", "iterations": 2.5}, "iterations"),
    ({"algorithm": "dp-gd", "iterations": "10"}, "iterations"),
    ({"algorithm": "dp-gd", "iterations": True}, "iterations"), ({"iterations": -3}, "iterations"),
    ({"conversion": "nope"}, "conversion"), ({"conversion": None}, "conversion"),
    ({"fit_intercept": "no"}, "fit_intercept"), ({"fit_intercept": 1}, "fit_intercept"),
    ({"fit_intercept": None}, "fit_intercept"),
    ({"data_norm": 0}, "data_norm"), ({"data_norm": -2}, "data_norm"), ({"data_norm": math.inf}, "data_norm"),
    ({"data_norm": math.nan}, "data_norm"), ({"data_norm": "4"}, "data_norm"), ({"data_norm": 1e-300}, "data_norm"),
    ({"data_norm": 1e300}, "data_norm"),
    ({"max_norm": 0}, "max_norm"), ({"max_norm": math.inf}, "max_norm"), ({"max_norm": None}, "max_norm"),
    ({"max_norm": -1}, "max_norm"),
    ({"random_state": -1}, "random_state"), ({"random_state": 1.5}, "random_state"),
    ({"random_state": "0"}, "random_state"), ({"random_state": np.random.default_rng(0)}, "random_state"),
    ({"hyper": "average=tail"}, "hyper"), ({"hyper": [("average", "tail")]}, "hyper"),
    ({"hyper": {"no_such": 1}}, "unknown hyper-parameter"),
    ({"algorithm": "dp-gd", "iterations": 5, "hyper": {"average": "median"}}, "average"),
    ({"algorithm": "dp-gd", "iterations": 5, "hyper": {"step": -1}}, "step"),
    ({"algorithm": "precond-dp-gd", "iterations": 5, "hyper": {"precond_frac": 1.5}}, "precond_frac"),
    ({"hyper": {"Lambda": -1.0}}, "Lambda"), ({"hyper": {"jacobian_share": 0}}, "jacobian_share"),
    ({"bounds": [(0, 1)] * 2}, "bounds must be 3 pairs"), ({"bounds": [(0, 1), (2, 1), (0, 1)]}, r"bounds\[1\]"),
    ({"bounds": [(0, np.inf)] * 3}, "finite"), ({"bounds": [(0, 1)] * 3, "data_norm": 2.0}, "not both"),
    ({"preprocessing_share": 0}, "preprocessing_share"), ({"preprocessing_share": 1.0}, "preprocessing_share"),
    ({"preprocessing_share": "0.3"}, "preprocessing_share"),
]


@pytest.mark.parametrize("params, match", BAD_PARAMETERS, ids=[str(p) for p, _ in BAD_PARAMETERS])
def test_bad_parameters_are_named(params, match):
    with pytest.raises(ValueError, match=match):
        DPLogisticRegression(**params).fit(X, Y)


def _with(value, row=0, col=0):
    bad = X.copy()
    bad[row, col] = value
    return bad


BAD_DATA = [
    ("nan feature", _with(np.nan), Y, "NaN"),
    ("inf feature", _with(np.inf), Y, "infinity|inf"),
    ("string feature", np.array([["a", "b", "c"]] * 60, dtype=object), Y, "could not convert|string"),
    ("complex feature", X.astype(complex) + 1j, Y, "[Cc]omplex"),
    ("1-D X", X[:, 0], Y, "2D array"),
    ("3-D X", X.reshape(60, 3, 1), Y, "dim 3|3-d|3D|dimension"),
    ("empty X", np.zeros((0, 3)), np.zeros(0), "0 sample"),
    ("no features", np.zeros((60, 0)), Y, "0 feature"),
    ("one class", X, np.zeros(60), "one class"),
    ("length mismatch", X, Y[:-1], "inconsistent numbers of samples"),
    ("nan label", X, np.where(Y == 1, 1.0, np.nan), "NaN|nan"),
    ("continuous labels", X, X[:, 0], "continuous|Unknown label type"),
    ("2-D labels", X, np.column_stack([Y, Y]), "multilabel|multi-output|1d|column"),
    ("None labels", X, None, "requires y|y to be passed|None"),
    ("sparse with nan", sparse.csr_matrix(_with(np.nan)), Y, "NaN"),
    ("one row", X[:1], Y[:1], "one class|at least 2|1 sample"),
]


@pytest.mark.parametrize("X_bad, y_bad, match", [case[1:] for case in BAD_DATA], ids=[case[0] for case in BAD_DATA])
def test_bad_data_is_named(X_bad, y_bad, match):
    with pytest.raises(ValueError, match=match):
        DPLogisticRegression(random_state=0).fit(X_bad, y_bad)


def test_sample_weight_and_unknown_fit_arguments():
    with pytest.raises(ValueError, match="sample_weight is not supported"):
        DPLogisticRegression().fit(X, Y, sample_weight=np.ones(60))
    with pytest.raises(TypeError, match="unexpected arguments \\['classes'\\]"):
        DPLogisticRegression().fit(X, Y, classes=[0, 1])


def test_failed_refit_keeps_nothing_of_the_bad_call():
    """A bad refit raises before touching the fitted model: coef_ is the earlier fit's."""
    est = DPLogisticRegression(random_state=0).fit(X, Y)
    coef = est.coef_.copy()
    est.set_params(epsilon=-1)
    with pytest.raises(ValueError, match="epsilon"):
        est.fit(X, Y)
    assert np.array_equal(est.coef_, coef)


def test_predict_on_bad_input():
    est = DPLogisticRegression(random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="3 features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        est.predict_proba(_with(np.nan))
    with pytest.raises(Exception, match="not fitted|NotFitted"):
        DPLogisticRegression().predict(X)


def test_extreme_but_valid_values_work():
    """Features near 1e140 with data_norm 1e141 give the model of the same data at scale 1 with
    data_norm 10 (without an intercept the fit only sees x / data_norm); epsilon 1e6 stays in the
    public radius, and objpert refuses epsilon above its cap."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        huge = DPLogisticRegression(data_norm=1e141, fit_intercept=False, random_state=0).fit(X * 1e140, Y)
        unit = DPLogisticRegression(data_norm=10.0, fit_intercept=False, random_state=0).fit(X, Y)
        big = DPLogisticRegression(epsilon=1e6, data_norm=4.0, random_state=0, **ITERATIVE).fit(X, Y)
    with pytest.raises(ValueError, match="above objpert's cap of 1e\\+06: no privacy is left"):
        DPLogisticRegression(epsilon=1e7, data_norm=4.0).fit(X, Y)
    np.testing.assert_allclose(huge.coef_ * 1e140, unit.coef_, rtol=1e-9)
    np.testing.assert_allclose(huge.predict_proba(X * 1e140), unit.predict_proba(X), rtol=1e-9)
    assert np.linalg.norm(np.append(big.coef_, big.intercept_)) * 4.0 <= 100.0 + 1e-9
