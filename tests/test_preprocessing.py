"""PrivateFeatureScaler: the public-bounds map as a known answer, the release's accounting, the
histograms counted exactly, the ranges' properties, a same-seed neighbour replay and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from dpnewton import DPLogisticRegression
from dpnewton.preprocessing import (BIN_EDGES, N_BINS, PrivateFeatureScaler, bin_indices, feature_histograms,
                                    ranges_from_histograms)
from dpnewton.privacy import epsilon_to_rho, rho_to_epsilon
from dpnewton.privacy.neighbouring import LIBRARY_DELTA, LIBRARY_RELATION

pytestmark = [pytest.mark.filterwarnings("ignore::dpnewton.estimator.PrivacyWarning")]


def raw_features(n=2000, seed=0):
    """Three raw features on different scales: ~N(20, 4^2), lognormal around 500, uniform on [0, 0.05]."""
    rng = np.random.default_rng(seed)
    return np.column_stack([20 + 4 * rng.standard_normal(n), np.exp(6.2 + 0.4 * rng.standard_normal(n)),
                            0.05 * rng.random(n)])


def test_public_bounds_are_the_exact_affine_map_and_spend_nothing():
    X = raw_features(50)
    bounds = [(10.0, 30.0), (0.0, 1000.0), (0.0, 0.05)]
    scaler = PrivateFeatureScaler(bounds=bounds).fit(X)
    lo, hi = np.array(bounds).T
    expected = (np.clip(X, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2)
    assert_array_equal(scaler.transform(X), expected)
    assert_array_equal(scaler.transform([[10.0, 0.0, 0.0], [30.0, 1000.0, 0.05], [-5.0, 5000.0, 0.025]]),
                       [[-1, -1, -1], [1, 1, 1], [-1, 1, 0]])
    assert scaler.privacy_ledger_.entries == [] and scaler.noisy_histograms_ is None
    assert (scaler.epsilon_, scaler.delta_, scaler.rho_) == (0.0, 0.0, 0.0)
    assert scaler.privacy_record_["source"] == "public bounds (no release)"
    uncentred = PrivateFeatureScaler(bounds=bounds, center=False).fit(X)
    assert_array_equal(uncentred.transform(X), np.clip(X, lo, hi) / np.maximum(abs(lo), abs(hi)))


def test_histograms_count_every_row_once_per_feature():
    X = np.array([[0.0, -3.0], [1.0, 5.0], [1.5, 5.0], [1e12, -1e-9]])
    H = feature_histograms(X)
    assert H.shape == (2, N_BINS)
    assert_array_equal(H.sum(axis=1), [4, 4])                                    # one count per row and feature
    for f in range(2):
        for x in X[:, f]:
            j = bin_indices(np.array([x]))[0]
            assert BIN_EDGES[j] <= x < BIN_EDGES[j + 1] or j in (0, N_BINS - 1)    # the outer bins take the rest
    assert H[0, bin_indices(np.array([1.0]))[0]] == 2                            # 1.0 and 1.5 share [1, 4)
    assert_array_equal(feature_histograms(sparse.csr_matrix(X)), H)              # implicit zeros counted


def test_release_accounting():
    """One Gaussian release: sensitivity sqrt(d), rho calibrated to (epsilon, delta) by the exact GDP
    conversion, sigma = sqrt(d)/sqrt(2 rho); the ledger sums to rho and converts back to epsilon."""
    X = raw_features(500)
    scaler = PrivateFeatureScaler(epsilon=0.4, delta=3e-6, random_state=0).fit(X)
    rho = epsilon_to_rho(0.4, 3e-6, "gdp")
    (entry,) = scaler.privacy_ledger_.entries
    assert entry.sensitivity == math.sqrt(3) and entry.rho == rho == scaler.rho_
    assert math.isclose(entry.sigma, math.sqrt(3) / math.sqrt(2 * rho), rel_tol=1e-15)
    assert scaler.privacy_ledger_.neighbouring == LIBRARY_RELATION
    assert math.isclose(rho_to_epsilon(scaler.privacy_ledger_.spent_rho, 3e-6, "gdp"), 0.4, rel_tol=1e-9)
    record = scaler.privacy_record_
    assert record["lower"] == scaler.lower_.tolist() and record["sigma"] == entry.sigma
    assert "n" not in record and 500 not in record.values()
    assert PrivateFeatureScaler(random_state=0).fit(X).delta_ == LIBRARY_DELTA


def test_same_seed_neighbour_replay():
    """D and D + one row with the same seed: identical control flow and noise scale, and released
    histograms that differ by exactly the row's d one-hot counts (the noise draw is the same)."""
    D = raw_features(300)
    row = np.array([[1e6, -2.0, 0.01]])
    a = PrivateFeatureScaler(epsilon=0.5, random_state=3).fit(D)
    b = PrivateFeatureScaler(epsilon=0.5, random_state=3).fit(np.vstack([D, row]))
    assert [e.as_dict() for e in a.privacy_ledger_.entries] == [e.as_dict() for e in b.privacy_ledger_.entries]
    diff = b.noisy_histograms_ - a.noisy_histograms_
    expected = np.zeros_like(diff)
    expected[np.arange(3), bin_indices(row[0])] = 1.0
    assert_allclose(diff, expected, atol=1e-9)
    assert math.isclose(np.linalg.norm(expected), math.sqrt(3))                   # the sensitivity, attained


def test_ranges_cover_the_bulk_and_output_is_bounded():
    """At a large budget the ranges hold the data's central 90 % within a grid bin (factor 8), and every
    transformed value lies in [-1, 1], outliers included."""
    X = raw_features(5000, seed=1)
    scaler = PrivateFeatureScaler(epsilon=10.0, random_state=0).fit(X)
    q05, q95 = np.quantile(X, [0.05, 0.95], axis=0)
    assert np.all(scaler.lower_ <= q05) and np.all(scaler.upper_ >= q95)
    assert np.all(scaler.upper_ <= 8 * X.max(axis=0)) and np.all(scaler.lower_ >= X.min(axis=0) / 8)
    Z = scaler.transform(np.vstack([X, [[-1e9, 1e9, 1e3]]]))
    assert np.all(np.abs(Z) <= 1.0)
    assert_allclose(np.abs(Z[-1]), 1.0, rtol=1e-15)


def test_post_processing_ignores_a_far_noise_bin():
    """A lone large noise value far from a feature's data does not become its range when the data's
    bins pass the threshold."""
    noisy = np.zeros((1, N_BINS))
    home = bin_indices(np.array([20.0]))[0]
    noisy[0, home], noisy[0, home + 1] = 900.0, 600.0
    noisy[0, 3] = 350.0                                                          # 3.5 sigma at sigma = 100
    lower, upper = ranges_from_histograms(noisy, 100.0, (0.0, 1.0))
    assert (lower[0], upper[0]) == (BIN_EDGES[home], BIN_EDGES[home + 2])


def test_sparse_input_stays_sparse_and_uncentred():
    X = raw_features(400)
    X[X[:, 0] < 22, 0] = 0.0
    S = sparse.csr_matrix(X)
    scaler = PrivateFeatureScaler(random_state=0, center=False).fit(S)
    out = scaler.transform(S)
    assert sparse.issparse(out) and out.nnz == S.nnz
    assert_allclose(out.toarray(), scaler.transform(X))
    with pytest.raises(ValueError, match="center=True"):
        PrivateFeatureScaler(random_state=0).fit(X).transform(S)


def test_in_a_pipeline_with_public_unit_bounds():
    """The scaler as a Pipeline step: its output lies in [-1, 1], so the classifier after it takes the
    public bounds (-1, 1) and spends nothing on ranges; the two budgets add up by basic composition."""
    X = raw_features(1500)
    y = (X[:, 0] + 0.01 * X[:, 1] > 25).astype(int)
    pipe = Pipeline([("scale", PrivateFeatureScaler(epsilon=0.3, random_state=0)),
                     ("clf", DPLogisticRegression(epsilon=0.7, bounds=[(-1, 1)] * 3, random_state=0))])
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.75
    assert pipe.named_steps["clf"].privacy_record_["preprocessing"]["epsilon"] == 0.0
    again = clone(pipe).fit(X, y)
    assert_array_equal(again.named_steps["clf"].coef_, pipe.named_steps["clf"].coef_)


def test_fresh_randomness_by_default():
    X = raw_features(300)
    a, b = PrivateFeatureScaler().fit(X), PrivateFeatureScaler().fit(X)
    assert not np.array_equal(a.noisy_histograms_, b.noisy_histograms_)


@pytest.mark.parametrize("params, match", [
    ({"epsilon": 0}, "epsilon"), ({"delta": 1.0}, "delta"), ({"quantiles": (0.9, 0.1)}, "quantiles"),
    ({"quantiles": 0.5}, "quantiles"), ({"bounds": [(0, 1)]}, "bounds must be 3 pairs"),
    ({"bounds": [(0, 1), (1, 1), (0, 1)]}, r"bounds\[1\]"), ({"random_state": -1}, "random_state"),
    ({"center": "yes"}, "center"),
])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        PrivateFeatureScaler(**params).fit(raw_features(20))


@pytest.mark.parametrize("random_state", [0, None], ids=["seeded", "fresh"])
def test_check_estimator_passes(random_state):
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(PrivateFeatureScaler(random_state=random_state), on_fail=None, on_skip=None)
    assert [r["check_name"] for r in results if r["status"] == "failed"] == []
    assert sum(r["status"] == "passed" for r in results) >= 40


def test_pure_release_is_laplace_with_l1_sensitivity_d():
    """delta = 0: one Laplace release of scale b = d/epsilon (L1 sensitivity d), recorded as one event of
    the whole epsilon with delta 0; same seed, neighbour D + row: the noise is identical and the released
    histograms differ by the row's d one-hot counts (L1 distance d, the sensitivity, attained)."""
    D = raw_features(400)
    row = np.array([[-7.0, 3e4, 0.02]])
    a = PrivateFeatureScaler(epsilon=0.8, delta=0, random_state=5).fit(D)
    b = PrivateFeatureScaler(epsilon=0.8, delta=0, random_state=5).fit(np.vstack([D, row]))
    (event,) = a.privacy_ledger_.events
    assert event == {"mechanism": "laplace", "quantity": "feature-histograms", "epsilon": 0.8, "delta": 0.0,
                     "l1_sensitivity": 3.0, "scale": 3 / 0.8}
    assert math.fsum(e["epsilon"] for e in a.privacy_ledger_.events) == 0.8 and not a.privacy_ledger_.entries
    assert a.epsilon_ == 0.8 and a.delta_ == 0.0 and a.rho_ == 0.5 * 0.8 ** 2
    record = a.privacy_record_
    assert record["noise"] == "laplace" and record["epsilon_spent"] == 0.8 and record["delta"] == 0.0
    assert record["laplace_scale"] == 3 / 0.8 and "pure" in record["guarantee"]
    assert a.privacy_ledger_.events == b.privacy_ledger_.events
    diff = b.noisy_histograms_ - a.noisy_histograms_
    expected = np.zeros_like(diff)
    expected[np.arange(3), bin_indices(row[0])] = 1.0
    assert_allclose(diff, expected, atol=1e-9)
    noise = a.noisy_histograms_ - feature_histograms(D)              # Laplace(b): mean |noise| = b
    assert abs(np.mean(np.abs(noise)) - 3 / 0.8) < 0.15 * 3 / 0.8
    assert np.all(a.lower_ < a.upper_) and np.all(np.abs(a.transform(D)) <= 1)


def test_estimator_pure_mode_without_bounds_spends_epsilon_with_delta_zero():
    """DPLogisticRegression(epsilon, delta=0) on raw features: Laplace ranges + pure objpert; the
    preprocessing and the model's epsilons sum to epsilon, every delta recorded is 0."""
    rng = np.random.default_rng(0)
    X = raw_features(3000, seed=1)
    y = (X[:, 0] + rng.normal(0, 2, len(X)) > 20).astype(int)
    est = DPLogisticRegression(epsilon=2.0, delta=0).fit(X, y)
    record = est.privacy_record_
    pre = record["preprocessing"]
    assert pre["noise"] == "laplace" and pre["delta"] == 0.0 and record["model_delta"] == 0.0
    assert record["delta"] == 0.0 and math.isclose(pre["epsilon"] + record["model_epsilon"], 2.0, rel_tol=1e-15)
    assert pre["epsilon"] + record["model_epsilon"] <= 2.0
    assert est.preprocessing_.privacy_ledger_.events[0]["epsilon"] == pre["epsilon"]
    assert est.score(X, y) > 0.6                                       # majority about 0.5
