"""DPLogisticRegression: scikit-learn conformance, label handling, the feature-space transform and
the privacy bookkeeping, checked against direct calls of ``dpnewton.fit``."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import expit
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import check_estimator

import dpnewton
from dpnewton.algorithms import ALGORITHMS
from dpnewton.estimator import (DEFAULT_ALGORITHM, DEFAULT_MAX_NORM, DEFAULT_PREPROCESSING_SHARE, GUARANTEE,
                                BudgetWarning, DPLogisticRegression, PrivacyWarning,
                                ProjectionWarning, supported_algorithms)
from dpnewton.experiment import DEFAULT_CONVERSION
from dpnewton.loss import LogisticProblem
from dpnewton.privacy import epsilon_to_rho, rho_to_epsilon
from dpnewton.privacy.neighbouring import LIBRARY_DELTA, LIBRARY_RELATION
from dpnewton.privacy.release import RELEASED_FIELDS

pytestmark = [pytest.mark.filterwarnings("ignore::dpnewton.estimator.PrivacyWarning"),
              pytest.mark.filterwarnings("ignore::dpnewton.estimator.BudgetWarning")]
ITERATIVE = {"algorithm": "dp-gd", "iterations": 50, "hyper": {"average": "tail"}}


def make_data(n=3000, d=4, seed=0, scale=0.5):
    """Gaussian features of norm ~ scale*sqrt(d), Bernoulli(sigmoid) labels in {-1, +1}."""
    rng = np.random.default_rng(seed)
    X = scale * rng.standard_normal((n, d))
    w = np.linspace(2.0, -2.0, d)
    y = np.where(rng.random(n) < expit(X @ w + 0.5), 1, -1)
    return X, y


@pytest.fixture(scope="module")
def data():
    return make_data()


def check_results(estimator):
    return check_estimator(estimator, on_fail=None, on_skip=None)


@pytest.fixture(scope="module")
def seeded_check_results():
    return check_results(DPLogisticRegression(random_state=0))


# ---- scikit-learn conformance ------------------------------------------------------------------

def test_check_estimator_passes(seeded_check_results):
    """Every check passes with no declared expected failure; the one skip is scikit-learn's own
    (the array-API check runs only with SCIPY_ARRAY_API set)."""
    failed = [(r["check_name"], repr(r["exception"]))
              for r in seeded_check_results if r["status"] not in ("passed", "skipped")]
    assert failed == []
    skipped = [r for r in seeded_check_results if r["status"] == "skipped"]
    assert [r["check_name"] for r in skipped] in ([], ["check_array_api_input"])
    assert sum(r["status"] == "passed" for r in seeded_check_results) > 40


def test_check_estimator_with_fresh_randomness():
    """random_state=None is the default; the checks seed estimators that have a random_state."""
    results = check_results(DPLogisticRegression())
    assert [r["check_name"] for r in results if r["status"] == "failed"] == []


def test_default_parameters():
    assert DPLogisticRegression().get_params() == {
        "epsilon": 1.0, "delta": None, "algorithm": DEFAULT_ALGORITHM, "iterations": None,
        "conversion": DEFAULT_CONVERSION, "fit_intercept": True, "bounds": None, "data_norm": None,
        "preprocessing_share": DEFAULT_PREPROCESSING_SHARE, "max_norm": DEFAULT_MAX_NORM, "random_state": None,
        "hyper": None, "multi_class": "softmax"}
    assert DEFAULT_ALGORITHM == "objpert" and DEFAULT_ALGORITHM in supported_algorithms()


def test_get_set_params_round_trip_and_clone(data):
    X, y = data
    est = DPLogisticRegression(epsilon=2.0, algorithm="precond-dp-gd", iterations=8, data_norm=3.0,
                               random_state=4, hyper={"precond_frac": 0.2})
    other = DPLogisticRegression().set_params(**est.get_params())
    assert other.get_params() == est.get_params()
    cloned = clone(est)
    assert cloned.get_params() == est.get_params() and cloned.hyper is not est.hyper
    assert_array_equal(cloned.fit(X, y).coef_, est.fit(X, y).coef_)
    assert est.hyper == {"precond_frac": 0.2}  # fit does not change its parameters


def test_pipeline_round_trip(data):
    X, y = data
    pipe = Pipeline([("squash", FunctionTransformer(np.tanh)),
                     ("clf", DPLogisticRegression(random_state=1, data_norm=2.5))])
    pipe.fit(X, y)
    direct = DPLogisticRegression(random_state=1, data_norm=2.5).fit(np.tanh(X), y)
    assert_array_equal(pipe.named_steps["clf"].coef_, direct.coef_)
    assert_array_equal(pipe.predict(X), direct.predict(np.tanh(X)))
    assert_array_equal(pipe.predict_proba(X), direct.predict_proba(np.tanh(X)))
    again = clone(pipe).set_params(clf__epsilon=3.0)
    assert again.get_params()["clf__epsilon"] == 3.0 and not hasattr(again.named_steps["clf"], "coef_")
    assert again.fit(X, y).named_steps["clf"].epsilon_ == 3.0


# ---- labels ------------------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [(0, 1), ("no", "yes"), (False, True), (-1.0, 3.0)],
                         ids=["01", "strings", "bools", "integral-floats"])
def test_labels_map_to_minus_plus_one(data, labels):
    X, y = data
    ref = DPLogisticRegression(random_state=3).fit(X, y)
    neg, pos = labels
    y_lab = np.where(y > 0, pos, neg)
    if isinstance(neg, str):
        y_lab = y_lab.astype(object)
    est = DPLogisticRegression(random_state=3).fit(X, y_lab)
    assert_array_equal(est.classes_, np.array([neg, pos]))
    assert_array_equal(est.coef_, ref.coef_)
    assert_array_equal(est.intercept_, ref.intercept_)
    assert_array_equal(est.predict(X), np.where(ref.predict(X) > 0, pos, neg))
    assert set(est.predict(X).tolist()) <= {neg, pos}


def test_classes_sorted_positive_is_second(data):
    X, y = data
    # "b" is the larger label, so it is classes_[1], the +1 of the optimizer, wherever it appears
    est = DPLogisticRegression(random_state=3).fit(X, np.where(y > 0, "b", "a"))
    flipped = DPLogisticRegression(random_state=3).fit(X, np.where(y > 0, "a", "b"))
    assert est.classes_.tolist() == ["a", "b"] == flipped.classes_.tolist()
    ref = DPLogisticRegression(random_state=3).fit(X, y)
    flipped_ref = DPLogisticRegression(random_state=3).fit(X, -y)
    assert_array_equal(est.coef_, ref.coef_)
    assert_array_equal(flipped.coef_, flipped_ref.coef_)
    assert np.mean(est.predict(X) == np.where(y > 0, "b", "a")) > 0.7


@pytest.mark.parametrize("params", [{}, ITERATIVE], ids=["objpert", "dp-gd"])
def test_three_classes_one_vs_rest(data, params):
    """K = 3 classes: three binary models on the same rows, the budget split K ways (objpert:
    (epsilon/K, delta/K) each; a zCDP method: rho/K each, the ledgers summing to rho)."""
    X, y = data
    y3 = np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.3, 0.3])]
    est = DPLogisticRegression(epsilon=3.0, random_state=0, data_norm=1.0, multi_class="ovr", **params).fit(X, y3)
    assert est.classes_.tolist() == ["a", "b", "c"] and est.coef_.shape == (3, X.shape[1])
    proba = est.predict_proba(X)
    assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)
    assert_array_equal(est.predict(X), est.classes_[np.argmax(proba, axis=1)])
    assert est.score(X, y3) > 0.6                       # three roughly equal classes: chance is 1/3
    record = est.privacy_record_
    assert record["epsilon"] == 3.0 and len(record["per_class"]) == 3 == len(est.privacy_ledgers_)
    assert "one-vs-rest over 3 classes" in record["composition"]
    if est.algorithm == "objpert":
        assert [r["epsilon"] for r in record["per_class"]] == [1.0] * 3
        assert [r["delta"] for r in record["per_class"]] == [LIBRARY_DELTA / 3] * 3
    else:
        spent = math.fsum(ledger.spent_rho for ledger in est.privacy_ledgers_)
        assert math.isclose(spent, est.rho_, rel_tol=1e-9)
        assert all(math.isclose(ledger.budget_rho, est.rho_ / 3) for ledger in est.privacy_ledgers_)
    if est.algorithm == "objpert":   # class c's model is the binary fit "c vs rest" at (epsilon/3, delta/3)
        rows = np.column_stack([X, np.ones(len(X))])
        direct = dpnewton.fit(rows, np.where(y3 == "c", 1, -1), algorithm="objpert", epsilon=1.0,
                              delta=LIBRARY_DELTA / 3, iterations=1, seed=0, dataset="user/class-2",
                              excess_loss=False)
        assert_allclose(est.coef_[2], direct.weights[:-1], rtol=1e-12)   # X read in place: equal to rounding


def test_one_class_rejected(data):
    X, _ = data
    with pytest.raises(ValueError, match=r"one class only \(\['x'\]\)"):
        DPLogisticRegression(random_state=0).fit(X, np.full(len(X), "x"))


# ---- probabilities -----------------------------------------------------------------------------

def _fitted_with(coef, intercept):
    X, y = make_data(n=50, d=len(coef))
    est = DPLogisticRegression(random_state=0).fit(X, y)
    est.coef_ = np.array([coef], dtype=float)
    est.intercept_ = np.array([intercept], dtype=float)
    return est


def test_predict_proba_known_answer():
    est = _fitted_with([1.0, 0.0], 0.0)
    X = np.array([[0.0, 5.0], [math.log(3.0), -1.0], [-math.log(3.0), 2.0]])
    assert_allclose(est.predict_proba(X), [[0.5, 0.5], [0.25, 0.75], [0.75, 0.25]], rtol=1e-15)


def test_predict_proba_is_expit_of_decision(data):
    X, y = data
    est = DPLogisticRegression(random_state=2).fit(X, y)
    proba = est.predict_proba(X)
    decision = X @ est.coef_[0] + est.intercept_[0]
    assert_allclose(est.decision_function(X), decision, rtol=1e-12)
    assert_allclose(proba[:, 1], expit(decision), rtol=1e-12)
    assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-15)
    assert_array_equal(est.classes_[np.argmax(proba, axis=1)], est.predict(X))


def test_predict_log_proba(data):
    """predict_log_proba is log(predict_proba), -inf included (scikit-learn's definition)."""
    X, y = data
    est = DPLogisticRegression(random_state=2).fit(X, y)
    assert_array_equal(est.predict_log_proba(X), np.log(est.predict_proba(X)))
    huge = _fitted_with([1000.0, 0.0], 0.0)
    Xh = np.array([[1.0, 0.0], [-1.0, 0.0], [0.001, 0.0]])
    logp = huge.predict_log_proba(Xh)
    assert logp[0, 0] == -np.inf and logp[1, 1] == -np.inf and logp[0, 1] == 0.0
    assert_allclose(logp[2], np.log([expit(-1.0), expit(1.0)]), rtol=1e-14)


# ---- the model in the original features -------------------------------------------------------

def test_weights_equal_direct_fit_on_scaled_rows(data):
    X, y = data
    n, d = X.shape
    D = 3.0
    est = DPLogisticRegression(epsilon=2.0, algorithm="precond-dp-gd", iterations=10, data_norm=D,
                               random_state=7).fit(X, y)
    assert np.linalg.norm(est.coef_) * D < DEFAULT_MAX_NORM           # the radius did not act
    rows = np.column_stack([X, np.ones(n)]) / D
    # excess_loss=True computes the non-private optimum: evaluation only, same weights
    direct = dpnewton.fit(rows, y, algorithm="precond-dp-gd", epsilon=2.0, iterations=10, seed=7)
    # the estimator reads X in place (dpnewton.scaled_rows): the factors are applied in another order, so
    # the weights agree to rounding, not bit for bit
    assert_allclose(est.coef_, direct.weights[None, :d] / D, rtol=1e-12)
    assert_allclose(est.intercept_, [direct.weights[d] / D], rtol=1e-12)
    assert est.rho_ == direct.record["rho"] and est.n_iter_ == 10

    no_intercept = DPLogisticRegression(epsilon=2.0, algorithm="precond-dp-gd", iterations=10,
                                        fit_intercept=False, data_norm=1.0, random_state=7).fit(X, y)
    direct = dpnewton.fit(X, y, algorithm="precond-dp-gd", epsilon=2.0, iterations=10, seed=7,
                          excess_loss=False)
    assert_allclose(no_intercept.coef_[0], direct.weights, rtol=1e-12)
    assert_array_equal(no_intercept.intercept_, [0.0])


def test_decision_equals_training_margin_within_the_bound():
    X, y = make_data(n=2000, d=3, scale=0.3)
    X[0] = [4.0, -4.0, 4.0]              # ||[x, 1]|| = 7 > data_norm: shrunk for training
    D = 2.5
    augmented = np.column_stack([X, np.ones(len(X))])
    norms = np.linalg.norm(augmented, axis=1)
    inside = norms <= D
    assert inside[1:].mean() > 0.99 and not inside[0]
    est = DPLogisticRegression(algorithm="precond-dp-gd", iterations=8, data_norm=D, random_state=5).fit(X, y)
    w = dpnewton.fit(augmented / D, y, algorithm="precond-dp-gd", epsilon=1.0, iterations=8, seed=5,
                     excess_loss=False).weights
    margins = LogisticProblem.from_xy(augmented / D, y).margins(w)   # y_i <z_i, w>, z_i projected
    signed = y * est.decision_function(X)
    assert_allclose(signed[inside], margins[inside], rtol=1e-10, atol=1e-12)
    assert_allclose(signed[0] / (norms[0] / D), margins[0], rtol=1e-10)
    assert not np.isclose(signed[0], margins[0])


# ---- randomness and privacy bookkeeping --------------------------------------------------------

def test_fresh_randomness_by_default_and_fixed_seed_replays(data):
    X, y = data
    a, b = DPLogisticRegression().fit(X, y), DPLogisticRegression().fit(X, y)
    assert not np.array_equal(a.coef_, b.coef_)
    assert a.privacy_record_["seed"] is None
    c, e = DPLogisticRegression(random_state=11).fit(X, y), DPLogisticRegression(random_state=11).fit(X, y)
    assert_array_equal(c.coef_, e.coef_)
    assert_array_equal(c.intercept_, e.intercept_)
    assert not np.array_equal(c.coef_, DPLogisticRegression(random_state=12).fit(X, y).coef_)


def test_ledger_sums_to_rho(data):
    """A zCDP method: the count release and the gradient releases sum to rho; delta defaults to the
    public constant; the record states the relation and the guarantee."""
    X, y = data
    est = DPLogisticRegression(epsilon=0.5, random_state=0, data_norm=1.0, **ITERATIVE).fit(X, y)
    assert est.epsilon_ == 0.5 and est.delta_ == LIBRARY_DELTA
    assert est.rho_ == epsilon_to_rho(0.5, LIBRARY_DELTA, DEFAULT_CONVERSION)
    entries = est.privacy_ledger_.entries
    assert [e.quantity for e in entries] == ["count"] + ["gradient"] * 50
    assert math.isclose(math.fsum(e.rho for e in entries), est.rho_, rel_tol=1e-9)
    assert est.privacy_ledger_.nonprivate == []
    record = est.privacy_record_
    assert (record["algorithm"], record["conversion"], record["iterations"], record["neighbouring"]) == (
        "dp-gd", DEFAULT_CONVERSION, 50, LIBRARY_RELATION)
    assert record["guarantee"] == GUARANTEE and "n private" in GUARANTEE
    assert set(record) <= set(RELEASED_FIELDS) | {"guarantee", "composition", "model_epsilon", "model_delta",
                                                       "preprocessing"}
    assert record["preprocessing"] == {"source": "data_norm (public row-norm bound)", "epsilon": 0.0, "delta": 0.0}
    assert not {"excess_loss", "train_accuracy", "runtime_s"} & set(record)   # evaluation, not private
    given = DPLogisticRegression(epsilon=0.5, delta=1e-6, conversion="gdp", random_state=0, data_norm=1.0,
                                 **ITERATIVE).fit(X, y)
    assert given.delta_ == 1e-6 and given.rho_ == epsilon_to_rho(0.5, 1e-6, "gdp")
    objpert = DPLogisticRegression(epsilon=0.5, random_state=0).fit(X, y)
    assert objpert.privacy_ledger_.entries == [] and len(objpert.privacy_ledger_.accounting_events) == 1
    assert objpert.privacy_record_["neighbouring"] == LIBRARY_RELATION


def test_privacy_warning_once_per_process(data, monkeypatch):
    X, y = data
    monkeypatch.setattr(DPLogisticRegression, "_privacy_warning_shown", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="epsilon"):
            DPLogisticRegression(epsilon=0.0).fit(X, y)      # rejected before the warning
        DPLogisticRegression(random_state=0).fit(X, y)
        DPLogisticRegression(random_state=1).fit(X, y)
    privacy = [w for w in caught if issubclass(w.category, PrivacyWarning)]
    assert len(privacy) == 1
    assert issubclass(PrivacyWarning, UserWarning)
    text = str(privacy[0].message)
    assert "scaler" in text and "GridSearchCV" in text and "data_norm" in text
    assert privacy[0].filename == __file__               # points at the caller's fit


# ---- parameters --------------------------------------------------------------------------------

def _calibrated_for_library(spec) -> bool:
    return LIBRARY_RELATION in spec.relations and not spec.nonprivate


def test_supported_algorithms_from_registry():
    assert set(supported_algorithms()) == {name for name, spec in ALGORITHMS.items() if _calibrated_for_library(spec)}
    assert {"objpert", "dp-gd", "precond-dp-gd"} <= set(supported_algorithms())


@pytest.mark.parametrize("name", sorted(name for name, spec in ALGORITHMS.items() if not _calibrated_for_library(spec)))
def test_rejected_algorithms(data, name):
    X, y = data
    with pytest.raises(ValueError, match=f"algorithm='{name}' is not supported") as info:
        DPLogisticRegression(algorithm=name, iterations=2).fit(X, y)
    assert ", ".join(supported_algorithms()) in str(info.value)
    assert "not private" in str(info.value) or "n public" in str(info.value)


def test_every_supported_algorithm_fits(data):
    X, y = data
    for name in supported_algorithms():
        est = DPLogisticRegression(algorithm=name, epsilon=5.0, iterations=4, data_norm=3.0, random_state=0).fit(X, y)
        assert np.isfinite(est.coef_).all() and est.privacy_record_["algorithm"] == name
        assert est.score(X, y) > 0.6


def test_hyper_passes_through(data):
    X, y = data
    n = len(X)
    est = DPLogisticRegression(random_state=0, data_norm=1.0, **ITERATIVE).fit(X, y)
    direct = dpnewton.fit(np.column_stack([X, np.ones(n)]), y, algorithm="dp-gd", epsilon=1.0, iterations=50,
                          seed=0, excess_loss=False, average="tail")
    assert_allclose(est.coef_[0], direct.weights[:-1], rtol=1e-12)   # X read in place: equal to rounding
    assert not np.array_equal(est.coef_, DPLogisticRegression(random_state=0, algorithm="dp-gd",
                                                              iterations=50).fit(X, y).coef_)
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        DPLogisticRegression(random_state=0, hyper={"no_such_knob": 1}).fit(X, y)
    with pytest.raises(ValueError, match="optimum|non-private"):
        DPLogisticRegression(random_state=0, algorithm="dp-gd", iterations=2, hyper={"reset": True}).fit(X, y)


@pytest.mark.parametrize("params, match", [
    ({"epsilon": -1.0}, "epsilon"),
    ({"delta": 2.0}, "delta"),
    ({"iterations": 0}, "iterations"),
    ({"conversion": "nope"}, "conversion"),
    ({"data_norm": 0.0}, "data_norm"),
    ({"data_norm": float("inf")}, "data_norm"),
    ({"random_state": -1}, "random_state"),
    ({"random_state": np.random.RandomState(0)}, "random_state"),
    ({"hyper": [("grad_frac", 0.8)]}, "hyper"),
    ({"algorithm": "sgd"}, "unknown"),
    ({"fit_intercept": "no"}, "fit_intercept"),
    ({"max_norm": 0.0}, "max_norm"),
    ({"data_norm": 1e-300}, "data_norm"),
    ({"algorithm": "dp-gd"}, "needs iterations"),
])
def test_bad_parameters(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        DPLogisticRegression(**params).fit(X, y)


def test_exported_from_package():
    assert dpnewton.DPLogisticRegression is DPLogisticRegression
    assert "DPLogisticRegression" in dpnewton.__all__


# ---- real data ---------------------------------------------------------------------------------

@pytest.mark.shared_data
def test_score_on_a1a(shared_datasets, tmp_path):
    from dpnewton.data import prepare
    prepared = prepare("a1a", data_dir=shared_datasets, cache_dir=tmp_path)
    y01 = (prepared.y > 0).astype(int)
    order = np.random.default_rng(0).permutation(len(y01))
    train, test = order[:24000], order[24000:]
    # sparse binary rows with a public row-norm bound (each a1a row has 14 ones; data_norm=1 shrinks
    # every row onto the unit ball): the default's per-feature bound sqrt(d) = 11 would shrink them 3x more
    est = DPLogisticRegression(epsilon=1, random_state=0, data_norm=1.0).fit(prepared.X[train], y01[train])
    score = est.score(prepared.X[test], y01[test])
    majority = max(y01[test].mean(), 1 - y01[test].mean())   # 0.76: always predict -1
    assert score > majority + 0.03
    assert est.classes_.tolist() == [0, 1] and est.coef_.shape == (1, prepared.X.shape[1])


def test_score_on_csv_with_string_labels(tmp_path):
    X, y = make_data(n=4000, d=3, seed=4)
    path = tmp_path / "mail.csv"
    frame = pd.DataFrame(X, columns=["links", "caps", "length"])
    frame["label"] = np.where(y > 0, "spam", "ham")
    frame.to_csv(path, index=False)

    read = pd.read_csv(path)
    features, labels = read[["links", "caps", "length"]], read["label"]
    est = DPLogisticRegression(epsilon=1, random_state=0, data_norm=3.0).fit(features[:3000], labels[:3000])
    assert est.feature_names_in_.tolist() == ["links", "caps", "length"]
    assert est.classes_.tolist() == ["ham", "spam"]
    predicted = est.predict(features[3000:])
    assert set(predicted.tolist()) == {"ham", "spam"}
    score = est.score(features[3000:], labels[3000:])
    majority = labels[3000:].value_counts(normalize=True).max()
    assert score > majority + 0.05


# ---- never silently useless -------------------------------------------------------------------

def test_readme_snippet_is_never_useless():
    """The README's snippet (epsilon 1, data_norm 4) on 1,500 rows x 5 features: 40 fresh fits, none
    below 0.8 test accuracy (the non-private model scores about 0.85 on this problem)."""
    X, y = make_data(n=1500, d=5, seed=3, scale=1.0)
    Xt, yt = make_data(n=5000, d=5, seed=4, scale=1.0)
    scores = [DPLogisticRegression(epsilon=1.0, data_norm=4.0).fit(X, y).score(Xt, yt) for _ in range(40)]
    assert min(scores) >= 0.8


def test_weights_bounded_by_the_public_radius(data):
    X, y = data
    with pytest.warns(ProjectionWarning, match="max_norm=0.5"):
        est = DPLogisticRegression(max_norm=0.5, random_state=0, data_norm=2.0).fit(X, y)
    w = np.append(est.coef_[0], est.intercept_) * 2.0           # the weights on the scaled rows
    assert math.isclose(np.linalg.norm(w), 0.5, rel_tol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProjectionWarning)       # the default radius does not act here
        DPLogisticRegression(random_state=0, data_norm=2.0).fit(X, y)


def test_budget_warning_by_the_public_rule(data):
    """BudgetWarning depends on epsilon, d and the classes only: the same parameters warn (or not) on
    3,000 rows and on 30."""
    X, y = data
    for rows in (slice(None), slice(0, 30)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", BudgetWarning)
            DPLogisticRegression(epsilon=1.0, random_state=0).fit(X[rows], y[rows])
        with pytest.warns(BudgetWarning, match="rows to beat a constant prediction"):
            DPLogisticRegression(epsilon=0.01, random_state=0).fit(X[rows], y[rows])


def test_delta_is_not_checked_against_the_private_n():
    """Refusing delta >= 1/n would be a membership test on the private n: the same delta fits at 2 rows."""
    est = DPLogisticRegression(delta=0.5, data_norm=1.0, random_state=0).fit([[0.0], [1.0]], [0, 1])
    assert est.delta_ == 0.5


def test_three_classes_softmax_spends_the_budget_once(data):
    """The default for K > 2: one softmax model (dpnewton.multinomial), one ledger summing to the model's
    rho, probabilities the softmax of the decisions, the same model as fit_multinomial's on the same rows."""
    from dpnewton.multinomial import fit_multinomial
    from dpnewton.training_rows import data_norm_map, training_rows
    from dpnewton.seeding import RunIdentity

    X, y = data
    y3 = np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.3, 0.3])]
    est = DPLogisticRegression(epsilon=3.0, random_state=0, data_norm=1.0).fit(X, y3)
    assert est.coef_.shape == (3, X.shape[1]) and est.score(X, y3) > 0.6
    proba = est.predict_proba(X)
    scores = est.decision_function(X)
    assert_allclose(proba, np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True), rtol=1e-12)
    (ledger,) = est.privacy_ledgers_
    assert math.isclose(ledger.spent_rho, est.rho_, rel_tol=1e-9) and est.rho_ == epsilon_to_rho(
        3.0, LIBRARY_DELTA, DEFAULT_CONVERSION)
    record = est.privacy_record_
    assert "per_class" not in record and "one softmax model over 3 classes" in record["composition"]
    rows = training_rows(X, data_norm_map(X.shape[1], 1.0, True))
    rng = RunIdentity("user", "softmax-bohning", 3.0, 0, 20).generator()
    W, _, _ = fit_multinomial(rows, np.searchsorted(est.classes_, y3), 3, 3.0, LIBRARY_DELTA, rng)
    assert_allclose(est.coef_, W[:, :-1], rtol=1e-12)
    assert_allclose(est.intercept_, W[:, -1], rtol=1e-12)


def test_sparse_input_equals_dense(data):
    from scipy import sparse
    X, y = data
    X = np.where(np.abs(X) > 0.5, X, 0.0)
    for params in ({}, ITERATIVE):
        dense = DPLogisticRegression(random_state=5, data_norm=3.0, **params).fit(X, y)
        sparse_fit = DPLogisticRegression(random_state=5, data_norm=3.0, **params).fit(sparse.csr_matrix(X), y)
        assert_allclose(sparse_fit.coef_, dense.coef_, rtol=1e-10, atol=1e-12)
        assert_allclose(sparse_fit.predict_proba(sparse.csr_matrix(X)), dense.predict_proba(X), rtol=1e-10)


def test_sample_weight_refused_with_the_reason(data):
    X, y = data
    with pytest.raises(ValueError, match="sample_weight is not supported.*sensitivit|sample_weight is not supported"):
        DPLogisticRegression().fit(X, y, sample_weight=np.ones(len(y)))


# ---- raw features: private ranges by default, public bounds, the intercept ---------------------

def raw_data(n=1500, seed=0):
    """Raw features on different scales (~20 +- 4, ~500 lognormal, [0, 0.05]) and labels from a model
    with a large intercept: P(y = 1) = sigmoid(0.8 (x0 - 20) + 40 (x2 - 0.025) + 1.5)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([20 + 4 * rng.standard_normal(n), np.exp(6.2 + 0.4 * rng.standard_normal(n)),
                         0.05 * rng.random(n)])
    y = (rng.random(n) < expit(0.8 * (X[:, 0] - 20) + 40 * (X[:, 2] - 0.025) + 1.5)).astype(int)
    return X, y


def test_default_splits_the_budget_and_records_every_release():
    """Nothing set: DEFAULT_PREPROCESSING_SHARE of (epsilon, delta) to the ranges, the rest to the model;
    the two add up to the user's (epsilon, delta) (basic composition); the ranges' release is on the
    scaler's ledger and in privacy_record_, n nowhere."""
    X, y = raw_data()
    est = DPLogisticRegression(epsilon=2.0, delta=1e-6, random_state=0).fit(X, y)
    record, pre = est.privacy_record_, est.privacy_record_["preprocessing"]
    assert math.isclose(pre["epsilon"], DEFAULT_PREPROCESSING_SHARE * 2.0, rel_tol=1e-15)
    total = pre["epsilon"] + record["model_epsilon"]
    assert total <= 2.0 and math.isclose(total, 2.0)
    assert pre["delta"] + record["model_delta"] <= 1e-6 and math.isclose(pre["delta"] + record["model_delta"], 1e-6)
    assert (record["epsilon"], record["delta"]) == (2.0, 1e-6) == (est.epsilon_, est.delta_)
    (entry,) = est.preprocessing_.privacy_ledger_.entries
    assert entry.sensitivity == math.sqrt(3)
    assert math.isclose(rho_to_epsilon(entry.rho, pre["delta"], "gdp"), pre["epsilon"], rel_tol=1e-9)
    assert_array_equal(est.feature_ranges_, np.column_stack([pre["lower"], pre["upper"]]))
    events = json.loads(record["accounting_events"])
    assert events[0]["target_epsilon"] == record["model_epsilon"] and events[0]["delta"] == record["model_delta"]
    assert "n" not in record and "n" not in pre and len(X) not in pre.values()
    assert "basic composition" in record["composition"]
    assert est.score(X, y) > max(y.mean(), 1 - y.mean()) + 0.05


def test_public_bounds_or_data_norm_spend_nothing_on_ranges():
    X, y = raw_data()
    bounds = [(8, 32), (0, 2000), (0, 0.05)]
    est = DPLogisticRegression(epsilon=2.0, bounds=bounds, random_state=0).fit(X, y)
    assert est.preprocessing_ is None and est.model_epsilon_ == 2.0 and est.model_delta_ == LIBRARY_DELTA
    assert_array_equal(est.feature_ranges_, bounds)
    assert est.privacy_record_["preprocessing"] == {"source": "public bounds", "epsilon": 0.0, "delta": 0.0}
    by_norm = DPLogisticRegression(epsilon=2.0, data_norm=2000.0, random_state=0).fit(X, y)
    assert by_norm.preprocessing_ is None and by_norm.feature_ranges_ is None and by_norm.model_epsilon_ == 2.0


def test_decision_is_the_training_margin_with_ranges():
    """coef_ and intercept_ map back exactly: for x within the bounds, x coef + intercept = <z, w> with
    z = [a (x - c)/h, 1/sqrt(2)], a = sqrt(3/(2d)), the rows the optimizer was given (projected onto the
    unit ball where longer)."""
    X, y = raw_data()
    bounds = np.array([(8, 32), (0, 2000), (0, 0.05)], dtype=float)
    est = DPLogisticRegression(epsilon=2.0, bounds=bounds, algorithm="dp-gd", iterations=20, random_state=4).fit(X, y)
    c, h = bounds.mean(axis=1), (bounds[:, 1] - bounds[:, 0]) / 2
    Z = np.column_stack([(np.clip(X, *bounds.T) - c) / h / math.sqrt(2), np.full(len(X), 1 / math.sqrt(2))])
    w = dpnewton.fit(Z, np.where(y == 1, 1, -1), algorithm="dp-gd", epsilon=2.0, iterations=20, seed=4,
                     excess_loss=False).weights
    inside = np.all((X >= bounds[:, 0]) & (X <= bounds[:, 1]), axis=1)
    assert inside.mean() > 0.99
    assert_allclose(est.decision_function(X)[inside], (Z @ w)[inside], rtol=1e-10, atol=1e-12)
    assert 0.0 < np.mean(np.linalg.norm(Z, axis=1) > 1.0) < 0.5      # these the optimizer saw projected


def test_intercept_is_not_capped_by_the_feature_scale():
    """Features near 1000 and a decision boundary at x = 1005: the intercept is about -1005 x coef.
    With data_norm (rows [x, 1]/data_norm, data_norm >= 1010) |intercept| <= max_norm/data_norm < 0.1;
    with ranges the constant coordinate is 1/sqrt(2) whatever the feature scale."""
    rng = np.random.default_rng(1)
    X = 1000 + 10 * rng.random((3000, 1))
    y = (X[:, 0] > 1005).astype(int)
    capped = DPLogisticRegression(epsilon=10.0, data_norm=1011.0, random_state=0).fit(X, y)
    assert abs(capped.intercept_[0]) <= DEFAULT_MAX_NORM / 1011.0
    free = DPLogisticRegression(epsilon=10.0, bounds=[(1000, 1010)], random_state=0).fit(X, y)
    assert abs(free.intercept_[0]) > 100 and free.score(X, y) > 0.95 > capped.score(X, y)
    assert math.isclose(-free.intercept_[0] / free.coef_[0, 0], 1005, abs_tol=1.0)


def test_training_rows_are_one_working_copy():
    """The rows of a fit are built in one array the size of [X, 1]: no second copy of X."""
    import tracemalloc

    from dpnewton.training_rows import range_map, training_rows
    X, _ = raw_data(200_000)
    row_map = range_map(np.array([8.0, 0, 0]), np.array([32.0, 2000, 0.05]), True, True)
    tracemalloc.start()
    rows = training_rows(X, row_map)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rows.shape == (200_000, 4) and peak < 1.1 * rows.nbytes      # plus numpy's fixed ufunc buffers


def test_same_seed_neighbour_replay_of_the_default_fit():
    """D and D + one row (an outlier) with the same seed: the same releases in the same order with the
    same noise scales (ranges: sigma; objpert: Lambda and sigma), so no scale reads n."""
    X, y = raw_data(400)
    a = DPLogisticRegression(random_state=5).fit(X, y)
    b = DPLogisticRegression(random_state=5).fit(np.vstack([X, [[1e5, 1e7, -3.0]]]), np.append(y, 0))
    assert ([e.as_dict() for e in a.preprocessing_.privacy_ledger_.entries]
            == [e.as_dict() for e in b.preprocessing_.privacy_ledger_.entries])
    ea, eb = (json.loads(e.privacy_record_["accounting_events"])[0] for e in (a, b))
    scales = ("target_epsilon", "delta", "Lambda", "sigma", "sigma_out", "eps_obj", "eps_out")
    assert {k: ea[k] for k in scales} == {k: eb[k] for k in scales}
    assert ea.keys() == eb.keys() and not {"sigma_obj", "gamma", "gradient_norm"} & ea.keys()   # n-dependent
    diff = b.preprocessing_.noisy_histograms_ - a.preprocessing_.noisy_histograms_
    assert_allclose(np.abs(diff).sum(axis=1), [1, 1, 1], atol=1e-9)   # the same noise; one count per feature
