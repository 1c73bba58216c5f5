"""Logistic loss and its second-order information on the prepared matrix Z.

Data model [P section 5; paper_spec 1.2]: records (x_i, y_i) with y_i in {-1, +1} become signed,
projected rows z_i = y_i x_i / max(1, ||x_i||), so ||z_i|| <= 1 (the unit ball the privacy
analysis assumes). With margins m_i = <z_i, w>:

* loss      l(w)    = (1/n) sum_i log(1 + exp(-m_i))             (np.logaddexp: no overflow)
* gradient  g(w)    = -(1/n) sum_i sigma(-m_i) z_i               (sigma = scipy.special.expit)
* Hessian   H(w)    = (1/n) sum_i sigma(m_i) sigma(-m_i) z_i z_i^T
* QU SOI    H_qu(w) = (1/n) sum_i q(m_i) z_i z_i^T,  q(m) = tanh(m/2)/(2m) = (sigma(m) - 1/2)/m,
  q(0) = 1/4, the global quadratic upper bound of Lemma 5.1 [P section 5.3].

Both SOIs are sums of PSD rank-one terms with eigenvalue <= 1/4 (Remark 5.3), which gives the
sensitivities used in the optimizers. Every function takes an optional index array ``rows`` (a
minibatch); the mean is then over those rows.

Batched products with Z (a stack of runs) go through :func:`lane_product`, which keeps results
bit-identical whether a run is computed alone or batched with others (see its docstring).
"""

from __future__ import annotations

import numpy as np
from scipy import special
from scipy.linalg import blas

LANE_WIDTH = 8
"""Columns of the run axis are padded to a multiple of this width before a BLAS product.

BLAS kernels compute each column of a matrix-matrix product independently, but a matrix-vector
product (gemv) and the remainder columns of gemm use other kernels with another summation order.
Padding every batch to full lanes makes each run's column go through the same kernel whatever the
batch size or its position in the batch (checked by tests/test_batching.py).
"""


def lane_product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B for B of shape (k, S), computed on S padded up to a multiple of LANE_WIDTH columns."""
    S = B.shape[1]
    width = -(-max(S, 1) // LANE_WIDTH) * LANE_WIDTH
    if width != S:
        padded = np.zeros((B.shape[0], width), dtype=np.float64)
        padded[:, :S] = B
        B = padded
    rows = A.shape[0]
    if rows == 1:  # numpy sends a one-row A to gemv; a zero second row keeps it on gemm
        A = np.vstack([A, np.zeros_like(A)])
    return (A @ B)[:rows, :S]


def qu_coefficient(m: np.ndarray) -> np.ndarray:
    """q(m) = tanh(m/2)/(2m) with q(0) = 1/4 (Lemma 5.1); series 1/4 - m^2/48 for |m| < 1e-4."""
    m = np.asarray(m, dtype=np.float64)
    small = np.abs(m) < 1e-4
    safe = np.where(small, 1.0, m)
    return np.where(small, 0.25 - m * m / 48.0, np.tanh(0.5 * safe) / (2.0 * safe))


def hessian_coefficient(m: np.ndarray) -> np.ndarray:
    """c(m) = sigma(m) sigma(-m) = 1/(4 cosh^2(m/2)), stable for any |m|."""
    return special.expit(m) * special.expit(-m)


SOI_COEFFICIENTS = {"hessian": hessian_coefficient, "qu": qu_coefficient}


class LogisticProblem:
    """Average logistic loss over the signed, projected rows Z (n x d).

    Build it with :meth:`from_xy` (projects rows) or directly from an existing Z.
    ``optimum`` (w*, loss*) may be attached for excess-loss evaluation.
    """

    def __init__(self, Z: np.ndarray, name: str = "data"):
        Z = np.ascontiguousarray(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[0] == 0 or Z.shape[1] == 0:
            raise ValueError(f"Z must be a non-empty 2-D array, got shape {Z.shape}")
        if not np.isfinite(Z).all():
            raise ValueError("Z contains NaN or inf; clean the data before building the problem")
        norms = np.linalg.norm(Z, axis=1)
        if norms.max() > 1.0 + 1e-12:
            raise ValueError(f"rows of Z must lie in the unit ball; max norm is {norms.max():.6g}")
        self.Z = Z
        self.name = name
        self.n, self.d = Z.shape
        self.w_opt: np.ndarray | None = None
        self.loss_opt: float | None = None
        self._work: np.ndarray | None = None

    @classmethod
    def from_xy(cls, X: np.ndarray, y: np.ndarray, name: str = "data") -> "LogisticProblem":
        """z_i = y_i x_i / max(1, ||x_i||) (paper_spec 1.2: per-row projection onto the unit ball)."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or y.shape != (X.shape[0],):
            raise ValueError(f"X must be (n, d) and y (n,); got {X.shape} and {y.shape}")
        labels = set(np.unique(y).tolist())
        if not labels <= {-1.0, 1.0}:
            raise ValueError(f"labels must be -1/+1, found values {sorted(labels)[:5]}")
        scale = np.maximum(1.0, np.linalg.norm(X, axis=1))
        return cls((y / scale)[:, None] * X, name=name)

    def set_optimum(self, w_opt: np.ndarray, loss_opt: float | None = None) -> None:
        self.w_opt = np.asarray(w_opt, dtype=np.float64)
        self.loss_opt = float(self.loss(self.w_opt)) if loss_opt is None else float(loss_opt)

    # ---- rows / margins ---------------------------------------------------------------------
    def rows(self, rows=None) -> np.ndarray:
        return self.Z if rows is None else self.Z[rows]

    def margins(self, w: np.ndarray, rows=None) -> np.ndarray:
        """m = Z w (n,) for one w (gemv), or Z W^T (n, S) for a stack W (S, d) (lane-padded gemm).

        An optimizer uses one of the two forms for all its runs, so its results never depend on
        how runs are batched: per-run optimizers (a Hessian pass per run dominates) use vectors,
        batched first-order optimizers always pass stacks, even of one run.
        """
        Zr = self.rows(rows)
        if w.ndim == 1:
            return Zr @ w
        return lane_product(Zr, w.T)

    # ---- loss and gradient ------------------------------------------------------------------
    @staticmethod
    def loss_from_margins(m: np.ndarray) -> np.ndarray:
        """Mean over rows of log(1 + exp(-m)); m may be (n,) or (n, S).

        For a stack, each run's terms are summed as one contiguous row (the same pairwise sum as
        for a single run), so a run's loss does not depend on how many runs share the batch.
        """
        if m.ndim == 1:
            return np.logaddexp(0.0, -m).mean()
        return np.logaddexp(0.0, -np.ascontiguousarray(m.T)).mean(axis=1)

    def loss(self, w: np.ndarray, rows=None) -> float | np.ndarray:
        return self.loss_from_margins(self.margins(w, rows))

    def excess_loss(self, w: np.ndarray) -> float | np.ndarray:
        if self.loss_opt is None:
            raise ValueError("the problem has no optimum attached; call set_optimum first")
        return self.loss(w) - self.loss_opt

    def grad_from_margins(self, m: np.ndarray, rows=None) -> np.ndarray:
        """g = -(1/|B|) Z_B^T sigma(-m); m of shape (|B|,) -> (d,), or (|B|, S) -> (S, d)."""
        Zr = self.rows(rows)
        count = Zr.shape[0]
        if count == 0:
            return np.zeros(self.d) if m.ndim == 1 else np.zeros((m.shape[1], self.d))
        s = special.expit(-m)
        if m.ndim == 1:
            return -(Zr.T @ s) / count
        return -lane_product(Zr.T, s).T / count

    def grad(self, w: np.ndarray, rows=None) -> np.ndarray:
        return self.grad_from_margins(self.margins(w, rows), rows)

    # ---- second-order information -----------------------------------------------------------
    def weighted_gram(self, coef: np.ndarray, rows=None) -> np.ndarray:
        """(1/|B|) Z_B^T diag(coef) Z_B for coef >= 0, via one SYRK on sqrt(coef) * Z_B.

        The scaled copy lives in a reused work buffer, so the call holds at most one extra copy of
        the data matrix.
        """
        Zr = self.rows(rows)
        count = Zr.shape[0]
        if count == 0:
            return np.zeros((self.d, self.d))
        if rows is None:
            if self._work is None:
                self._work = np.empty_like(self.Z)
            work = self._work
            np.multiply(Zr, np.sqrt(coef)[:, None], out=work)
        else:
            work = Zr * np.sqrt(coef)[:, None]
        # work is C-contiguous (count, d): work.T is Fortran (d, count); dsyrk(trans=0) gives A A^T.
        upper = blas.dsyrk(1.0 / count, work.T, trans=0, lower=0)
        return np.triu(upper) + np.triu(upper, 1).T

    def soi_from_margins(self, m: np.ndarray, kind: str, rows=None) -> np.ndarray:
        if kind not in SOI_COEFFICIENTS:
            raise ValueError(f"soi={kind!r} is unknown; choose 'hessian' or 'qu'")
        return self.weighted_gram(SOI_COEFFICIENTS[kind](m), rows)

    def hessian(self, w: np.ndarray, rows=None) -> np.ndarray:
        return self.soi_from_margins(self.margins(w, rows), "hessian", rows)

    def qu(self, w: np.ndarray, rows=None) -> np.ndarray:
        return self.soi_from_margins(self.margins(w, rows), "qu", rows)

    def accuracy(self, w: np.ndarray) -> float:
        """Share of records with y_i <x_i, w> >= 0 (sign is unaffected by the row projection)."""
        return float(np.mean(self.margins(w) >= 0.0))
