"""Grey-box sensitivity audit of the private feature ranges (:mod:`dpnewton.preprocessing`).

The record-and-replay test of :mod:`.greybox` on the ranges' one release and its post-processing
(:func:`~dpnewton.preprocessing.release_ranges`, as :class:`~dpnewton.preprocessing.PrivateFeatureScaler`
runs it), under the library's add-remove relation (n private), for both laws: the Gaussian release of
the d x B histograms (L2 sensitivity sqrt(d), charged) and the pure Laplace release (L1 sensitivity d,
scale d/epsilon through the ledger's ``noise``). Both draw through
:meth:`~dpnewton.privacy.PrivacyLedger.draw_noise`, so a :class:`.greybox.RecordingLedger` records the
exact histograms and, on D', returns D's released ones. Checks (i)-(iii) of :func:`.greybox.compare_runs`
(the Laplace release's move in L1) and (iv) (:func:`.greybox.check_post_processing`): the ranges are
post-processing of the released histograms alone, so they are the same on D and D'.

Pair (:func:`ranges_pair`): n rows with features of different scales (0.1, 10 and 1000 times a standard
normal), D' = D plus the outlier :data:`OUTLIER`, far beyond every other value of feature 0 (a range read
off the data would move with it). Any row moves each of the d histograms by one count, so every release's
input moves by exactly its sensitivity (ratio 1).
"""

from __future__ import annotations

import numpy as np

from ..preprocessing import CONVERSION, DEFAULT_QUANTILES, GAUSSIAN, LAPLACE, RELEASE, release_ranges
from ..privacy.conversions import epsilon_to_rho, pure_rho
from ..privacy.neighbouring import LIBRARY_RELATION
from ..seeding import RunIdentity
from .greybox import GreyboxReport, RecordingLedger, SideRun, check_post_processing, compare_runs
from .variants import BROKEN_VARIANTS

LAWS = (GAUSSIAN, LAPLACE)
OUTLIER = (1e5, 0.0, 0.0)
SCALES = (0.1, 10.0, 1000.0)


def ranges_pair(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(X_D, X_D'): n rows of three features (:data:`SCALES`), and the same plus :data:`OUTLIER`."""
    X = np.random.default_rng([seed, 37]).standard_normal((n, len(SCALES))) * SCALES
    return X, np.vstack([X, OUTLIER])


def run_ranges_pair(pair: tuple[np.ndarray, np.ndarray], law: str, epsilon: float = 1.0, delta: float = 1e-5,
                    broken: str = "none", seed: int = 0) -> tuple[SideRun, SideRun]:
    """The ranges of ``law`` on D, then on D' replaying D's release, the same noise stream; each side's
    output is (lower, upper)."""
    if broken not in BROKEN_VARIANTS:
        raise ValueError(f"broken={broken!r} is unknown; choose one of {', '.join(BROKEN_VARIANTS)}")
    if law not in LAWS:
        raise ValueError(f"law={law!r} must be one of {', '.join(LAWS)}")
    rho = pure_rho(epsilon) if law == LAPLACE else epsilon_to_rho(epsilon, delta, CONVERSION)
    sides, replay = [], None
    for X in pair:
        ledger = RecordingLedger(rho, LIBRARY_RELATION, broken, replay)
        rng = RunIdentity("greybox", "private-feature-scaler", float(epsilon), seed, 1).generator(RELEASE)
        lower, upper, _ = release_ranges(X, epsilon, ledger, rng, DEFAULT_QUANTILES, law)
        sides.append(SideRun(X, ledger, np.stack([lower, upper])))
        replay = ledger.releases
    return sides[0], sides[1]


def ranges_greybox_audit(law: str, broken: str = "none", seed: int = 0, removal: bool = False) -> GreyboxReport:
    """Checks (i)-(iv) of one (law, variant); ``removal``: D' is D minus the outlier."""
    X, X_prime = ranges_pair(seed=seed)
    D, Dp = run_ranges_pair((X_prime, X) if removal else (X, X_prime), law, broken=broken, seed=seed)
    return check_post_processing(compare_runs(D, Dp, f"feature-ranges-{law}", LIBRARY_RELATION, broken), D, Dp)


__all__ = ["LAWS", "ranges_greybox_audit", "ranges_pair", "run_ranges_pair"]
