"""The modified Newton direction Psi_lambda(H)^-1 g and its sensitivity [P Def. 5.4, section 5.1].

For a PSD matrix H = sum_i lambda_i u_i u_i^T:

* ``clip``: Psi(H) = sum_i max(lambda, lambda_i) u_i u_i^T, inverted through one ``eigh``;
* ``add``:  Psi(H) = H + lambda I, solved by Cholesky.

Sensitivity (docs/algorithms.md §2.2, the bound behind sigma_2 of Algorithm 3): when one of m records is
added or removed, the SOI changes by a PSD rank-one term of norm <= 1/(4m) (Remark 5.3) and

    || Psi(H)^-1 g - Psi(H')^-1 g || <= ||g|| / (4 m lambda^2 - lambda)   (clip, needs lambda > 1/(4m))
    || Psi(H)^-1 g - Psi(H')^-1 g || <= ||g|| / (4 m lambda^2 + lambda)   (add)

with m = n for full-batch SOIs and m = b_h (the expected batch size) for the minibatch variant.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

MODIFICATIONS = ("clip", "add")


def direction_sensitivity(g_norm: float, lam: float, m: float, modification: str) -> float:
    """||g|| / (4 m lambda^2 -/+ lambda): L2 sensitivity of the direction (see module docstring)."""
    if modification == "clip":
        denom = 4.0 * m * lam * lam - lam
        if denom <= 0:
            raise ValueError(f"clip needs lambda > 1/(4m); got lambda={lam!r}, m={m!r}")
    elif modification == "add":
        denom = 4.0 * m * lam * lam + lam
    else:
        raise ValueError(f"modification={modification!r} is unknown; choose 'clip' or 'add'")
    return g_norm / denom


def overflowed(H: np.ndarray, g: np.ndarray) -> bool:
    """True when the SOI or the noisy gradient is not finite: the iterate has left the working
    precision's range (float32 margins overflow first) and the run has diverged. A step that sees
    this releases a NaN iterate, so every later one is NaN too and the run is recorded as diverged
    (``diagnostics["diverged"]``): a floating-point limit, not a branch of the mechanism."""
    return not (np.isfinite(H).all() and np.isfinite(g).all())


def modified_newton_direction(H: np.ndarray, g: np.ndarray, lam: float, modification: str) -> np.ndarray:
    """Psi_lambda(H, modification)^-1 g."""
    if not lam > 0:
        raise ValueError(f"lambda={lam!r} must be > 0")
    if modification == "clip":
        vals, vecs = linalg.eigh(H, check_finite=False, driver="evd")
        return vecs @ ((vecs.T @ g) / np.maximum(vals, lam))
    if modification == "add":
        A = H + lam * np.eye(H.shape[0])
        return linalg.cho_solve(linalg.cho_factor(A, lower=False, check_finite=False), g, check_finite=False)
    raise ValueError(f"modification={modification!r} is unknown; choose 'clip' or 'add'")
