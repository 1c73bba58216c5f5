"""The problem that reads X in place (dpnewton.scaled_rows): every pass equals the materialised problem's
(the same rows formed as Z) to rounding, its rows are the materialised rows bit for bit, one-vs-rest flips
are exact, and a fit with a public data_norm copies nothing of X."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpnewton.loss import GEMM_MIN_RUNS
from dpnewton.projection import signed_projection
from dpnewton.scaled_rows import ScaledRowsProblem

ROUNDING = 1e-12   # relative to the largest entry: the factors are applied in another order


def _case(b, n=3000, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.uniform(0.1, 3.0, d)
    X[5] *= 1e200                       # a row whose sum of squares overflows: projected all the same
    X[6] = 0.0                          # a row of zeros (norm b, or 0 without intercept)
    scale = 0.3
    y = rng.choice([-1.0, 1.0], n)
    return rng, X, scale, y


def _close(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert_allclose(actual, expected, rtol=0, atol=ROUNDING * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("b", [0.4, None], ids=["intercept", "no-intercept"])
def test_rows_are_the_projection_of_the_scaled_rows_bit_for_bit(b):
    _, X, scale, y = _case(b)
    rows = X * scale if b is None else np.column_stack([X * scale, np.full(len(X), b)])
    problem = ScaledRowsProblem.from_features(X, scale, b, y)
    assert_array_equal(problem.materialise().Z, signed_projection(rows, y))
    assert problem.d == rows.shape[1] and problem.n == len(X)
    with pytest.raises(AttributeError, match="never forms Z"):
        problem.Z


@pytest.mark.parametrize("b", [0.4, None], ids=["intercept", "no-intercept"])
def test_every_pass_equals_the_materialised_problem(b):
    rng, X, scale, y = _case(b)
    problem = ScaledRowsProblem.from_features(X, scale, b, y)
    Z = problem.materialise()
    w = rng.standard_normal(problem.d)
    _close(problem.margins(w), Z.margins(w))
    for S in (1, 3, GEMM_MIN_RUNS, 2 * GEMM_MIN_RUNS):
        W = rng.standard_normal((S, problem.d))
        _close(problem.margins(W), Z.margins(W))
        for got, want in zip(problem.margins_and_grads(W), Z.margins_and_grads(W)):
            _close(got, want)
        _close(problem.losses(W), Z.losses(W))
    _close(problem.loss(w), Z.loss(w))
    _close(problem.grad(w), Z.grad(w))
    _close(problem.hessian(w), Z.hessian(w))
    _close(problem.qu(w), Z.qu(w))
    for kind in ("hessian", "qu"):
        for got, want in zip(problem.newton_pass(w, kind), Z.newton_pass(w, kind)):
            _close(got, want)
    assert problem.accuracy(w) == Z.accuracy(w)
    with pytest.raises(ValueError, match="unknown"):
        problem.newton_pass(w, "nope")


def test_subsample_batch_and_precision_are_the_materialised_problems():
    rng, X, scale, y = _case(0.4, n=5000)
    problem = ScaledRowsProblem.from_features(X, scale, 0.4, y)
    Z = problem.materialise()
    w = rng.standard_normal(problem.d)
    sub, want = problem.every_kth_row(8), Z.every_kth_row(8)
    assert isinstance(sub, ScaledRowsProblem) and np.shares_memory(sub.X, X)      # a view, no copy
    for got, expected in zip(sub.newton_pass(w, "hessian"), want.newton_pass(w, "hessian")):
        _close(got, expected)
    rows = rng.choice(len(X), 64, replace=False)
    assert_array_equal(problem.batch(rows).Z, Z.batch(rows).Z)
    assert problem.with_precision("float64") is problem
    assert_array_equal(problem.with_precision("float32").Z, Z.with_precision("float32").Z)


def test_flipping_signs_gives_the_next_labels_problem_exactly():
    rng, X, scale, y = _case(0.4)
    problem = ScaledRowsProblem.from_features(X, scale, 0.4, y)
    following = rng.choice([-1.0, 1.0], len(X))
    problem.flip_signs(y * following)
    assert_array_equal(problem.materialise().Z, ScaledRowsProblem.from_features(X, scale, 0.4, following)
                       .materialise().Z)


def test_only_float64_c_contiguous_features_are_read_in_place():
    _, X, scale, y = _case(0.4)
    for bad in (np.asfortranarray(X), np.ones(X.shape, dtype=np.float32), X[:, :3]):
        with pytest.raises(ValueError, match="float64 C-contiguous"):
            ScaledRowsProblem.from_features(bad, scale, 0.4, y)


def test_building_the_problem_copies_nothing_of_x():
    """The problem references X; building it allocates the row factors (one vector of length n) and a mask of
    n bytes (rows whose sum of squares overflowed) only."""
    _, X, scale, y = _case(0.4, n=200_000, d=40)
    tracemalloc.start()
    try:
        problem = ScaledRowsProblem.from_features(X, scale, 0.4, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problem.X is X
    assert peak < 1.3 * problem.s.nbytes, f"{peak / problem.s.nbytes:.2f} vectors of length n"
