"""Logistic loss, gradient, Hessian and the quadratic-upper-bound SOI."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import special

from dpnewton.loss import LogisticProblem
from dpnewton.margin_functions import hessian_coefficient, logistic_loss_terms, qu_coefficient
from tests.conftest import make_problem


def test_rows_are_projected_into_unit_ball():
    X = np.array([[3.0, 4.0], [0.3, 0.4]])
    p = LogisticProblem.from_xy(X, np.array([1.0, -1.0]))
    np.testing.assert_allclose(p.Z, [[0.6, 0.8], [-0.3, -0.4]])


def test_loss_known_values():
    p = LogisticProblem.from_xy(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0, 1.0]))
    assert p.loss(np.zeros(2)) == pytest.approx(np.log(2.0), rel=1e-15)
    w = np.array([2.0, -1.0])
    expected = 0.5 * (np.log1p(np.exp(-2.0)) + np.log1p(np.exp(1.0)))
    assert p.loss(w) == pytest.approx(expected, rel=1e-14)


def test_gradient_and_hessian_match_finite_differences(toy_problem):
    rng = np.random.default_rng(1)
    p = toy_problem
    for _ in range(3):
        w = rng.standard_normal(p.d) * 2
        h = 1e-6
        fd_grad = np.array([(p.loss(w + h * e) - p.loss(w - h * e)) / (2 * h) for e in np.eye(p.d)])
        np.testing.assert_allclose(p.grad(w), fd_grad, rtol=1e-6, atol=1e-9)
        fd_hess = np.array([(p.grad(w + h * e) - p.grad(w - h * e)) / (2 * h) for e in np.eye(p.d)])
        np.testing.assert_allclose(p.hessian(w), fd_hess, rtol=1e-5, atol=1e-8)


def test_batch_is_the_subproblem_of_its_rows(toy_problem):
    rows = np.arange(0, toy_problem.n, 3)
    batch = toy_problem.batch(rows)
    w = np.linspace(-1, 1, toy_problem.d)
    assert (batch.n, batch.d) == (rows.size, toy_problem.d)
    by_hand = np.logaddexp(0.0, -(toy_problem.Z[rows] @ w)).mean()
    assert batch.loss(w) == pytest.approx(by_hand, rel=1e-14)
    c = hessian_coefficient(toy_problem.Z[rows] @ w)
    np.testing.assert_allclose(batch.hessian(w), (toy_problem.Z[rows].T * c) @ toy_problem.Z[rows] / rows.size,
                               rtol=1e-12)
    assert batch._work is toy_problem._work  # the Gram buffer is shared, not reallocated per step


def test_losses_of_many_points_match_one_at_a_time(toy_problem):
    points = np.random.default_rng(3).standard_normal((300, toy_problem.d))  # several chunks
    one_at_a_time = np.array([toy_problem.loss(w) for w in points])
    np.testing.assert_allclose(toy_problem.losses(points), one_at_a_time, rtol=1e-13)


def test_stable_for_huge_margins():
    m = np.array([-1e4, -800.0, -710.0, 0.0, 710.0, 800.0, 1e4])
    loss = logistic_loss_terms(m)
    assert np.isfinite(loss).all()
    assert loss[0] == 1e4 and loss[1] == 800.0 and loss[3] == np.log(2.0) and loss[-1] == 0.0
    assert loss[4] == pytest.approx(np.exp(-710.0), rel=1e-6)  # subnormal, not rounded to 0
    assert np.isfinite(hessian_coefficient(m)).all()
    q = qu_coefficient(m)
    assert np.isfinite(q).all() and q[-1] == pytest.approx(0.5 / 1e4)
    p = LogisticProblem(np.array([[1.0, 0.0], [0.0, -1.0]]))
    w = np.array([1e4, 1e4])
    assert np.isfinite(p.loss(w)) and np.isfinite(p.grad(w)).all() and np.isfinite(p.hessian(w)).all()


def test_logistic_loss_terms_match_logaddexp_to_rounding():
    """max(-m, 0) + log1p(exp(-|m|)) is the split np.logaddexp(0, -m) makes; only the last bit may differ."""
    rng = np.random.default_rng(5)
    m = np.concatenate([rng.standard_normal(20000) * s for s in (1e-9, 1e-3, 1.0, 10.0, 300.0)])
    np.testing.assert_allclose(logistic_loss_terms(m), np.logaddexp(0.0, -m), rtol=1e-15, atol=0)
    X = rng.standard_normal((500, 4))
    p = LogisticProblem(X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None])
    w = rng.standard_normal(4)
    assert p.loss(w) == pytest.approx(np.logaddexp(0.0, -(p.Z @ w)).mean(), rel=1e-15)


def test_qu_coefficient_near_zero_is_one_quarter():
    m = np.array([0.0, 1e-12, -1e-9, 1e-6, 1e-4, 1e-3])
    exact = (special.expit(m[3:]) - 0.5) / m[3:]
    q = qu_coefficient(m)
    assert q[0] == 0.25 and q[1] == pytest.approx(0.25, abs=1e-15)
    np.testing.assert_allclose(q[3:], exact, rtol=1e-9)
    # the form (sigma(m) - 1/2)/m (docs/algorithms.md §1.1) agrees with tanh(m/2)/(2m) away from 0
    m = np.linspace(0.01, 50, 200)
    np.testing.assert_allclose(qu_coefficient(m), (special.expit(m) - 0.5) / m, rtol=1e-12)


def test_qu_is_global_upper_bound():
    """Lemma 5.1: l(w) <= l(v) + <g(v), w - v> + 1/2 (w - v)^T H_qu(v) (w - v) everywhere."""
    p = make_problem(n=200, d=4, seed=3)
    rng = np.random.default_rng(7)
    for _ in range(200):
        v = rng.standard_normal(p.d) * rng.choice([0.1, 1.0, 10.0])
        w = v + rng.standard_normal(p.d) * rng.choice([0.1, 1.0, 10.0, 100.0])
        diff = w - v
        bound = p.loss(v) + p.grad(v) @ diff + 0.5 * diff @ p.qu(v) @ diff
        assert p.loss(w) <= bound + 1e-12


def test_qu_dominates_hessian_and_both_bounded_by_quarter(toy_problem):
    w = np.random.default_rng(2).standard_normal(toy_problem.d) * 3
    gap = np.linalg.eigvalsh(toy_problem.qu(w) - toy_problem.hessian(w))
    assert gap.min() >= -1e-15
    assert np.linalg.eigvalsh(toy_problem.qu(w)).max() <= 0.25 + 1e-15


def test_rejects_bad_inputs():
    with pytest.raises(ValueError, match="labels"):
        LogisticProblem.from_xy(np.ones((2, 2)), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="NaN"):
        LogisticProblem(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="unit ball"):
        LogisticProblem(np.array([[2.0, 0.0]]))


@pytest.mark.parametrize("sparse", [False, True])
def test_from_xy_without_copy_scales_in_place_to_the_same_bits(sparse):
    import scipy.sparse as sp
    rng = np.random.default_rng(7)
    X = rng.standard_normal((3000, 7)) * rng.uniform(0.1, 3.0, size=(3000, 1))   # rows inside and outside the ball
    X[5] = [1e300, 0, 0, 0, 0, 0, 1e300]                                          # a row whose sum of squares overflows
    y = np.where(rng.random(3000) < 0.5, 1.0, -1.0)
    with np.errstate(over="ignore"):
        factor = y / np.maximum(1.0, np.linalg.norm(X, axis=1))                   # the formula, over all of X at once
    expected = factor[:, None] * X
    expected[5] = y[5] * np.array([1, 0, 0, 0, 0, 0, 1]) / np.sqrt(2.0)
    A = sp.csr_matrix(X) if sparse else X.copy()
    kept = LogisticProblem.from_xy(A, y)
    inplace = LogisticProblem.from_xy(A, y, copy=False)
    Z1, Z2 = (q.Z.toarray() if sparse else q.Z for q in (kept, inplace))
    np.testing.assert_array_equal(Z1, Z2)
    np.testing.assert_array_equal(np.delete(Z1, 5, axis=0), np.delete(expected, 5, axis=0))
    np.testing.assert_allclose(Z1[5], expected[5], rtol=1e-15)
    if sparse:
        assert np.shares_memory(inplace.Z.data, A.data) and not np.shares_memory(kept.Z.data, A.data)
    else:
        assert np.shares_memory(inplace.Z, A) and not np.shares_memory(kept.Z, A)


def test_every_kth_row_is_a_view_with_the_subproblems_passes(toy_problem):
    p, k = toy_problem, 8
    sub = p.every_kth_row(k)
    assert np.shares_memory(sub.Z, p.Z) and sub.n == len(range(0, p.n, k))
    ref = p.batch(np.arange(0, p.n, k))
    w = np.linspace(-1, 1, p.d)
    np.testing.assert_allclose(sub.margins(w), ref.margins(w), rtol=0, atol=1e-15)
    np.testing.assert_allclose(sub.grad(w), ref.grad(w), rtol=0, atol=1e-15)
    np.testing.assert_allclose(sub.hessian(w), ref.hessian(w), rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype, bound", [(np.float64, 2.3e-16), (np.float32, 6.5e-8)])
def test_tanh_sigmoid_is_expit_to_its_absolute_error(dtype, bound):
    """sigma(-m) in the tanh form against float64 expit: absolute error within the dtype's bound, every value
    in [0, 1] (a row's gradient term keeps norm <= 1), and sigma(-m) + sigma(m) = 1 up to one rounding."""
    from dpnewton.margin_functions import sigmoid_of_negative

    m = np.concatenate([np.linspace(-60.0, 60.0, 200_001), [0.0, -1e30, 1e30]]).astype(dtype)
    s = sigmoid_of_negative(m)
    assert s.dtype == dtype
    assert np.abs(s.astype(np.float64) - special.expit(-m.astype(np.float64))).max() <= bound
    assert s.min() >= 0.0 and s.max() <= 1.0 and s[-3] == 0.5
    assert np.abs(s + sigmoid_of_negative(-m) - 1.0).max() <= np.finfo(dtype).eps


def test_a_float32_gram_block_has_at_least_two_rows_per_column():
    from dpnewton.loss import FLOAT32_GRAM_ROWS_PER_COLUMN, GRAM_BLOCK_BYTES, row_block

    for d in (20, 123, 784):
        Z = np.random.default_rng(d).standard_normal((3000, d)) / (2 * np.sqrt(d))
        wide, single = LogisticProblem(Z), LogisticProblem(Z, precision="float32")
        assert wide._gram_buffer().shape[0] == row_block(d, GRAM_BLOCK_BYTES)
        rows = max(row_block(d, GRAM_BLOCK_BYTES, 4), FLOAT32_GRAM_ROWS_PER_COLUMN * d)
        assert single._gram_buffer().shape[0] == rows and (d < 784 or rows == 2 * d)
        assert_allclose(single.weighted_gram(np.full(3000, 0.2)), wide.weighted_gram(np.full(3000, 0.2)),
                        rtol=0, atol=1e-6)
