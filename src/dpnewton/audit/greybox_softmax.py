"""Grey-box sensitivity audit of the private softmax fit (:func:`dpnewton.multinomial.fit_multinomial`).

The record-and-replay test of :mod:`.greybox` on the softmax model for K > 2 classes, both methods
(:data:`~dpnewton.multinomial.METHODS`), under the library's add-remove relation (n private). Every release
of the fit (the count, the Gram matrix's upper triangle for ``bohning``, T gradient sums) is charged and
drawn through its ledger, so a :class:`.greybox.RecordingLedger` passed as the fit's ledger records each
one and, on D', returns D's released value. Checks (i)-(iii) of :func:`.greybox.compare_runs`, and (iv)
(:func:`.greybox.check_post_processing`): the output is post-processing of the releases alone (every mean
divides by the released count N, the step and the preconditioner read only released values), so under the
coupling W is the same on D and D' up to rounding (relative 1e-9).

Pair (:func:`softmax_pair`): n - ``random_rows`` rows -u of class 0, ``random_rows`` random rows of norm
<= 1 and random classes, and on D' the canary 3u of class 0 (u = e_1): a long row, which only the fit's
projection onto the unit ball keeps within the sensitivities. At the first step the softmax is uniform, so
the canary moves the gradient sum by ||1/K - e_0|| = sqrt((K - 1)/K), 0.58 of sqrt(2) for K = 3; the rows
-u of class 0 then turn class 0 away from +u, the canary's own class loses probability and its gradient
grows towards the bound sqrt(2) at later steps. The Gram matrix moves by u u^T, its whole sensitivity 1,
and the count by 1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..multinomial import fit_multinomial
from ..privacy.conversions import DEFAULT_CONVERSION, epsilon_to_rho
from ..privacy.neighbouring import LIBRARY_RELATION
from .greybox import GreyboxReport, RecordingLedger, SideRun, check_post_processing, compare_runs
from .variants import BROKEN_VARIANTS

CANARY_NORM = 3.0


@dataclass(frozen=True)
class SoftmaxRows:
    """One side's rows Z (n x p), labels in 0..K-1 and the public K."""

    Z: np.ndarray
    labels: np.ndarray
    K: int

    @property
    def n(self) -> int:
        return self.Z.shape[0]


@dataclass(frozen=True)
class SoftmaxPair:
    D: SoftmaxRows
    D_prime: SoftmaxRows
    canary: np.ndarray

    def reversed(self) -> SoftmaxPair:
        """The removal of the canary: D' = D minus the row (add-remove is symmetric)."""
        return dataclasses.replace(self, D=self.D_prime, D_prime=self.D)


def softmax_pair(n: int = 30, p: int = 3, K: int = 3, random_rows: int = 6, seed: int = 0) -> SoftmaxPair:
    """D and D' = D plus the canary (module docstring)."""
    if n <= random_rows or p < 1 or K < 3:
        raise ValueError(f"need n > random_rows, p >= 1 and K >= 3; got n={n}, random_rows={random_rows}, "
                         f"p={p}, K={K}")
    u = np.zeros(p)
    u[0] = 1.0
    rng = np.random.default_rng([seed, 31])
    X = rng.standard_normal((random_rows, p))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    Z = np.vstack([np.tile(-u, (n - random_rows, 1)), X])
    labels = np.concatenate([np.zeros(n - random_rows, dtype=np.intp), rng.integers(0, K, size=random_rows)])
    D = SoftmaxRows(Z, labels, K)
    D_prime = SoftmaxRows(np.vstack([Z, CANARY_NORM * u]), np.append(labels, 0), K)
    return SoftmaxPair(D, D_prime, u)


def run_softmax_pair(pair: SoftmaxPair, method: str, iterations: int = 5, epsilon: float = 1.0,
                     delta: float = 1e-5, broken: str = "none", seed: int = 0,
                     coupled: bool = True) -> tuple[SideRun, SideRun]:
    """Fit ``method`` on D, then on D' replaying D's releases (:mod:`.greybox`), the same generator;
    ``coupled=False``: D' draws its own noise (the same draws), without the replay."""
    if broken not in BROKEN_VARIANTS:
        raise ValueError(f"broken={broken!r} is unknown; choose one of {', '.join(BROKEN_VARIANTS)}")
    rho = epsilon_to_rho(epsilon, delta, DEFAULT_CONVERSION)
    sides, replay = [], None
    for rows in (pair.D, pair.D_prime):
        ledger = RecordingLedger(rho, LIBRARY_RELATION, broken, replay)
        W, _, _ = fit_multinomial(rows.Z, rows.labels, rows.K, epsilon, delta, np.random.default_rng([seed, 29]),
                                  method=method, iterations=iterations, ledger=ledger)
        sides.append(SideRun(rows, ledger, W))
        replay = ledger.releases if coupled else None
    return sides[0], sides[1]


def compare_softmax_runs(D: SideRun, Dp: SideRun, method: str, broken: str = "none") -> GreyboxReport:
    """Checks (i)-(iii) of :func:`.greybox.compare_runs` and (iv), :func:`.greybox.check_post_processing`."""
    return check_post_processing(compare_runs(D, Dp, f"softmax-{method}", LIBRARY_RELATION, broken), D, Dp)


def softmax_greybox_audit(method: str, broken: str = "none", iterations: int = 5, seed: int = 0,
                          removal: bool = False) -> GreyboxReport:
    """Run and compare one (method, variant); ``removal``: D' is D minus the canary."""
    pair = softmax_pair(seed=seed)
    D, Dp = run_softmax_pair(pair.reversed() if removal else pair, method, iterations, broken=broken, seed=seed)
    return compare_softmax_runs(D, Dp, method, broken)


__all__ = ["SoftmaxPair", "SoftmaxRows", "compare_softmax_runs", "run_softmax_pair", "softmax_greybox_audit",
           "softmax_pair"]
