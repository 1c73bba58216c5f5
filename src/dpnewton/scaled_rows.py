"""A :class:`~dpnewton.loss.LogisticProblem` whose rows are read from the features X themselves, never copied.

The training rows of a public row-norm bound (:func:`dpnewton.training_rows.data_norm_map`) do not clip: with
the labels' signs and the projection onto the unit ball [P section 5; docs/algorithms.md §1.2] they are

    z_i = s_i [a x_i, b],   s_i = y_i / max(1, ||[a x_i, b]||),

a per-row factor s (n,), the scale a = 1/data_norm and the constant coordinate b (left out without an
intercept). So every pass over Z is a pass over X with vectors:

* margins    m = s * (X (a w_f) + b w_b);
* gradients  Z^T v = [a X^T (s v), b sum(s v)];
* Gram       Z^T diag(c) Z: each block's rows X_b * sqrt(c) s, with the column sqrt(c) s b, into one SYRK;
  the feature rows and columns of the sum are then multiplied by a.

The problem holds X (a reference: dense, float64, C-contiguous), s and the factors: no copy of X, where
the materialised Z of :func:`~dpnewton.training_rows.signed_problems`'s other path costs one. The passes are
blocked as the materialised problem's (the same block sizes), so they read X from memory once per pass; a
result equals the materialised problem's up to rounding (the factors are applied in another order), not
bit for bit. One-vs-rest draws the next class's problem by flipping the signs of s (exact).

float64 only: :meth:`ScaledRowsProblem.with_precision` ("float32") materialises Z. A minibatch
(:meth:`~ScaledRowsProblem.batch`) gathers its rows of Z, as the materialised problem does; the warm-start
subsample (:meth:`~ScaledRowsProblem.every_kth_row`) is a strided view of X and s.
"""

from __future__ import annotations

import numpy as np
from scipy import special
from scipy.linalg import blas

from .loss import GEMM_BLOCK_BYTES, GEMM_MIN_RUNS, GRAM_BLOCK_BYTES, LogisticProblem, row_block
from .margin_functions import SOI_COEFFICIENTS, logistic_loss_terms
from .projection import dense_row_norms, project_dense_block


def row_factors(X: np.ndarray, scale: float, b: float | None, y: np.ndarray) -> np.ndarray:
    """s_i = y_i / max(1, ||[a x_i, b]||) (a = ``scale``) for the dense rows of X, in one read of X.

    ||[a x_i, b]||^2 = a^2 sum_j x_ij^2 + b^2, the sums a row product each (no array of X's size). A row whose
    sum of squares overflows (entries beyond ~1e154) gets the norm of its scaled row from
    :func:`dpnewton.projection.dense_row_norms` (no overflow for any finite X)."""
    with np.errstate(over="ignore"):
        squares = np.einsum("ij,ij->i", X, X)
    overflow = np.flatnonzero(~np.isfinite(squares))
    squares *= scale * scale
    if b is not None:
        squares += b * b
    norms = np.sqrt(squares, out=squares)
    if overflow.size:
        rows = X[overflow] * scale
        norms[overflow] = dense_row_norms(rows if b is None else np.column_stack([rows, np.full(len(rows), b)]))
    np.maximum(norms, 1.0, out=norms)
    return np.divide(y, norms, out=norms)


class ScaledRowsProblem(LogisticProblem):
    """The logistic problem of rows z_i = s_i [a x_i, b] (module docstring), read from X in place.

    Build it with :meth:`from_features`. Every pass of :class:`~dpnewton.loss.LogisticProblem` is
    overridden with its form on X; the results are the materialised problem's up to rounding.
    """

    @classmethod
    def from_features(cls, X: np.ndarray, scale: float, b: float | None, y: np.ndarray,
                      name: str = "data") -> "ScaledRowsProblem":
        """The problem of the dense float64 C-contiguous features X (finite), scale a = ``scale`` (> 0),
        constant coordinate ``b`` (None: no intercept) and labels y in {-1, +1}; X is referenced, not copied."""
        if not (isinstance(X, np.ndarray) and X.dtype == np.float64 and X.flags.c_contiguous and X.ndim == 2):
            raise ValueError("ScaledRowsProblem needs X as a 2-D float64 C-contiguous array")
        scale = float(scale)
        problem = object.__new__(cls)
        problem._attach_rows(X, scale, b, row_factors(X, scale, b, np.asarray(y, dtype=np.float64)), name)
        return problem

    def _attach_rows(self, X: np.ndarray, scale: float, b: float | None, s: np.ndarray, name: str) -> None:
        """Every field (those of :meth:`LogisticProblem._attach` but Z, and the row factors)."""
        self.X, self.scale, self.b, self.s = X, scale, b, s
        self.is_sparse = False
        self.precision = "float64"
        self.name = name
        self.n = X.shape[0]
        self.d = X.shape[1] + (b is not None)
        self.w_opt: np.ndarray | None = None
        self.loss_opt: float | None = None
        self._work = None

    @property
    def Z(self):
        raise AttributeError("a ScaledRowsProblem never forms Z; use its passes, or materialise() for a copy")

    def flip_signs(self, flip: np.ndarray) -> None:
        """s <- flip * s (flip in {-1, +1}): the problem of the next label vector (exact)."""
        self.s *= flip

    # ---- rows as Z -----------------------------------------------------------------------------
    def _features(self) -> int:
        return self.X.shape[1]

    def rows(self, index) -> np.ndarray:
        """The rows Z[index] as a new array (a slice or index array of rows): [a x_i, b] signed and
        projected by :func:`~dpnewton.projection.project_dense_block`, the materialised path's bits."""
        d = self._features()
        X = self.X[index]
        out = np.empty((X.shape[0], self.d))
        np.multiply(X, self.scale, out=out[:, :d])
        if self.b is not None:
            out[:, d] = self.b
        project_dense_block(out, np.sign(self.s[index]), out)
        return out

    def materialise(self) -> LogisticProblem:
        """The same problem with Z formed (one copy of X); its optimum carried over."""
        out = LogisticProblem.from_projected(self.rows(slice(None)), self.name)
        out.w_opt, out.loss_opt = self.w_opt, self.loss_opt
        return out

    def batch(self, rows: np.ndarray) -> LogisticProblem:
        """The minibatch Z_B gathered once as a materialised problem (as :meth:`LogisticProblem.batch`)."""
        sub = object.__new__(LogisticProblem)
        sub._attach(self.rows(rows), self.name, work=self._gram_buffer())
        return sub

    def every_kth_row(self, k: int) -> "ScaledRowsProblem":
        """Rows 0, k, 2k, ...: strided views of X and s (no copy)."""
        sub = object.__new__(ScaledRowsProblem)
        sub._attach_rows(self.X[::k], self.scale, self.b, self.s[::k], self.name)
        sub._work = self._gram_buffer()
        return sub

    def with_precision(self, precision: str) -> LogisticProblem:
        """Itself for float64; float32 materialises Z first (:meth:`LogisticProblem.with_precision`)."""
        return self if precision == "float64" else self.materialise().with_precision(precision)

    def _gram_buffer(self) -> np.ndarray:
        if self._work is None:
            self._work = np.empty((row_block(self.d, GRAM_BLOCK_BYTES), self.d))
        return self._work

    def _split(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a * feature weights, b * intercept weight) of w (p,) or of a stack W (S, p)."""
        d = self._features()
        W = np.asarray(W, dtype=np.float64)
        shift = (W[..., d] * self.b) if self.b is not None else np.zeros(W.shape[:-1])
        return W[..., :d] * self.scale, shift

    # ---- margins, losses and gradients -------------------------------------------------------
    def margins(self, w: np.ndarray) -> np.ndarray:
        """m = Z w (n,) for one w, or Z W^T (n, S) for a stack (per block and run, as the base class)."""
        wf, shift = self._split(w)
        if wf.ndim == 1:
            m = self.X @ wf
            m += shift
            m *= self.s
            return m
        Mt = np.empty((wf.shape[0], self.n))
        block = row_block(self.d)
        for a in range(0, self.n, block):
            Xb, sb = self.X[a:a + block], self.s[a:a + block]
            for j in range(wf.shape[0]):
                m = Mt[j, a:a + block]
                np.dot(Xb, wf[j], out=m)
                m += shift[j]
                m *= sb
        return Mt.T

    def losses(self, points: np.ndarray) -> np.ndarray:
        """l(w) for every row of ``points`` (k, p), chunks of d/4 points (8 to 256) as the base class."""
        wf, shift = self._split(np.atleast_2d(points))
        chunk = int(min(256, max(8, self.d // 4)))
        out = np.empty(wf.shape[0])
        for a in range(0, wf.shape[0], chunk):
            margins = wf[a:a + chunk] @ self.X.T
            margins += shift[a:a + chunk, None]
            margins *= self.s
            out[a:a + chunk] = [logistic_loss_terms(row).mean() for row in margins]
        return out

    def _gradient_sum(self, Xb: np.ndarray, V: np.ndarray) -> np.ndarray:
        """[X_b^T v, b sum v] for one run (v (rows,)), or per run for a stack (V (S, rows)): Z_b^T v
        without the scale a, v already multiplied by the block's s."""
        head = V @ Xb
        if self.b is None:
            return head
        return np.concatenate([head, self.b * np.sum(V, axis=-1, keepdims=True)], axis=-1)

    def _scaled(self, g: np.ndarray) -> np.ndarray:
        """Multiply the feature part of a gradient (sum) by the scale a in place."""
        g[..., :self._features()] *= self.scale
        return g

    def grad_from_margins(self, m: np.ndarray) -> np.ndarray:
        """g = -(1/n) Z^T sigma(-m) = -(1/n) [a X^T (s sigma(-m)), b sum(s sigma(-m))]."""
        v = special.expit(-m)
        v *= self.s
        return -self._scaled(self._gradient_sum(self.X, v)) / self.n

    def margins_and_grads(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Z W^T (n, S), mean gradients (S, p)) in one blocked pass over X: per run and block below
        :data:`~dpnewton.loss.GEMM_MIN_RUNS` runs (blocks of :data:`~dpnewton.loss.GRAM_BLOCK_BYTES`: a
        block's handful of vector operations per run cost more than its cache misses below that), two
        matrix products per block from there on."""
        wf, shift = self._split(W)
        S, gemm = wf.shape[0], wf.shape[0] >= GEMM_MIN_RUNS
        Mt = np.empty((S, self.n))
        G = np.zeros((S, self.d))
        Gf = G[:, :self._features()]
        block = row_block(self.d, GEMM_BLOCK_BYTES if gemm else GRAM_BLOCK_BYTES)
        for a in range(0, self.n, block):
            Xb, sb = self.X[a:a + block], self.s[a:a + block]
            Mb = Mt[:, a:a + block]
            if gemm:
                np.matmul(wf, Xb.T, out=Mb)
                Mb += shift[:, None]
                Mb *= sb
                V = special.expit(-Mb)
                V *= sb
                Gf -= V @ Xb
                if self.b is not None:
                    G[:, -1] -= V.sum(axis=1)
                continue
            for j in range(S):
                m = Mb[j]
                np.dot(Xb, wf[j], out=m)
                m += shift[j]
                m *= sb
                v = special.expit(-m)
                v *= sb
                Gf[j] -= v @ Xb
                if self.b is not None:
                    G[j, -1] -= v.sum()
        if self.b is not None:
            G[:, -1] *= self.b
        return Mt.T, self._scaled(G) / self.n

    # ---- second-order information -------------------------------------------------------------
    def _gram_pass(self, coef: np.ndarray | None = None, w: np.ndarray | None = None, kind: str | None = None):
        """:func:`dpnewton.gram.gram_pass` on X: each block's rows X_b * sqrt(c) s and the column
        sqrt(c) s b in the reused buffer, one SYRK per block (upper triangle); the feature rows and
        columns of the sum multiplied by a at the end. Returns (gram sum, gradient sum or None,
        margins or None)."""
        d, p, n = self._features(), self.d, self.n
        work = self._gram_buffer()
        upper = np.zeros((p, p), order="F")
        fused = w is not None
        if fused:
            wf, shift = self._split(w)
            g, m = np.zeros(p), np.empty(n)
        for a in range(0, n, work.shape[0]):
            Xb, sb = self.X[a:a + work.shape[0]], self.s[a:a + work.shape[0]]
            if fused:
                m_b = m[a:a + work.shape[0]]
                np.dot(Xb, wf, out=m_b)
                m_b += shift
                m_b *= sb
                v = special.expit(-m_b)
                v *= sb
                g -= self._gradient_sum(Xb, v)
                factor = np.sqrt(SOI_COEFFICIENTS[kind](m_b))
            else:
                factor = np.sqrt(coef[a:a + work.shape[0]])
            factor *= sb
            rows = work[:Xb.shape[0]]
            np.multiply(Xb, factor[:, None], out=rows[:, :d])
            if self.b is not None:
                np.multiply(factor, self.b, out=rows[:, d])
            upper = blas.dsyrk(1.0, rows.T, beta=1.0, c=upper, trans=0, lower=0, overwrite_c=1)
        gram = np.triu(upper) + np.triu(upper, 1).T
        gram[:d] *= self.scale
        gram[:, :d] *= self.scale
        return gram, (self._scaled(g) if fused else None), (m if fused else None)

    def weighted_gram(self, coef: np.ndarray) -> np.ndarray:
        """(1/n) Z^T diag(coef) Z for coef >= 0 (:meth:`_gram_pass`)."""
        return self._gram_pass(coef=coef)[0] / self.n

    def newton_pass(self, w: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(margins Z w, gradient, SOI) at w in one fused pass over X (:meth:`_gram_pass`)."""
        if kind not in SOI_COEFFICIENTS:
            raise ValueError(f"soi={kind!r} is unknown; choose 'hessian' or 'qu'")
        gram, g, m = self._gram_pass(w=w, kind=kind)
        return m, g / self.n, gram / self.n


__all__ = ["ScaledRowsProblem", "row_factors"]
