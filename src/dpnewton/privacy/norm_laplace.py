"""The L2-norm Laplace mechanism: pure epsilon-DP noise in R^d (a K-norm mechanism with K the unit ball).

Density p(v) proportional to exp(-||v||_2 / s). Releasing f(D) + v is epsilon-DP for an f of L2
sensitivity Delta when s = Delta / epsilon: p(v) / p(v + a) = exp((||v + a|| - ||v||) / s) <= exp(||a|| / s)
<= exp(epsilon) by the triangle inequality [Hardt & Talwar 2010, the K-norm mechanism; Chaudhuri,
Monteleoni & Sarwate 2011, JMLR, Algorithm 2, whose objective noise has this density].

Sampling, in polar form: the radius r = ||v|| has density proportional to r^(d-1) e^(-r/s), i.e.
Gamma(shape d, scale s), and the direction is uniform on the sphere, independent of r (a normalised
standard normal vector). E||v|| = d s.
"""

from __future__ import annotations

import math

import numpy as np


def norm_laplace_scale(sensitivity: float, epsilon: float) -> float:
    """s = Delta / epsilon: the scale that makes a release of L2 sensitivity Delta epsilon-DP."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon={epsilon!r} must be a finite number > 0")
    if not (math.isfinite(sensitivity) and sensitivity >= 0):
        raise ValueError(f"sensitivity={sensitivity!r} must be a finite number >= 0")
    return sensitivity / epsilon


def norm_laplace(rng: np.random.Generator, d: int, scale: float) -> np.ndarray:
    """One draw of density proportional to exp(-||v|| / scale) in R^d (draws: d normals, then one gamma)."""
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    return rng.gamma(float(d), scale) * direction


__all__ = ["norm_laplace", "norm_laplace_scale"]
