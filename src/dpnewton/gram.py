"""The weighted Gram pass of a :class:`~dpnewton.loss.LogisticProblem`: sum_i c_i z_i z_i^T over its rows Z.

The SOIs (Hessian, QU bound) and the Newton methods' fused pass (margins, gradient and SOI in one
read of Z) are this pass with the coefficients c_i of :mod:`dpnewton.margin_functions`. Dense Z is
read one block of rows at a time (the problem's reused work buffer), sparse Z by sparse products.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import special
from scipy.linalg import blas

from .margin_functions import SOI_COEFFICIENTS


def gram_pass(problem, coef: np.ndarray | None = None, w: np.ndarray | None = None,
               kind: str | None = None):
    """One blocked pass: sum_i c_i z_i z_i^T, plus (given w) the margins and gradient sum.

    With ``coef`` the weights are given. With ``w`` and ``kind`` each block's margins
    m_b = Z_b w are computed in the pass, c = SOI coefficient of m_b, and -Z_b^T sigma(-m_b)
    is accumulated while the block is in cache. Each block is scaled by sqrt(c) into a small
    reused buffer and accumulated with SYRK (upper triangle), so no copy of Z is made.
    float32: each block is one SSYRK of its own, added into the float64 sum (as are the
    float32 gradient sums of the blocks). Returns (gram, gradient sum or None, margins or None).
    Sparse Z: :func:`sparse_gram_pass`.
    """
    if problem.is_sparse:
        return sparse_gram_pass(problem, coef, w, kind)
    count, d = problem.Z.shape
    dtype = problem.Z.dtype
    single = problem.precision == "float32"
    work = problem._gram_buffer()
    block = work.shape[0]   # the problem's reused work buffer (LogisticProblem._gram_buffer)
    upper = np.zeros((d, d), order="F")
    block_upper = np.zeros((d, d), dtype=dtype, order="F") if single else None
    fused = w is not None
    w = problem._in(w) if fused else None
    g = np.zeros(d) if fused else None
    m = np.empty(count, dtype=dtype) if fused else None
    soi_coefficient = SOI_COEFFICIENTS[kind] if fused else None
    for a in range(0, count, block):
        Zb = problem.Z[a:a + block]
        scaled = work[:Zb.shape[0]]
        if fused:
            m_b = m[a:a + block]
            np.dot(Zb, w, out=m_b)
            g -= Zb.T @ special.expit(-m_b)
            root = np.sqrt(soi_coefficient(m_b))
        else:
            root = np.sqrt(coef[a:a + block])
        np.multiply(Zb, problem._in(root)[:, None], out=scaled)
        if single:
            block_upper = blas.ssyrk(1.0, scaled.T, beta=0.0, c=block_upper, trans=0, lower=0, overwrite_c=1)
            upper += block_upper
        else:
            upper = blas.dsyrk(1.0, scaled.T, beta=1.0, c=upper, trans=0, lower=0, overwrite_c=1)
    gram = np.triu(upper) + np.triu(upper, 1).T
    return gram, g, problem._out(m)


def sparse_gram_pass(problem, coef: np.ndarray | None, w: np.ndarray | None, kind: str | None):
    """:func:`gram_pass` for sparse Z, with sparse products only.

    m = Z w and the gradient sum -Z^T sigma(-m) (given w; then c = SOI coefficient of m), and
    sum_i c_i z_i z_i^T = R^T R with R = diag(sqrt(c)) Z (Z's pattern, entries scaled): one
    sparse product of at most d x d entries, made dense, its upper triangle mirrored (exactly
    symmetric, as the dense pass). Nothing of size n x d is formed. float32: float32 products, the
    results cast up.
    """
    Z = problem.Z
    g = m = None
    if w is not None:
        m = Z @ problem._in(w)
        g = -problem._out(Z.T @ special.expit(-m))
        coef = SOI_COEFFICIENTS[kind](m)
        m = problem._out(m)
    root = np.repeat(problem._in(np.sqrt(coef)), np.diff(Z.indptr))   # sqrt(c_i) per stored entry
    R = sp.csr_matrix((Z.data * root, Z.indices, Z.indptr), shape=Z.shape)
    upper = np.triu(problem._out((R.T @ R).toarray()))
    return upper + np.triu(upper, 1).T, g, m


__all__ = ["gram_pass", "sparse_gram_pass"]
