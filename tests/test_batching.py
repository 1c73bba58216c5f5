"""Batching must not change any bit of any run (properties, never timings).

* DP-GD and DP-GD-Oracle: seeds run together == one by one == in shuffled order, also with runs of
  different T dropping out of the batch; Hess-clip likewise.
* The BLAS property the batching relies on (loss.lane_product): on this machine, a column of a
  lane-padded product has the same bits whatever the batch width and the column's position.
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dpnewton.experiment import run_algorithm
from dpnewton.loss import LANE_WIDTH, LogisticProblem, lane_product


def _problem(n=1500, d=13, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.ones(d))), 1.0, -1.0)
    p = LogisticProblem.from_xy(X, y, name="toy")
    p.set_optimum(np.zeros(d))  # any reference point: only bit-equality is checked
    return p


@pytest.fixture(scope="module")
def problem():
    return _problem()


def _by_key(results):
    return {(r.identity.seed, r.identity.iterations): r for r in results}


def _assert_same(a, b, losses=False):
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k].w, b[k].w), f"w differs for {k}"
        assert a[k].resets == b[k].resets
        if losses:
            assert np.array_equal(a[k].excess_loss, b[k].excess_loss, equal_nan=True), f"loss differs for {k}"


CASES = [("dp-gd", [4, 9]), ("dp-gd-oracle", [3, 5]), ("hess-clip", [2, 3])]


def _three_ways(problem, algorithm, Ts):
    seeds = [0, 1, 2, 3, 4]
    together = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, seeds, Ts))
    alone = {}
    for s in seeds:
        for T in Ts:
            alone.update(_by_key(run_algorithm(problem, "toy", algorithm, 1.0, [s], T)))
    shuffled = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, [3, 0, 4, 2, 1], Ts[::-1]))
    return together, alone, shuffled


@pytest.mark.parametrize("algorithm,Ts", CASES)
def test_batch_iterates_equal_sequential_and_shuffled(problem, algorithm, Ts):
    together, alone, shuffled = _three_ways(problem, algorithm, Ts)
    _assert_same(together, alone)
    _assert_same(together, shuffled)


@pytest.mark.parametrize("algorithm,Ts", CASES)
def test_batch_losses_equal_sequential_and_shuffled(problem, algorithm, Ts):
    together, alone, shuffled = _three_ways(problem, algorithm, Ts)
    _assert_same(together, alone, losses=True)
    _assert_same(together, shuffled, losses=True)


def test_batch_of_many_runs_spans_several_lanes(problem):
    """More runs than 2 lanes (S = 2*LANE_WIDTH + 3) and a sub-batch in another position."""
    seeds = list(range(2 * LANE_WIDTH + 3))
    big = _by_key(run_algorithm(problem, "toy", "dp-gd", 0.5, seeds, 6))
    part = _by_key(run_algorithm(problem, "toy", "dp-gd", 0.5, seeds[5:8], 6))
    _assert_same({k: big[k] for k in part}, part)


def _column_independent(A, rng, widths):
    """Every column of lane_product(A, B[:, cols]) equals lane_product(A, B[:, [j]]) bit for bit."""
    max_s = max(widths)
    B = rng.standard_normal((A.shape[1], max_s))
    alone = [lane_product(A, B[:, [j]])[:, 0] for j in range(max_s)]
    for S in widths:
        cols = list(range(S))
        for order in (cols, cols[::-1], list(rng.permutation(S))):
            out = lane_product(A, B[:, order])
            for pos, j in enumerate(order):
                if not np.array_equal(out[:, pos], alone[j]):
                    return False, (S, pos, j)
    return True, None


# d = 1 (Z^T a single row, which numpy would route to gemv) has its own test below.
@pytest.mark.parametrize("n,d", [(1500, 13), (1001, 124), (2048, 75), (777, 2)])
def test_lane_padding_property_of_blas(n, d):
    """The property lane_product relies on, for both products a step does (Z @ B and Z^T @ S)."""
    rng = np.random.default_rng(n + d)
    Z = rng.standard_normal((n, d)) / np.sqrt(d)
    widths = sorted({1, 2, 3, LANE_WIDTH - 1, LANE_WIDTH, LANE_WIDTH + 1, 2 * LANE_WIDTH + 3} - {0})
    with threadpool_limits(1):
        for A in (Z, Z.T):
            ok, where = _column_independent(A, rng, widths)
            assert ok, f"column bits depend on batch width/position (S, pos, col) = {where} for A {A.shape}"


def test_lane_padding_single_feature():
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((777, 1))
    with threadpool_limits(1):
        ok, where = _column_independent(Z.T, rng, [1, 2, LANE_WIDTH, LANE_WIDTH + 1])
    assert ok, where


def test_lane_product_matches_matmul():
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((300, 20)), rng.standard_normal((20, 5))
    np.testing.assert_allclose(lane_product(A, B), A @ B, rtol=1e-12, atol=1e-12)
    assert lane_product(A, B).shape == (300, 5)
