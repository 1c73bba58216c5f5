"""Logistic loss and its second-order information on the prepared matrix Z.

Data model [P section 5; docs/algorithms.md §1.2]: records (x_i, y_i) with y_i in {-1, +1} become signed,
projected rows z_i = y_i x_i / max(1, ||x_i||), so ||z_i|| <= 1 (the unit ball the privacy
analysis assumes; :mod:`dpnewton.projection`). With margins m_i = <z_i, w> and the functions of a
margin of :mod:`dpnewton.margin_functions`:

* loss      l(w)    = (1/n) sum_i log(1 + exp(-m_i))             (:func:`logistic_loss_terms`)
* gradient  g(w)    = -(1/n) sum_i sigma(-m_i) z_i               (sigma = scipy.special.expit)
* Hessian   H(w)    = (1/n) sum_i sigma(m_i) sigma(-m_i) z_i z_i^T
* QU SOI    H_qu(w) = (1/n) sum_i q(m_i) z_i z_i^T,  q(m) = tanh(m/2)/(2m) = (sigma(m) - 1/2)/m,
  q(0) = 1/4, the global quadratic upper bound of Lemma 5.1 [P section 5].

Both SOIs are sums of PSD rank-one terms with eigenvalue <= 1/4 (Remark 5.3), which gives the
sensitivities used in the optimizers. A minibatch is a problem of its own, :meth:`LogisticProblem.batch`:
its rows are gathered once and every pass of the step reads that copy; means are then over the batch.

Passes over Z are made one block of rows at a time (:func:`row_block`, sized to stay in cache).
For a stack of fewer than :data:`GEMM_MIN_RUNS` runs each run gets its own matrix-vector product per
block, so a run's bits never depend on how many runs share the batch, while the block of Z is read
from memory once for all of them. A wider stack gets its margins and gradients from two matrix
products per block instead (:meth:`LogisticProblem.margins_and_grads`), faster per run from that
width on, with bits that agree with the per-run products to rounding only. The Newton methods fuse
the gradient and the SOI into one blocked pass (:func:`dpnewton.gram.gram_pass`).

Z may also be a ``scipy.sparse`` matrix (kept as CSR with sorted indices, values in the problem's
precision, :attr:`LogisticProblem.is_sparse`); it is never made dense. Its passes are sparse products:
margins Z W^T, gradients Z^T S with S = sigma(-M), and the Gram matrix R^T R with R = diag(sqrt(c)) Z,
whose d x d result alone is made dense. Each output column of a CSR/CSC product with a stack is
accumulated on its own, so a run's bits again do not depend on the other runs of its batch.

Precision (``precision=``, :data:`PRECISIONS`). ``"float64"`` (the default) is the code as it always
was: every product, loss and result in float64, bit for bit. ``"float32"`` stores Z (dense, or the
CSR values) in float32, each entry rounded toward zero so that no row norm grows (||z_i|| <= 1 still
holds exactly), and makes every product with Z a float32 BLAS (or sparse) product: the margins Z w,
the gradients Z^T r and the Gram/SOI passes, with w, r and sqrt(c) rounded to float32 on the way
in. Every result is cast up to float64 before it leaves the problem (per-block gradient and Gram
sums accumulate in float64), so the algorithms' clipping, noise and ledgers are float64: the same
random draws and rho, the same sigmas where they are fixed by rho and a constant sensitivity (those
set from released values, such as a double-noise direction's, follow those values). The loss terms
log(1 + exp(-m)) and their means are float64, evaluated on the (cast-up) float32 margins; the
optimum (w*, loss*) is the float64 problem's (:meth:`LogisticProblem.with_precision` carries it
over). So a float32 iterate's excess loss carries the float32 rounding of its margins and of Z
(relative ~6e-8 per element), and a float32 run's trajectory differs from float64's by the rounding
of its products; benchmarks/float32.py measures both against the spread over seeds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import special

from .gram import gram_pass
from .margin_functions import SOI_COEFFICIENTS, logistic_loss_terms, sigmoid_of_negative
from .projection import row_norms, signed_projection

PRECISIONS = {"float64": np.dtype(np.float64), "float32": np.dtype(np.float32)}
"""Storage and product precision of Z -> its dtype (see the module docstring)."""
FIRST_ORDER_BLOCK_BYTES = 1 << 18
"""Block size of the stacked first-order pass: every run of a batch re-reads the block from cache."""
GRAM_BLOCK_BYTES = 1 << 20
"""Block size of the Gram (SOI) pass: larger blocks make each SYRK call more efficient."""
FLOAT32_GRAM_ROWS_PER_COLUMN = 2
"""A float32 Gram block has at least this many rows per column of Z: each block's float32 SYRK result (d x d)
is added into the float64 sum, a cost per block that 1 MiB blocks of wide rows (334 rows at d = 784) do not
amortise: the fused pass was 1.24-1.39x a bare SYRK there, 1.16-1.19x with about 2d rows
(benchmarks/results/step_levers.md, lever 4); at d ~ 100 the 1 MiB block already has 20d rows."""
GEMM_MIN_RUNS = 8
"""Width from which :meth:`LogisticProblem.margins_and_grads` (dense Z) multiplies the whole stack of runs
with each block of Z (two GEMMs per block) instead of one gemv pair per run. Measured on a1a, adult, protein
and fashion-mnist, float64 and float32, one thread (benchmarks/results/batching_width.md): from this width on
the GEMM pass is the cheaper per run at every measured width on every shape (the crossover is 4 except for
fashion-mnist in float64, 8); at 8 runs it costs 0.32-0.47 of a lone run's pass per run, the gemv pairs
0.53-0.76."""
GEMM_BLOCK_BYTES = 1 << 20
"""Block size of the GEMM pass: per run 7-20 % cheaper than two GEMMs over the whole of Z at 8 runs
(benchmarks/results/batching_width.md)."""


def row_block(d: int, block_bytes: int = FIRST_ORDER_BLOCK_BYTES, itemsize: int = 8) -> int:
    """Rows per block of a pass over Z: about ``block_bytes`` of Z (``itemsize`` bytes per element:
    8 float64, 4 float32), 128 to 8192 rows.

    Fixed per (d, pass, precision), so the summation order of every product (and hence every bit)
    is a property of the data shape, not of the batch. Block sizes were chosen by measurement
    (benchmarks/README.md).
    """
    return int(min(8192, max(128, block_bytes // (itemsize * d))))


def check_precision(precision) -> np.dtype:
    """The dtype of ``precision`` (a key of :data:`PRECISIONS`); ValueError naming the choices."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is unknown; choose {' or '.join(PRECISIONS)}")
    return PRECISIONS[precision]


def toward_zero_float32(a: np.ndarray) -> np.ndarray:
    """``a`` (float64) as float32 with every entry rounded toward zero: |out_i| <= |a_i|, so no row
    norm of Z grows and the unit-ball bound of the privacy analysis holds for the stored rows.
    Worked in chunks of 2^20 entries (no n x d float64 temporary)."""
    flat = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    out = flat.astype(np.float32)
    chunk = 1 << 20
    for i in range(0, flat.size, chunk):
        o = out[i:i + chunk]
        grew = np.abs(o) > np.abs(flat[i:i + chunk])  # float32 values are exact in float64
        o[grew] = np.nextafter(o[grew], np.float32(0.0))
    return out.reshape(np.shape(a))


def _as_csr(A) -> sp.csr_matrix:
    """A copy of the sparse matrix A as canonical CSR: float64, duplicates summed, sorted indices."""
    A = sp.csr_matrix(A, dtype=np.float64, copy=True)
    A.sum_duplicates()  # also sorts the column indices of every row
    return A


def _stored(Z, dtype: np.dtype):
    """Z (dense, or CSR with sorted indices) with its values in ``dtype``: Z itself for float64,
    float32 values rounded toward zero (:func:`toward_zero_float32`)."""
    if Z.dtype == dtype:
        return Z
    if dtype == np.float64:
        return Z.astype(np.float64)
    if sp.issparse(Z):
        return sp.csr_matrix((toward_zero_float32(Z.data), Z.indices.copy(), Z.indptr.copy()), shape=Z.shape)
    return toward_zero_float32(Z)


class LogisticProblem:
    """Average logistic loss over the signed, projected rows Z (n x d).

    Build it with :meth:`from_xy` (projects rows) or directly from an existing Z, dense or
    ``scipy.sparse`` (stored as CSR; :attr:`is_sparse`). ``optimum`` (w*, loss*) may be attached
    for excess-loss evaluation. ``precision`` is ``"float64"`` (default: bit-identical to the code
    without the option) or ``"float32"`` (float32 Z and products, float64 results, losses, optimum
    and noise; module docstring). Rows are checked against the unit ball in float64, before any cast.
    """

    def __init__(self, Z, name: str = "data", precision: str = "float64"):
        dtype = check_precision(precision)
        Z = _as_csr(Z) if sp.issparse(Z) else np.ascontiguousarray(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[0] == 0 or Z.shape[1] == 0:
            raise ValueError(f"Z must be a non-empty 2-D array, got shape {Z.shape}")
        norms = row_norms(Z)
        if norms.max() > 1.0 + 1e-12:
            raise ValueError(f"rows of Z must lie in the unit ball; max norm is {norms.max():.6g} "
                             f"(row {int(norms.argmax())})")
        self._attach(_stored(Z, dtype), name, work=None)

    def _attach(self, Z: np.ndarray, name: str, work: np.ndarray | None) -> None:
        """Set every field; the one place that lists them (shared by __init__, :meth:`batch` and
        :meth:`with_precision`)."""
        self.Z = Z
        #: Z is a scipy.sparse CSR matrix (float64 or float32 values, sorted indices): passes are sparse products
        self.is_sparse = sp.issparse(Z)
        #: "float64" or "float32": the dtype of Z and of every product with it (:data:`PRECISIONS`)
        self.precision = "float32" if Z.dtype == np.float32 else "float64"
        self.name = name
        self.n, self.d = Z.shape
        self.w_opt: np.ndarray | None = None
        self.loss_opt: float | None = None
        self._work = work

    def batch(self, rows: np.ndarray) -> "LogisticProblem":
        """The minibatch Z_B (rows ``rows`` of Z) as a problem of its own.

        The rows are gathered once, so the margins, gradient and SOI passes of a step all read the
        same copy. They are rows of a validated Z, so the checks of the constructor are skipped.
        """
        sub = object.__new__(LogisticProblem)
        sub._attach(self.Z[rows], self.name, work=None if self.is_sparse else self._gram_buffer())
        return sub

    def every_kth_row(self, k: int) -> "LogisticProblem":
        """Rows 0, k, 2k, ... of Z as a problem of its own: a strided view of a dense Z (no copy; every
        pass reads those rows in place), a copy of those rows of a sparse one. Used for warm starts
        (:func:`dpnewton.algorithms.aop.minimize_objective`)."""
        sub = object.__new__(LogisticProblem)
        sub._attach(self.Z[::k], self.name, work=None if self.is_sparse else self._gram_buffer())
        return sub

    def with_precision(self, precision: str) -> "LogisticProblem":
        """This problem with Z stored (and every product made) in ``precision``, its optimum (w*,
        loss*, float64) carried over unchanged; the problem itself if it already has that precision.

        float32 rounds each entry toward zero (:func:`toward_zero_float32`); float64 casts up exactly.
        """
        dtype = check_precision(precision)
        if precision == self.precision:
            return self
        out = object.__new__(LogisticProblem)
        out._attach(_stored(self.Z, dtype), self.name, work=None)
        out.w_opt, out.loss_opt = self.w_opt, self.loss_opt
        return out

    def materialise(self) -> "LogisticProblem":
        """The problem with its rows Z formed: itself (:class:`~dpnewton.scaled_rows.ScaledRowsProblem`,
        which reads them from X, forms them on request)."""
        return self

    def _gram_buffer(self) -> np.ndarray:
        """The reused (block x d) buffer of :meth:`_gram_pass`, shared with this problem's batches."""
        if self._work is None:
            dtype = self.Z.dtype
            rows = row_block(self.d, GRAM_BLOCK_BYTES, dtype.itemsize)
            if self.precision == "float32":
                rows = max(rows, FLOAT32_GRAM_ROWS_PER_COLUMN * self.d)
            self._work = np.empty((rows, self.d), dtype=dtype)
        return self._work

    def _in(self, a: np.ndarray) -> np.ndarray:
        """An operand of a product with Z in Z's precision (``a`` itself in float64 mode)."""
        return a if self.precision == "float64" else np.asarray(a, dtype=np.float32)

    def _out(self, a):
        """A product with Z as float64 (``a`` itself in float64 mode)."""
        return a if self.precision == "float64" else np.asarray(a, dtype=np.float64)

    @classmethod
    def from_xy(cls, X, y: np.ndarray, name: str = "data", precision: str = "float64",
                copy: bool = True) -> "LogisticProblem":
        """z_i = y_i x_i / max(1, ||x_i||) (docs/algorithms.md §1.2: per-row projection onto the unit
        ball, :func:`dpnewton.projection.signed_projection`: no overflow, a row with NaN or inf raises
        ValueError naming it). X is dense or ``scipy.sparse`` (then Z is sparse too, with X's pattern).
        The projection is float64; ``precision`` is then that of the constructor.

        ``copy=False``: X (if it already is a float64 C-contiguous array, or CSR with sorted indices
        and no duplicates) is scaled in place and becomes Z, so the problem holds no second copy of
        the data; the caller must not use X afterwards. Z has the same bits either way.
        """
        check_precision(precision)
        return cls.from_projected(signed_projection(X, y, copy), name, precision)

    @classmethod
    def from_projected(cls, Z, name: str = "data", precision: str = "float64") -> "LogisticProblem":
        """The problem of rows Z that :mod:`dpnewton.projection` has already signed and projected onto
        the unit ball (float64, dense C-contiguous or canonical CSR): not checked again and not copied
        (float64). The builder of the training rows (:mod:`dpnewton.training_rows`) uses it."""
        problem = object.__new__(cls)
        problem._attach(_stored(Z, check_precision(precision)), name, work=None)
        return problem

    def set_optimum(self, w_opt: np.ndarray, loss_opt: float | None = None) -> None:
        """Attach (w*, loss*); loss* defaults to l(w*). On a float32 problem pass the float64 problem's
        loss* (or attach the optimum there and use :meth:`with_precision`): l(w*) here has float32 products."""
        self.w_opt = np.asarray(w_opt, dtype=np.float64)
        self.loss_opt = float(self.loss(self.w_opt)) if loss_opt is None else float(loss_opt)

    # ---- margins ---------------------------------------------------------------------------
    def margins(self, w: np.ndarray) -> np.ndarray:
        """m = Z w (n,) for one w, or Z W^T (n, S) for a stack W (S, d).

        A stack is computed block by block with one matrix-vector product per run, so each run's
        margins are the same bits whatever the stack size. Single vectors use one gemv: an
        optimizer uses one of the two forms for all its runs (batched first-order optimizers pass
        stacks, even of one run), so its results never depend on batching.

        Sparse Z: Z w, or Z W^T in one CSR product (row i of the output accumulates the entries of
        z_i in index order, separately for every column), again the same bits whatever the stack.
        """
        w = self._in(w)
        if w.ndim == 1:
            return self._out(self.Z @ w)
        if self.is_sparse:
            return self._out(self.Z @ w.T)
        n = self.n
        Mt = np.empty((w.shape[0], n), dtype=self.Z.dtype)
        block = row_block(self.d, itemsize=self.Z.dtype.itemsize)
        for a in range(0, n, block):
            Zb = self.Z[a:a + block]
            for j in range(w.shape[0]):
                np.dot(Zb, w[j], out=Mt[j, a:a + block])
        return self._out(Mt.T)

    # ---- loss and gradient ------------------------------------------------------------------
    @staticmethod
    def loss_from_margins(m: np.ndarray) -> np.ndarray:
        """Mean over rows of log(1 + exp(-m)); m may be (n,) or (n, S).

        For a stack, each run's terms are summed as one contiguous row (the same pairwise sum as
        for a single run), so a run's loss does not depend on how many runs share the batch.
        """
        if m.ndim == 1:
            return logistic_loss_terms(m).mean()
        return logistic_loss_terms(np.ascontiguousarray(m.T)).mean(axis=1)

    def loss(self, w: np.ndarray) -> float | np.ndarray:
        return self.loss_from_margins(self.margins(w))

    def losses(self, points: np.ndarray) -> np.ndarray:
        """l(w) for every row w of ``points`` (k, d), e.g. all iterates of one run, at matrix speed.

        Chunks of c = d/4 points (8 to 256) get their margins from one matrix product W_c Z^T
        (c x n, a quarter of the size of Z, the only large work array); each point's terms are
        then computed and summed as one contiguous row (two temporaries of n floats). A point's
        loss may differ in the last bits from :meth:`loss` (gemm vs gemv); the chunks depend only
        on d and the number of points. Sparse Z: chunks of 8 points, margins (Z W_c^T)^T (n x 8:
        a quarter of a dense Z's size could be far more than the sparse Z).
        """
        points = np.ascontiguousarray(points, dtype=self.Z.dtype)
        chunk = 8 if self.is_sparse else int(min(256, max(8, self.d // 4)))
        out = np.empty(points.shape[0])
        for a in range(0, points.shape[0], chunk):
            if self.is_sparse:
                margins = (self.Z @ points[a:a + chunk].T).T
            else:
                margins = points[a:a + chunk] @ self.Z.T
            out[a:a + chunk] = [logistic_loss_terms(row).mean() for row in margins]
        return out

    def excess_loss(self, w: np.ndarray) -> float | np.ndarray:
        if self.loss_opt is None:
            raise ValueError("the problem has no optimum attached; call set_optimum first")
        return self.loss(w) - self.loss_opt

    def grad_from_margins(self, m: np.ndarray) -> np.ndarray:
        """g = -(1/n) Z^T sigma(-m) for the margins m (n,) of one w; zeros for an empty batch.

        Stacks of runs get their gradients from :meth:`margins_and_grads` instead.
        """
        if self.n == 0:
            return np.zeros(self.d)
        return -self._out(self.Z.T @ self._in(special.expit(-m))) / self.n

    def margins_and_grads(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Z W^T (n, S), mean gradients (S, d)) of a stack of S runs in one pass over Z, block by block.

        * S < :data:`GEMM_MIN_RUNS`: per block of rows (:func:`row_block`) and per run, m = Z_b w (gemv),
          then g -= Z_b^T sigma(-m) while the block is still in cache. Each run's bits depend only on its
          own w and the block size: the same alone, in any batch and at any position in it.
        * S >= :data:`GEMM_MIN_RUNS`: :meth:`_gemm_pass`, two matrix products per block; the result equals
          the gemv pass up to rounding (see there), not bit for bit.

        Sparse Z: M = Z W^T and G = -(Z^T sigma(-M))^T / n, two sparse products (CSR, then its
        CSC transpose) whose output columns are accumulated independently: a run's bits depend
        only on its own w, at every width.
        """
        n, d = self.n, self.d
        W = self._in(W)
        if self.is_sparse:
            M = self.Z @ W.T
            G = self.Z.T @ special.expit(-M)
            return self._out(M), np.ascontiguousarray(-G.T, dtype=np.float64) / n
        if W.shape[0] >= GEMM_MIN_RUNS:
            return self._gemm_pass(W)
        Mt = np.empty((W.shape[0], n), dtype=self.Z.dtype)
        G = np.zeros((W.shape[0], d))  # float64 in both precisions: the block sums accumulate in it
        block = row_block(d, itemsize=self.Z.dtype.itemsize)
        for a in range(0, n, block):
            Zb = self.Z[a:a + block]
            Zbt = Zb.T
            for j in range(W.shape[0]):
                m = Mt[j, a:a + block]
                np.dot(Zb, W[j], out=m)
                G[j] -= Zbt @ special.expit(-m)
        return self._out(Mt.T), G / n

    def _gemm_pass(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`margins_and_grads` of a wide stack W (S, d), already in Z's precision: per block Z_b of
        :data:`GEMM_BLOCK_BYTES`, M_b = W Z_b^T and G -= sigma(-M_b) Z_b, two GEMMs that read the block
        once for every run. As in the gemv pass, the block sums accumulate in float64 (float32: each
        block's products in float32, cast up), so only the summation order inside a block differs. float32
        takes sigma(-M) in its tanh form (:func:`~dpnewton.margin_functions.sigmoid_of_negative`: absolute
        error <= 6e-8, the pass 1.16-1.38x faster at d ~ 100); float64 keeps ``expit``.

        Not bit for bit: a run's margins and gradient differ from the gemv pass's by at most 2e-15 of the run's
        largest entry in float64 and 1.2e-6 in float32 (measured on four datasets; tests/algorithms/test_batching.py
        holds them to 1e-13 and 1e-5). Nor do a run's bits stay fixed across stacks: on this machine's BLAS
        (OpenBLAS 0.3.31, Haswell kernels) a float64 run had the same bits at every position of a stack of 64
        but not at every width from 8 to 64, a float32 run neither (benchmarks/results/batching_width.md).
        """
        n, d = self.n, self.d
        Mt = np.empty((W.shape[0], n), dtype=self.Z.dtype)
        G = np.zeros((W.shape[0], d))
        block = row_block(d, GEMM_BLOCK_BYTES, self.Z.dtype.itemsize)
        weights = sigmoid_of_negative if self.precision == "float32" else (lambda M: special.expit(-M))
        for a in range(0, n, block):
            Zb = self.Z[a:a + block]
            Mb = Mt[:, a:a + block]
            np.matmul(W, Zb.T, out=Mb)
            G -= weights(Mb) @ Zb
        return self._out(Mt.T), G / n

    def grad(self, w: np.ndarray) -> np.ndarray:
        return self.grad_from_margins(self.margins(w))

    # ---- second-order information -----------------------------------------------------------
    def weighted_gram(self, coef: np.ndarray) -> np.ndarray:
        """(1/n) Z^T diag(coef) Z for coef >= 0 (blocked SYRK, see :meth:`_gram_pass`)."""
        if self.n == 0:
            return np.zeros((self.d, self.d))
        return gram_pass(self, coef=coef)[0] / self.n

    def soi_from_margins(self, m: np.ndarray, kind: str) -> np.ndarray:
        if kind not in SOI_COEFFICIENTS:
            raise ValueError(f"soi={kind!r} is unknown; choose 'hessian' or 'qu'")
        return self.weighted_gram(SOI_COEFFICIENTS[kind](m))

    def newton_pass(self, w: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(margins Z w, gradient, SOI) of the full data at w in one fused pass over Z."""
        if kind not in SOI_COEFFICIENTS:
            raise ValueError(f"soi={kind!r} is unknown; choose 'hessian' or 'qu'")
        gram, g, m = gram_pass(self, w=w, kind=kind)
        return m, g / self.n, gram / self.n

    def hessian(self, w: np.ndarray) -> np.ndarray:
        return self.soi_from_margins(self.margins(w), "hessian")

    def qu(self, w: np.ndarray) -> np.ndarray:
        return self.soi_from_margins(self.margins(w), "qu")

    @staticmethod
    def accuracy_from_margins(m: np.ndarray) -> float | np.ndarray:
        """Share of rows with a positive margin m_i = <z_i, w> > 0; per run for a stack m (n, S).

        m_i = y_i <x_i, w> / max(1, ||x_i||), so m_i > 0 means sign(<x_i, w>) = y_i: the record is
        classified correctly. A tie (m_i exactly 0, e.g. every row at w = 0) counts as wrong.
        """
        m = np.asarray(m)
        if m.ndim == 1:
            return float(np.mean(m > 0.0))
        return np.mean(m > 0.0, axis=0)

    def accuracy(self, w: np.ndarray) -> float | np.ndarray:
        """:meth:`accuracy_from_margins` of Z w (one extra pass over Z)."""
        return self.accuracy_from_margins(self.margins(w))
