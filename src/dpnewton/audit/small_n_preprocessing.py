"""Small-n audit of the private feature ranges (:class:`dpnewton.preprocessing.PrivateFeatureScaler`).

    python -m dpnewton.audit.small_n_preprocessing [--trials 30000] [--pilot 10000]

Pair (:func:`preprocessing_pair`): D = the small-n audit's three rows (:func:`.small_n.flipped_label_pair`:
x = (1, 0), (1, 0), (0, 1000)); D' = D plus the outlier x_c = (1000, 0), which moves feature 0's
exact maximum from 1 to 1000. Relation add-remove, n private; epsilon = 2, delta = 1e-5 (the Gaussian
release) or delta = 0 (the pure Laplace release, :func:`~dpnewton.preprocessing.laplace_release`).

What a fit releases is rebuilt with the production pieces: the exact histograms
(:func:`~dpnewton.preprocessing.feature_histograms`), the noise scale the ledger's ``charge`` returns
for the release (:data:`~dpnewton.preprocessing.RELEASE`, sensitivity sqrt(d), rho from the ``gdp``
conversion), the scaler's noise stream for the fit's seed (:func:`fit_generator`, so a seeded audit
fit releases exactly what ``PrivateFeatureScaler(random_state=seed)`` releases) and the production
post-processing (:func:`~dpnewton.preprocessing.ranges_from_histograms`).

Levels: ``output`` = the released upper end of feature 0's range (black box: what the scaler
publishes); ``likelihood-ratio`` = log p_D'(H~)/p_D(H~) = (<H~ - H_D, v> - ||v||^2/2)/sigma^2 with
v = H_D' - H_D (the outlier's d one-hot counts), or sum(|H~ - H_D| - |H~ - H_D'|)/b for the Laplace
release: the most powerful test on the release (Neyman-Pearson).

Variants (:data:`PREPROCESSING_VARIANTS`): ``none`` (the production mechanism); ``exact-max`` (the
classic leak: feature 0's upper end read off the data, max_i x_i0, instead of the noisy histograms);
``overspend`` (noise calibrated to 4 epsilon, epsilon claimed). Threshold and direction are chosen
on a pilot, the 95 % Clopper-Pearson lower bound on a fresh evaluation (as :func:`.small_n.audit_small_n`).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from ..preprocessing import (CONVERSION, DEFAULT_QUANTILES, GAUSSIAN, LAPLACE, N_BINS, RELEASE, feature_histograms,
                             laplace_scale, ranges_from_histograms)
from ..privacy.conversions import epsilon_to_rho
from ..privacy.ledger import PrivacyLedger
from ..privacy.neighbouring import LIBRARY_RELATION
from ..seeding import RunIdentity
from .bounds import epsilon_lower_bound
from .distinguisher import threshold_audit
from .small_n import DELTA, EPSILON, PILOT_THRESHOLDS, SmallNOutcome, flipped_label_pair

PREPROCESSING_VARIANTS = {"none": 1.0, "exact-max": 1.0, "overspend": 4.0}
"""variant -> factor on the epsilon the noise is calibrated to (the claim stays epsilon)."""
LEVELS = ("output", "likelihood-ratio")
OUTLIER = (1000.0, 0.0)
MECHANISM = "private-feature-scaler"


def preprocessing_pair() -> tuple[np.ndarray, np.ndarray]:
    """(X_D, X_D'): the three rows of the small-n pair, and the same plus the outlier :data:`OUTLIER`."""
    X = flipped_label_pair()[0][0]
    return X, np.vstack([X, OUTLIER])


def fit_generator(seed: int | None, epsilon: float) -> np.random.Generator:
    """The noise stream of ``PrivateFeatureScaler(epsilon=epsilon, random_state=seed)``."""
    return RunIdentity("user", "private-feature-scaler", float(epsilon), seed, 1).generator(RELEASE)


def release_sigma(d: int, epsilon: float, delta: float) -> float:
    """The scale the production ledger returns for the release at (epsilon, delta)."""
    rho = epsilon_to_rho(epsilon, delta, CONVERSION)
    return PrivacyLedger(rho, neighbouring=LIBRARY_RELATION).charge(0, RELEASE, math.sqrt(d), rho)


def released_histograms(side: int, seeds: list, epsilon: float, delta: float) -> tuple[np.ndarray, float]:
    """(H~ of one fit per seed on D (side 0) or D' (1), the noise scale): H + sigma xi (Gaussian), or
    H + Lap(b) with b = d / epsilon when delta = 0, drawn as the scaler draws them."""
    X = preprocessing_pair()[side]
    d, H = X.shape[1], feature_histograms(X)
    fresh = np.random.default_rng() if seeds[0] is None else None
    streams = [fresh if s is None else fit_generator(s, epsilon) for s in seeds]
    if delta == 0:
        b = laplace_scale(d, epsilon)
        return H + np.stack([rng.laplace(0.0, b, (d, N_BINS)) for rng in streams]), b
    sigma = release_sigma(d, epsilon, delta)
    return H + sigma * np.stack([rng.standard_normal((d, N_BINS)) for rng in streams]), sigma


def preprocessing_statistics(side: int, fits: int, variant: str = "none", level: str = "output",
                             epsilon: float = EPSILON, delta: float = DELTA,
                             first_seed: int | None = None) -> np.ndarray:
    """The statistic of ``level`` for ``fits`` fits under ``variant`` on D (0) or D' (1); fresh OS entropy
    per batch (``first_seed`` None) or seeds first_seed, first_seed + 1, ..."""
    if variant not in PREPROCESSING_VARIANTS or level not in LEVELS:
        raise ValueError(f"variant={variant!r} / level={level!r}: choose from "
                         f"{list(PREPROCESSING_VARIANTS)} / {LEVELS}")
    seeds = [None] * fits if first_seed is None else list(range(first_seed, first_seed + fits))
    noisy, scale = released_histograms(side, seeds, PREPROCESSING_VARIANTS[variant] * epsilon, delta)
    law = LAPLACE if delta == 0 else GAUSSIAN
    if level == "likelihood-ratio":
        HD, HP = (feature_histograms(X) for X in preprocessing_pair())
        if law == LAPLACE:
            return (np.abs(noisy - HD) - np.abs(noisy - HP)).sum(axis=(1, 2)) / scale
        v = HP - HD
        return (np.einsum("fdb,db->f", noisy - HD, v) - 0.5 * np.sum(v * v)) / scale**2
    uppers = np.array([ranges_from_histograms(h, scale, DEFAULT_QUANTILES, law)[1][0] for h in noisy])
    if variant == "exact-max":
        uppers[:] = preprocessing_pair()[side][:, 0].max()
    return uppers


def audit_preprocessing(variant: str = "none", level: str = "output", trials: int = 30_000, pilot: int = 10_000,
                        epsilon: float = EPSILON, delta: float = DELTA, seed: int | None = None) -> SmallNOutcome:
    """Pilot picks threshold and direction; a fresh evaluation gives the 95 % lower bound on epsilon."""
    block = max(trials, pilot)
    first = [None] * 4 if seed is None else [seed + k * block for k in range(4)]

    def batch(side: int, fits: int, k: int) -> np.ndarray:
        return preprocessing_statistics(side, fits, variant, level, epsilon, delta, first[k])

    chosen = threshold_audit(batch(0, pilot, 0), batch(1, pilot, 1), delta, n_thresholds=PILOT_THRESHOLDS)
    neg, pos = batch(0, trials, 2), batch(1, trials, 3)
    fp, fn = int(np.sum(neg > chosen.threshold)), int(np.sum(pos <= chosen.threshold))
    bound = epsilon_lower_bound(fp, trials, fn, trials, delta, direction=chosen.direction)
    mechanism = MECHANISM if delta else f"{MECHANISM} (pure, Laplace)"
    return SmallNOutcome(mechanism, variant, level, epsilon, float(bound), chosen.threshold, chosen.direction,
                         fp, fn, trials, pilot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30_000)
    parser.add_argument("--pilot", type=int, default=10_000)
    args = parser.parse_args()
    for delta in (DELTA, 0.0):
        for variant in PREPROCESSING_VARIANTS:
            for level in LEVELS:
                print(audit_preprocessing(variant, level, args.trials, args.pilot, delta=delta).as_dict(), flush=True)


if __name__ == "__main__":
    main()


__all__ = ["LEVELS", "PREPROCESSING_VARIANTS", "audit_preprocessing", "fit_generator", "preprocessing_pair",
           "preprocessing_statistics", "released_histograms"]
