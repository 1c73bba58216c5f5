"""scipy.sparse input: the problem keeps Z as CSR and never makes it dense (loss.LogisticProblem).

* the sparse and the dense problem of the same X agree to ~1e-12 on every pass (loss, gradient,
  margins, stacked margins and gradients, Gram, SOIs, the fused Newton pass);
* a run's column of a stacked sparse pass has the same bits whatever the stack;
* ``dpnewton.fit`` on sparse X gives the dense fit's weights (same seed, same noise) for DP-GD,
  precond-DP-GD and objective perturbation, and the non-private optimum is the dense one;
* fitting a sparse X whose dense copy would need 8 GB runs under a 3 GB address-space limit;
* rows with entries near 1e300 (whose sum of squares overflows) are projected to norm 1, not 0.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import dpnewton
from dpnewton.algorithms.optimum import find_optimum
from dpnewton.loss import LogisticProblem

TOL = 1e-12


def _data(n=600, d=40, density=0.05, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: 2.0 * rng.standard_normal(k))   # many rows outside the unit ball
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.ones(d))), 1.0, -1.0)
    return X, y


@pytest.fixture(scope="module")
def pair():
    X, y = _data()
    return LogisticProblem.from_xy(X, y), LogisticProblem.from_xy(X.toarray(), y)


def test_any_sparse_format_becomes_canonical_csr():
    X, y = _data(n=50, d=8, density=0.3)
    coo = X.tocoo()
    # duplicated entries (summed) and unsorted column indices
    dup = sp.coo_matrix((np.r_[coo.data, coo.data][::-1], (np.r_[coo.row, coo.row][::-1],
                                                           np.r_[coo.col, coo.col][::-1])), shape=X.shape)
    dense = LogisticProblem.from_xy(2 * X.toarray(), y).Z
    for A in (dup, dup.tocsc(), sp.csr_array(dup), dup.astype(np.float32)):
        p = LogisticProblem.from_xy(A, y)
        assert p.is_sparse and isinstance(p.Z, sp.csr_matrix)
        assert p.Z.dtype == np.float64 and p.Z.has_sorted_indices
        np.testing.assert_allclose(p.Z.toarray(), dense, atol=1e-7 if A.dtype == np.float32 else TOL)
    assert not LogisticProblem.from_xy(X.toarray(), y).is_sparse
    direct = LogisticProblem(LogisticProblem.from_xy(X, y).Z.tocoo())     # the constructor accepts sparse Z
    assert direct.is_sparse
    with pytest.raises(ValueError, match="unit ball"):
        LogisticProblem(X * 10)


def test_passes_agree_with_dense(pair):
    ps, pd = pair
    np.testing.assert_allclose(ps.Z.toarray(), pd.Z, rtol=0, atol=TOL)
    rng = np.random.default_rng(1)
    W = rng.standard_normal((5, ps.d))
    w = W[0]
    close = dict(rtol=0, atol=TOL)
    np.testing.assert_allclose(ps.margins(w), pd.margins(w), **close)
    np.testing.assert_allclose(ps.margins(W), pd.margins(W), **close)
    np.testing.assert_allclose(ps.loss(w), pd.loss(w), **close)
    np.testing.assert_allclose(ps.loss(W), pd.loss(W), **close)
    np.testing.assert_allclose(ps.losses(W), pd.losses(W), **close)
    np.testing.assert_allclose(ps.grad(w), pd.grad(w), **close)
    (Ms, Gs), (Md, Gd) = ps.margins_and_grads(W), pd.margins_and_grads(W)
    assert Ms.shape == Md.shape and Gs.shape == Gd.shape
    np.testing.assert_allclose(Ms, Md, **close)
    np.testing.assert_allclose(Gs, Gd, **close)
    coef = rng.random(ps.n)
    np.testing.assert_allclose(ps.weighted_gram(coef), pd.weighted_gram(coef), **close)
    for kind in ("hessian", "qu"):
        Hs = ps.soi_from_margins(Ms[:, 0], kind)
        np.testing.assert_allclose(Hs, pd.soi_from_margins(Md[:, 0], kind), **close)
        assert np.array_equal(Hs, Hs.T)
        for a, b in zip(ps.newton_pass(w, kind), pd.newton_pass(w, kind)):
            np.testing.assert_allclose(a, b, **close)
    np.testing.assert_allclose(ps.accuracy(W), pd.accuracy(W), **close)
    rows = np.arange(0, ps.n, 3)
    bs, bd = ps.batch(rows), pd.batch(rows)
    assert bs.is_sparse
    np.testing.assert_allclose(bs.grad(w), bd.grad(w), **close)
    np.testing.assert_allclose(bs.hessian(w), bd.hessian(w), **close)


def test_stacked_sparse_passes_do_not_depend_on_the_stack(pair):
    ps, _ = pair
    W = np.random.default_rng(2).standard_normal((6, ps.d))
    M, G = ps.margins_and_grads(W)
    margins = ps.margins(W)
    order = np.array([3, 0, 5, 1, 4, 2])
    M_perm, G_perm = ps.margins_and_grads(W[order])
    for j in range(W.shape[0]):
        M1, G1 = ps.margins_and_grads(W[j:j + 1])
        assert np.array_equal(M1[:, 0], M[:, j]) and np.array_equal(G1[0], G[j])
        assert np.array_equal(margins[:, j], M[:, j])
        k = int(np.flatnonzero(order == j)[0])
        assert np.array_equal(M_perm[:, k], M[:, j]) and np.array_equal(G_perm[k], G[j])


@pytest.mark.parametrize("algorithm", ["dp-gd", "precond-dp-gd", "objpert"])
def test_fit_sparse_equals_dense(algorithm):
    X, y = _data()
    sparse = dpnewton.fit(X, y, algorithm=algorithm, epsilon=1, iterations=20, seed=0, excess_loss=True)
    dense = dpnewton.fit(X.toarray(), y, algorithm=algorithm, epsilon=1, iterations=20, seed=0, excess_loss=True)
    assert np.all(np.isfinite(sparse.weights))
    np.testing.assert_allclose(sparse.weights, dense.weights, rtol=0, atol=1e-8)
    assert sparse.evaluation["excess_loss"] == pytest.approx(dense.evaluation["excess_loss"], abs=1e-8)
    assert sparse.record == dense.record


def test_optimum_sparse_equals_dense(pair):
    ps, pd = pair
    a, b = find_optimum(ps), find_optimum(pd)
    assert a.converged and b.converged
    np.testing.assert_allclose(a.w, b.w, rtol=0, atol=1e-8)
    assert a.loss == pytest.approx(b.loss, abs=1e-12)


NO_DENSE_COPY = textwrap.dedent("""
    import resource
    import numpy as np, scipy.sparse as sp
    import dpnewton

    n, d, k = 2_000_000, 500, 2              # a dense n x d copy needs 8 GB; the CSR data ~50 MB
    rng = np.random.default_rng(0)
    X = sp.csr_matrix((rng.standard_normal(n * k), rng.integers(0, d, n * k), np.arange(0, n * k + 1, k)),
                      shape=(n, d))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    limit = used + (3 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:                                     # the limit does forbid a dense copy
        np.ones((n, d))
        raise SystemExit("a dense n x d array fits under the limit: the test proves nothing")
    except MemoryError:
        pass
    for algorithm in ("dp-gd", "precond-dp-gd", "objpert"):
        fit = dpnewton.fit(X, y, algorithm=algorithm, epsilon=1, delta=1e-13, iterations=5, seed=0,
                           excess_loss=algorithm == "dp-gd")     # the optimum once
        assert np.isfinite(fit.weights).all(), algorithm
    print("ok")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm, sets RLIMIT_AS")
def test_fit_never_densifies_the_data():
    """A sparse fit under an address-space limit far below the size of a dense copy of X or Z."""
    out = subprocess.run([sys.executable, "-c", NO_DENSE_COPY], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_huge_rows_are_projected_to_norm_one(sparse):
    X = np.array([[1e300, -2e300, 0.0], [0.0, 1.7e308, 1.7e308], [0.3, 0.4, 0.0], [3.0, 0.0, 4.0]])
    y = np.array([1.0, -1.0, 1.0, -1.0])
    p = LogisticProblem.from_xy(sp.csr_matrix(X) if sparse else X, y)
    Z = p.Z.toarray() if sparse else p.Z
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), [1.0, 1.0, 0.5, 1.0], rtol=1e-15)
    np.testing.assert_allclose(Z[0], [1 / np.sqrt(5), -2 / np.sqrt(5), 0.0], rtol=1e-15)
    np.testing.assert_allclose(Z[1], [0.0, -np.sqrt(0.5), -np.sqrt(0.5)], rtol=1e-15)
    np.testing.assert_array_equal(Z[2:], LogisticProblem.from_xy(X[2:], y[2:]).Z)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_non_finite_rows_are_named(sparse):
    X = np.ones((4, 3))
    X[2, 1] = np.inf
    y = np.ones(4)
    with pytest.raises(ValueError, match="row 2 of X contains NaN or inf"):
        LogisticProblem.from_xy(sp.csr_matrix(X) if sparse else X, y)
    Z = np.zeros((3, 2))
    Z[1, 0] = np.nan
    with pytest.raises(ValueError, match="row 1 of Z contains NaN"):
        LogisticProblem(sp.csr_matrix(Z) if sparse else Z)
    with pytest.raises(ValueError, match="unit ball; max norm is 1e\\+300"):
        LogisticProblem(sp.csr_matrix([[0.0, 1e300]]) if sparse else np.array([[0.0, 1e300]]))
