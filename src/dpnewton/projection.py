"""Rows onto the unit ball: z_i = y_i x_i / max(1, ||x_i||), and row norms that do not overflow.

The data model of [P section 5] (docs/algorithms.md §1.2) needs every row of Z in the unit ball;
this module makes it so, in place and a block of rows at a time, for dense and CSR rows alike.
||x_i|| is the plain sqrt(sum_j x_ij^2) (dense: :func:`numpy.linalg.norm` per block of rows; CSR:
the squares summed in index order per row). Where the sum of squares overflows (||x_i|| > ~1.3e154,
far outside the ball) the row is projected through its scaled copy, z_i = y_i u_i / ||u_i|| with
u_i = x_i / max_j |x_ij| (:func:`scaled_rows`), so it has norm 1 instead of collapsing to 0. A row
with NaN or inf raises ValueError naming it.

Every pass works on blocks of :data:`PROJECTION_BLOCK_BYTES`: its temporaries are a block's size,
never the size of X.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

PROJECTION_BLOCK_BYTES = 1 << 20
"""About this many bytes of rows per block of a projection pass (a block stays in cache between its
norm and its scaling)."""


def block_rows(d: int) -> int:
    """Rows per block of a dense projection pass over rows of d entries (at least 128)."""
    return int(max(128, PROJECTION_BLOCK_BYTES // (8 * d)))


def row_ids(A: sp.csr_matrix) -> np.ndarray:
    """The row of every stored entry of the CSR matrix A (aligned with ``A.data``)."""
    return np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))


def _entries(X, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, values) of the stored entries of the rows ``rows`` (sorted) of a dense or CSR X."""
    if sp.issparse(X):
        ids = row_ids(X)
        keep = np.isin(ids, rows)
        return ids[keep], X.data[keep]
    return np.repeat(rows, X.shape[1]), X[rows].ravel()


def scaled_rows(ids: np.ndarray, values: np.ndarray, n: int, what: str, first_row: int = 0):
    """u_i = x_i / a_i with a_i = max_j |x_ij|, and ||u_i||, for the entries (ids, values) of some rows.

    ||x_i|| = a_i ||u_i|| with 1 <= ||u_i|| <= sqrt(d): the norm of a row whose sum of squares
    overflows (||x_i|| > ~1.3e154), computed without overflow. Raises ValueError for a row with NaN or
    inf (named as row ``first_row + id``). Returns (a, ||u||) per row (length n; zero for rows without
    entries) and u per entry.
    """
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(f"row {first_row + int(ids[bad][0])} of {what} contains NaN or inf; remove that row "
                         "or replace its non-finite values before building the problem")
    a = np.zeros(n)
    np.maximum.at(a, ids, np.abs(values))
    u = values / a[ids]
    return a, np.sqrt(np.bincount(ids, weights=u * u, minlength=n)), u


def _csr_squared_norms(X: sp.csr_matrix, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, slice]:
    """(sum_j x_ij^2 for rows start..stop-1, their entries' local row ids, the entries' slice)."""
    entries = slice(X.indptr[start], X.indptr[stop])
    ids = np.repeat(np.arange(stop - start), np.diff(X.indptr[start:stop + 1]))
    values = X.data[entries]
    return np.bincount(ids, weights=values * values, minlength=stop - start), ids, entries


def row_norms(Z) -> np.ndarray:
    """||z_i|| of every row of a dense or CSR Z (CSR with sorted indices for reproducible bits),
    without overflow (module docstring); ValueError for a row with NaN or inf."""
    n = Z.shape[0]
    with np.errstate(over="ignore"):  # overflowing rows are handled below
        if sp.issparse(Z):
            squared = np.bincount(row_ids(Z), weights=Z.data * Z.data, minlength=n)
        else:
            squared = np.einsum("ij,ij->i", Z, Z)  # no n x d temporary
    norms = np.sqrt(squared)
    overflow = np.flatnonzero(~np.isfinite(squared))
    if overflow.size:
        ids, values = _entries(Z, overflow)
        a, r, _ = scaled_rows(ids, values, n, "Z")
        norms[overflow] = a[overflow] * r[overflow]
    return norms


def dense_row_norms(block: np.ndarray, first_row: int = 0) -> np.ndarray:
    """||block_i|| per dense row: numpy's norm, and for a row whose sum of squares overflows the norm of
    the rescaled row (:func:`scaled_rows`; a row with NaN or inf raises, named as row first_row + i)."""
    with np.errstate(over="ignore"):  # overflowing rows are handled below
        norms = np.linalg.norm(block, axis=1)
    overflow = np.flatnonzero(~np.isfinite(norms))
    if overflow.size:
        ids, values = _entries(block, overflow)
        big, unit_norm, _ = scaled_rows(ids, values, block.shape[0], "X", first_row)
        norms[overflow] = big[overflow] * unit_norm[overflow]
    return norms


def project_dense_block(block: np.ndarray, signs: np.ndarray, out: np.ndarray, first_row: int = 0) -> None:
    """out = signs_i block_i / max(1, ||block_i||) for a block of dense rows (``out`` may be ``block``).

    The same bits as projecting the whole array at once: the norms are per row
    (:func:`numpy.linalg.norm` of the block) and the scaling is one product per entry."""
    with np.errstate(over="ignore"):  # overflowing rows are handled below
        norms = np.linalg.norm(block, axis=1)
    overflow = np.flatnonzero(~np.isfinite(norms))
    if overflow.size:  # z_i = y_i u_i / ||u_i|| for the entries of those rows
        ids, values = _entries(block, overflow)
        _, r, u = scaled_rows(ids, values, block.shape[0], "X", first_row)
        projected = (signs[ids] / r[ids]) * u
    np.multiply(block, (signs / np.maximum(1.0, norms))[:, None], out=out)
    if overflow.size:
        out[overflow] = projected.reshape(overflow.size, -1)


def project_csr_in_place(Z: sp.csr_matrix, signs: np.ndarray) -> None:
    """z_i <- signs_i z_i / max(1, ||z_i||) for every row of the CSR matrix Z (sorted indices), its
    values scaled in place, a block of rows at a time (the norms as :func:`row_norms`, the same bits)."""
    n = Z.shape[0]
    nnz_per_block = max(1, PROJECTION_BLOCK_BYTES // 8)
    start = 0
    while start < n:
        stop = min(n, int(np.searchsorted(Z.indptr, Z.indptr[start] + nnz_per_block, side="right")))
        stop = max(stop, start + 1)
        with np.errstate(over="ignore"):
            squared, ids, entries = _csr_squared_norms(Z, start, stop)
        norms = np.sqrt(squared)
        factor = signs[start:stop] / np.maximum(1.0, norms)
        overflow = np.flatnonzero(~np.isfinite(norms))
        values = Z.data[entries]     # a view: scaled in place
        if overflow.size:
            keep = np.isin(ids, overflow)
            _, r, u = scaled_rows(ids[keep], values[keep], stop - start, "X", start)
            projected = (signs[start:stop][ids[keep]] / r[ids[keep]]) * u
        values *= factor[ids]
        if overflow.size:
            values[keep] = projected
        start = stop


def signed_projection(X, y: np.ndarray, copy: bool = True):
    """Z with z_i = y_i x_i / max(1, ||x_i||) for labels y in {-1, +1} (module docstring).

    X is dense or ``scipy.sparse`` (then Z is CSR with X's pattern, duplicates summed, indices sorted).
    ``copy=False``: X (if it already is a float64 C-contiguous writeable array, or CSR with sorted indices
    and no duplicates) is scaled in place and returned; the caller must not use X afterwards. Z has
    the same bits either way.
    """
    sparse = sp.issparse(X)
    if sparse:
        X = sp.csr_matrix(X, dtype=np.float64, copy=copy)
        X.sum_duplicates()  # also sorts the column indices of every row
    else:
        X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, d) and y (n,); got {X.shape} and {y.shape}")
    labels = set(np.unique(y).tolist())
    if not labels <= {-1.0, 1.0}:
        raise ValueError(f"labels must be -1/+1, found values {sorted(labels)[:5]}")
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"Z must be a non-empty 2-D array, got shape {X.shape}")
    if sparse:
        project_csr_in_place(X, y)  # this function's own copy (or, copy=False, the caller's)
        return X
    in_place = not copy and X.flags.c_contiguous and X.flags.writeable
    Z = X if in_place else np.empty((n, d))
    block = block_rows(d)
    for a in range(0, n, block):
        project_dense_block(X[a:a + block], y[a:a + block], Z[a:a + block], a)
    return Z


__all__ = ["PROJECTION_BLOCK_BYTES", "block_rows", "dense_row_norms", "project_csr_in_place", "project_dense_block",
           "row_ids", "row_norms", "scaled_rows", "signed_projection"]
