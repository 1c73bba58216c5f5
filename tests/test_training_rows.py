"""The estimator's training rows: one working copy of X at the peak of a fit (none with a public data_norm),
X never modified, and the same bits as the two-step construction (rows, then LogisticProblem.from_xy) they
replace."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import sparse

from dpnewton.estimator import DPLogisticRegression
from dpnewton.loss import LogisticProblem
from dpnewton.scaled_rows import ScaledRowsProblem
from dpnewton.training_rows import data_norm_map, range_map, signed_problems, training_rows


def _data(n=20_000, d=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.linspace(0.5, 20.0, d) + 3.0
    y = np.digitize(X[:, 0] + rng.standard_normal(n), [0.0, 6.0])   # three classes
    return X, y


def _fit_peak(X, y, **kw) -> float:
    """Peak bytes a fit allocates (tracemalloc sees numpy's arrays), after a warm-up fit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPLogisticRegression(random_state=0, **kw).fit(X[:300], y[:300])
        tracemalloc.start()
        try:
            DPLogisticRegression(random_state=0, **kw).fit(X, y)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


@pytest.mark.parametrize("kw", [{}, {"bounds": [(-50.0, 50.0)] * 50}, {"multi_class": "ovr"}],
                         ids=["private-ranges", "bounds", "ovr"])
def test_a_dense_fit_holds_at_most_one_working_copy_of_x(kw):
    X, y = _data()
    if "multi_class" not in kw:
        y = (y > 0).astype(int)
    peak = _fit_peak(X, y, **kw)
    assert peak <= 1.3 * X.nbytes, f"peak {peak / X.nbytes:.2f} copies of X"


@pytest.mark.parametrize("kw", [{}, {"multi_class": "ovr"}, {"fit_intercept": False},
                                {"algorithm": "dp-gd", "iterations": 20}],
                         ids=["objpert", "ovr", "no-intercept", "dp-gd"])
def test_a_dense_fit_with_a_public_data_norm_copies_nothing_of_x(kw):
    """With data_norm the problems read X in place (dpnewton.scaled_rows): what a fit allocates is vectors of
    length n (row factors, margins, gradient weights), 0.31 copies of X at d = 50, not a copy of X."""
    X, y = _data()
    if "multi_class" not in kw:
        y = (y > 0).astype(int)
    peak = _fit_peak(X, y, data_norm=1e4, **kw)
    assert peak <= 0.4 * X.nbytes, f"peak {peak / X.nbytes:.2f} copies of X"


def test_a_fit_leaves_x_unchanged_dense_and_sparse():
    X, y = _data(3000, 8)
    y = (y > 0).astype(int)
    for data in (X, sparse.csr_matrix(np.where(np.abs(X - 3) > 5, X, 0.0))):
        before = data.copy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            DPLogisticRegression(random_state=1).fit(data, y)
            DPLogisticRegression(random_state=1, data_norm=1e3).fit(data, y)
        if sparse.issparse(data):
            assert (data != before).nnz == 0
        else:
            assert np.array_equal(data, before)


@pytest.mark.parametrize("as_sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("row_map", [range_map(np.full(6, -2.0), np.full(6, 9.0), False, True),
                                     range_map(np.full(6, -2.0), np.full(6, 9.0), False, False),
                                     data_norm_map(6, 0.5, True)], ids=["ranges", "no-intercept", "data-norm"])
def test_signed_problems_equal_from_xy_of_the_rows_bit_for_bit(as_sparse, row_map):
    """Each one-vs-rest problem, drawn from one shared buffer (or, for a dense data_norm map, read from X in
    place: its rows formed by materialise()), has the bits of from_xy of the rows; rows longer than 1
    (data_norm 0.5) are projected, rows with entries beyond the ranges clipped."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5000, 6)) * 4.0
    X[np.abs(X) < 3.0] = 0.0
    if as_sparse:
        X = sparse.csr_matrix(X)
    y = rng.integers(0, 3, 5000)
    labels = [np.where(y == c, 1.0, -1.0) for c in range(3)]
    rows = training_rows(X, row_map)
    for problem, signs in zip(signed_problems(X, row_map, iter(labels)), labels):
        expected = LogisticProblem.from_xy(rows, signs).Z
        if as_sparse:
            assert problem.is_sparse and (problem.Z != expected).nnz == 0
            assert np.array_equal(problem.Z.indices, expected.indices)
        else:
            in_place = not row_map.clips()
            assert isinstance(problem, ScaledRowsProblem) == in_place
            assert np.array_equal(problem.materialise().Z if in_place else problem.Z, expected)


def test_sparse_rows_sum_duplicate_entries_before_clipping():
    """A CSR row storing feature 0 twice (3 + 4) is the value 7, clipped to the range [0, 5] as 7 is."""
    X = sparse.csr_matrix((np.array([3.0, 4.0, 1.0]), np.array([0, 0, 1]), np.array([0, 3])), shape=(1, 2))
    rows = training_rows(X, range_map(np.zeros(2), np.full(2, 5.0), False, False))
    dense = training_rows(np.array([[7.0, 1.0]]), range_map(np.zeros(2), np.full(2, 5.0), False, False))
    assert np.array_equal(rows.toarray(), dense)
