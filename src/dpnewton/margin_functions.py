"""The logistic loss's functions of one margin m = <z, w>, elementwise over arrays of margins.

* log(1 + exp(-m)), the loss term (:func:`logistic_loss_terms`);
* c(m) = sigma(m) sigma(-m), the Hessian's weight (:func:`hessian_coefficient`);
* q(m) = tanh(m/2)/(2m), the weight of the quadratic upper bound of Lemma 5.1 [P section 5]
  (:func:`qu_coefficient`);
* sigma(-m) in its tanh form, the float32 wide pass's gradient weight (:func:`sigmoid_of_negative`).

:class:`dpnewton.loss.LogisticProblem` sums them over the rows of Z.
"""

from __future__ import annotations

import numpy as np
from scipy import special


def logistic_loss_terms(m: np.ndarray) -> np.ndarray:
    """log(1 + exp(-m)) elementwise, as max(-m, 0) + log1p(exp(-|m|)): no overflow for any m.

    The split ``np.logaddexp(0, -m)`` makes per element, done with whole-array ufuncs, which use
    numpy's SIMD exp and log1p (several times faster than logaddexp, whose cost was a fifth of a
    DP-GD step on adult). Results agree with logaddexp to the last bit or two. Every run's
    per-iterate loss and every line search go through it (via :meth:`LogisticProblem.loss_from_margins`).
    Allocates two arrays of m's size.
    """
    m = np.asarray(m, dtype=np.float64)
    terms = np.abs(m)
    np.negative(terms, out=terms)
    np.exp(terms, out=terms)
    np.log1p(terms, out=terms)
    terms -= np.minimum(m, 0.0)
    return terms


def qu_coefficient(m: np.ndarray) -> np.ndarray:
    """q(m) = tanh(m/2)/(2m) with q(0) = 1/4 (Lemma 5.1); series 1/4 - m^2/48 for |m| < 1e-4."""
    m = np.asarray(m, dtype=np.float64)
    small = np.abs(m) < 1e-4
    safe = np.where(small, 1.0, m)
    return np.where(small, 0.25 - m * m / 48.0, np.tanh(0.5 * safe) / (2.0 * safe))


def sigmoid_of_negative(M: np.ndarray) -> np.ndarray:
    """sigma(-M) = 1/2 - tanh(M/2)/2, elementwise in M's dtype, one new array (then in place).

    The float32 wide pass's sigmoid (:meth:`dpnewton.loss.LogisticProblem.margins_and_grads` from
    GEMM_MIN_RUNS runs on): 2.4-5.5x faster than ``scipy.special.expit(-M)`` on a block of margins, 1.16-1.38x on
    the whole pass at d ~ 100 (benchmarks/results/step_levers.md). Its absolute error is at most 6e-8 in float32
    (float32 expit's own is 8.8e-8 against float64); values in [0, 1] exactly, so a row's gradient term keeps
    norm <= 1. Relative accuracy is lost where sigma(-m) is tiny (0 from m = 20 in float32): not for uses that
    need it."""
    out = np.multiply(M, M.dtype.type(-0.5))
    np.tanh(out, out=out)
    out *= M.dtype.type(0.5)
    out += M.dtype.type(0.5)
    return out


def hessian_coefficient(m: np.ndarray) -> np.ndarray:
    """c(m) = sigma(m) sigma(-m) = 1/(4 cosh^2(m/2)), stable for any |m|."""
    return special.expit(m) * special.expit(-m)


SOI_COEFFICIENTS = {"hessian": hessian_coefficient, "qu": qu_coefficient}


__all__ = ["SOI_COEFFICIENTS", "hessian_coefficient", "logistic_loss_terms", "qu_coefficient", "sigmoid_of_negative"]
