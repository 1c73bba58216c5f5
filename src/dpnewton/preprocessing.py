"""``PrivateFeatureScaler``: per-feature ranges of raw numeric data estimated inside a privacy budget.

Neighbouring relation: add or remove one row, the number of rows n private
(:data:`dpnewton.privacy.neighbouring.LIBRARY_RELATION`). No noise scale below depends on n.

Mechanism (one Gaussian release, then post-processing only):

1. Public bin grid (:data:`BIN_EDGES`), fixed before any data is seen: 0 and the powers
   +-8^k, k = :data:`LOWEST_POWER` .. :data:`HIGHEST_POWER` (3.8e-6 .. 8.6e9). Bin j of feature f is
   [e_j, e_{j+1}); a value beyond the outermost edges is counted in the outermost bin.
2. Release H~ = H + sigma xi, xi ~ N(0, I_{d x B}): H[f, j] = #{i : x_if in bin j}. Each row adds
   exactly one count to each feature's histogram, so adding or removing a row moves d entries of H
   by 1: L2 sensitivity Delta = sqrt(d). Gaussian mechanism, rho = Delta^2/(2 sigma^2) [BS16
   Prop. 1.6]; rho is calibrated to (epsilon, delta) exactly with the ``gdp`` conversion (one
   Gaussian release is mu-GDP with mu = Delta/sigma = sqrt(2 rho), Dong, Roth & Su 2019,
   Cor. 2.13; :mod:`dpnewton.privacy.conversions`), so sigma = sqrt(d)/sqrt(2 rho).
   Pure epsilon-DP (``delta=0``, :func:`laplace_release`): H~ = H + Lap(b)^{d x B} instead; adding or
   removing a row moves d entries by 1, L1 sensitivity Delta_1 = d, so b = d / epsilon is epsilon-DP
   (Laplace mechanism, Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014, Thm 3.6). Recorded with
   the nominal rho = epsilon^2/2 (:func:`~dpnewton.privacy.conversions.pure_rho`, BS16 Prop. 1.4).
3. Post-processing (no further access to X), per feature: the bins whose noisy count reaches
   tau (public: an empty bin anywhere in the grid passes with probability about
   :data:`FALSE_BIN_RATE`; Gaussian tau = z sigma, z = Phi^-1(1 - FALSE_BIN_RATE/(d B)); Laplace
   tau = b ln(d B / (2 FALSE_BIN_RATE)), :func:`thresholds`) and the CDF of their noisy counts; when no
   bin of a feature passes: the window of :data:`WINDOW`
   consecutive bins with the largest noisy sum (a noisy max over windows: a window's signal is the
   rows in it, so the bulk of the data wins even when no single bin
   stands above the noise), inside it the bins whose noisy count reaches a threshold an empty bin
   passes with probability 2.3 % (:data:`BIN_THRESHOLD_Z` sigma; b ln(1/0.046) for Laplace; else the
   window's largest bin). The quantiles q_lo,
   q_hi (:attr:`PrivateFeatureScaler.quantiles`) of the kept counts' CDF, interpolated inside their
   bin (log-uniform, as the grid), are the feature's range [lower_f, upper_f].

Transform: x -> (clip(x, lower, upper) - center) / half_width with center = (lower + upper)/2 and
half_width = (upper - lower)/2, so every output lies in [-1, 1]. Without centering (sparse X, or
``center=False``) the range is widened to hold 0, center = 0 and half_width = max(|lower|, |upper|):
zeros stay zeros, output in [-1, 1].

``bounds=`` (per-feature (lo, hi) known without the private data) skips the release: nothing is spent.

The training rows of :class:`dpnewton.DPLogisticRegression` are built from these ranges (or a public
row-norm bound) by :mod:`dpnewton.training_rows`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy import sparse, special
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .privacy.conversions import epsilon_to_rho, pure_rho, rho_to_epsilon
from .privacy.ledger import GAUSSIAN, LAPLACE, PrivacyLedger   # the release's law: delta > 0, delta = 0 (pure)
from .privacy.neighbouring import LIBRARY_DELTA, LIBRARY_RELATION, relation_sentence
from .seeding import RunIdentity, validate_seed

GRID_BASE = 8.0
LOWEST_POWER = -6
HIGHEST_POWER = 11
_MAGNITUDES = GRID_BASE ** np.arange(LOWEST_POWER, HIGHEST_POWER + 1)
BIN_EDGES = np.concatenate([-_MAGNITUDES[::-1], [0.0], _MAGNITUDES])
"""The public grid: 0 and +-8^k for k in [LOWEST_POWER, HIGHEST_POWER]; B = len(BIN_EDGES) - 1 bins. Base 8
(not 2) so that a bin holds enough rows to stand above the noise (chosen on the training rows of
benchmarks/raw_data.py's breast-cancer split, an internal 70/30 split of them, against base 4 and 16)."""
N_BINS = len(BIN_EDGES) - 1
FALSE_BIN_RATE = 1e-3
"""Probability budget for an empty bin anywhere in the d x B grid to pass the threshold tau."""
WINDOW = 3
"""Consecutive bins the fallback window spans (3 base-8 bins: a factor of up to 512)."""
BIN_THRESHOLD_Z = 2.0
"""A bin of the chosen window counts when its noisy count is >= 2 sigma (an empty bin: 2.3 %)."""
DEFAULT_QUANTILES = (0.05, 0.95)
"""Clip at the 5 % and 95 % points of the released histograms: a range too wide costs signal in every
row, one too narrow saturates a few (with the log-uniform interpolation, mean accuracy at epsilon 1
0.86 / 0.86 / 0.87 for (0.01, 0.99) / (0.05, 0.95) / (0.1, 0.9) on the breast-cancer training rows'
internal split, 0.69 / 0.74 / 0.74 on the synthetic data of tests/test_estimator.py)."""
CONVERSION = "gdp"
"""The (epsilon, delta) -> rho conversion of the single Gaussian release (exact for it)."""
RELEASE = "feature-histograms"


def threshold_z(d: int) -> float:
    """tau / sigma = Phi^-1(1 - FALSE_BIN_RATE / (d B)): public (d and B only)."""
    return float(-special.ndtri(FALSE_BIN_RATE / (d * N_BINS)))


def thresholds(d: int, scale: float, law: str) -> tuple[float, float]:
    """(tau, window threshold) of step 3 for noise ``scale`` (Gaussian sigma, or Laplace b): the noisy
    count an empty bin exceeds with probability FALSE_BIN_RATE/(d B), resp. Q(BIN_THRESHOLD_Z) = 2.3 %.
    Laplace tails: P(Lap(b) >= t) = exp(-t/b)/2. Public (d, B, the scale)."""
    if law == GAUSSIAN:
        return threshold_z(d) * scale, BIN_THRESHOLD_Z * scale
    window_rate = float(special.ndtr(-BIN_THRESHOLD_Z))
    return scale * math.log(d * N_BINS / (2 * FALSE_BIN_RATE)), scale * math.log(1 / (2 * window_rate))


def histogram_sensitivity(d: int, law: str) -> float:
    """One row moves one count of each of the d histograms: L2 sensitivity sqrt(d) (Gaussian), L1
    sensitivity d (Laplace) (module docstring step 2)."""
    return math.sqrt(d) if law == GAUSSIAN else float(d)


def laplace_scale(d: int, epsilon: float) -> float:
    """b = Delta_1 / epsilon with Delta_1 = d (:func:`histogram_sensitivity`): the Laplace mechanism's
    epsilon-DP scale [Dwork & Roth 2014, Thm 3.6]. Public (d, epsilon)."""
    return histogram_sensitivity(d, LAPLACE) / float(epsilon)


def bin_indices(values: np.ndarray) -> np.ndarray:
    """Bin of each value on :data:`BIN_EDGES` (values beyond the outer edges in the outer bins)."""
    return np.clip(np.searchsorted(BIN_EDGES, values, side="right") - 1, 0, N_BINS - 1)


def feature_histograms(X) -> np.ndarray:
    """H (d, B): H[f, j] = number of rows whose feature f falls in bin j (exact; the private input
    of the release). Sparse X: the implicit zeros are counted in the bin of 0."""
    n, d = X.shape
    H = np.zeros((d, N_BINS))
    if sparse.issparse(X):                          # the stored entries block by block, no copy of X
        X = X.tocsr()
        flat = H.reshape(-1)
        for start in range(0, X.nnz, 65536):
            block = slice(start, start + 65536)
            flat += np.bincount(X.indices[block] * N_BINS + bin_indices(X.data[block]), minlength=d * N_BINS)
        H[:, int(bin_indices(np.array([0.0]))[0])] += n - np.bincount(X.indices, minlength=d)
        return H
    offsets = np.arange(d) * N_BINS
    for start in range(0, n, 8192):                 # bounded memory: one block of bin indices at a time
        block = bin_indices(X[start:start + 8192]) + offsets
        H += np.bincount(block.ravel(), minlength=d * N_BINS).reshape(d, N_BINS)
    return H


def ranges_from_histograms(noisy: np.ndarray, scale: float, quantiles: tuple[float, float],
                           law: str = "gaussian") -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per feature from the released histograms (post-processing, module docstring step 3);
    ``scale`` and ``law``: the release's noise (Gaussian sigma or Laplace b)."""
    d = noisy.shape[0]
    window_sums = sum(noisy[:, k:N_BINS - WINDOW + 1 + k] for k in range(WINDOW))
    start = np.argmax(window_sums, axis=1)
    lower, upper = np.empty(d), np.empty(d)
    tau, window_tau = thresholds(d, scale, law)
    for f in range(d):
        kept = np.where(noisy[f] >= tau, noisy[f], 0.0)
        window = slice(start[f], start[f] + WINDOW)
        if kept.sum() <= 0:
            kept[window] = np.where(noisy[f, window] >= window_tau, noisy[f, window], 0.0)
        if kept.sum() <= 0:  # nothing in the window stands out either: its largest bin
            kept[start[f] + int(np.argmax(noisy[f, window]))] = 1.0
        cdf = np.cumsum(kept)
        cdf /= cdf[-1]
        lower[f], upper[f] = (_quantile(cdf, q) for q in quantiles)
    return lower, upper


def _quantile(cdf: np.ndarray, q: float) -> float:
    """The q-quantile of a binned distribution with CDF ``cdf`` on :data:`BIN_EDGES`: log-uniform inside a
    bin [8^k, 8^(k+1)) (mirrored for negative bins), uniform inside the bin around 0."""
    j = min(int(np.searchsorted(cdf, q, side="left" if q > 0 else "right")), N_BINS - 1)  # a bin with mass
    below = cdf[j - 1] if j > 0 else 0.0
    mass = cdf[j] - below
    frac = 0.0 if mass <= 0 else min(max((q - below) / mass, 0.0), 1.0)
    a, b = BIN_EDGES[j], BIN_EDGES[j + 1]
    if a * b > 0:   # a power-of-8 bin: log-uniform inside it, as the grid itself
        return float(np.sign(a) * abs(a) ** (1.0 - frac) * abs(b) ** frac)
    return float(a + frac * (b - a))


def gaussian_release(H: np.ndarray, epsilon: float, ledger: PrivacyLedger, rng) -> tuple[np.ndarray, float]:
    """(H + sigma xi, sigma): the whole budget of ``ledger`` on one Gaussian release of L2 sensitivity
    sqrt(d), sigma = sqrt(d)/sqrt(2 rho) (module docstring step 2)."""
    sigma = ledger.charge(0, RELEASE, histogram_sensitivity(H.shape[0], GAUSSIAN), ledger.budget_rho)
    return H + ledger.draw_noise(RELEASE, H, sigma, rng), sigma


def laplace_release(H: np.ndarray, epsilon: float, ledger: PrivacyLedger, rng) -> tuple[np.ndarray, float]:
    """(H + Lap(b), b), b = :func:`laplace_scale` (d, epsilon): the pure epsilon-DP release (delta = 0),
    recorded on ``ledger`` as one event of the whole epsilon and drawn through it (module docstring step 2)."""
    d = H.shape[0]
    sensitivity = histogram_sensitivity(d, LAPLACE)
    b = ledger.noise(RELEASE, laplace_scale(d, epsilon))
    ledger.charge_event({"mechanism": "laplace", "quantity": RELEASE, "epsilon": float(epsilon), "delta": 0.0,
                         "l1_sensitivity": sensitivity, "scale": laplace_scale(d, epsilon)})
    return H + ledger.draw_noise(RELEASE, H, b, rng, sensitivity, law=LAPLACE), b


def release_ranges(X, epsilon: float, ledger: PrivacyLedger, rng, quantiles: tuple[float, float],
                   law: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, H~): the release of ``law`` charged to ``ledger`` and its post-processing (module
    docstring steps 2-3); nothing else reads X."""
    noisy, scale = (laplace_release if law == LAPLACE else gaussian_release)(feature_histograms(X), float(epsilon),
                                                                             ledger, rng)
    lower, upper = ranges_from_histograms(noisy, scale, quantiles, law)
    return lower, upper, noisy


def check_bounds(bounds, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) arrays from ``bounds`` (a sequence of d pairs (lo, hi), lo < hi, finite)."""
    try:
        array = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        array = None
    if array is None or array.shape != (d, 2):
        raise ValueError(f"bounds must be {d} pairs (lo, hi), one per feature, known without the private "
                         f"data; got an object of shape {getattr(array, 'shape', None)}")
    if not np.isfinite(array).all() or not (array[:, 0] < array[:, 1]).all():
        bad = int(np.flatnonzero(~(np.isfinite(array).all(axis=1) & (array[:, 0] < array[:, 1])))[0])
        raise ValueError(f"bounds[{bad}] = {tuple(array[bad])} must be finite with lo < hi")
    return array[:, 0].copy(), array[:, 1].copy()


def check_quantiles(quantiles) -> tuple[float, float]:
    if (not isinstance(quantiles, (tuple, list)) or len(quantiles) != 2
            or not all(isinstance(q, numbers.Real) and not isinstance(q, bool) for q in quantiles)
            or not 0.0 <= quantiles[0] < quantiles[1] <= 1.0):
        raise ValueError(f"quantiles={quantiles!r} must be a pair (q_lo, q_hi) with 0 <= q_lo < q_hi <= 1")
    return float(quantiles[0]), float(quantiles[1])


def affine_map(lower: np.ndarray, upper: np.ndarray, centered: bool) -> tuple[np.ndarray, ...]:
    """(lower, upper, center, half_width) of the map x -> (clip(x, lower, upper) - center) / half_width
    (module docstring). Uncentred, the range is widened to hold 0 (so zeros stay zeros, sparse or not)."""
    if centered:
        return lower, upper, (lower + upper) / 2.0, (upper - lower) / 2.0
    lower, upper = np.minimum(lower, 0.0), np.maximum(upper, 0.0)
    return lower, upper, np.zeros_like(lower), np.maximum(-lower, upper)


class PrivateFeatureScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Clip and scale raw numeric features to [-1, 1] with per-feature ranges estimated privately.

    Guarantee: the fitted ranges (and everything computed from them) are (epsilon, delta)-DP
    with respect to adding or removing one row, n private (one Gaussian release of the per-feature
    histograms on a public log-scale grid, L2 sensitivity sqrt(d); with ``delta=0`` one Laplace release,
    L1 sensitivity d, pure epsilon-DP; module docstring for the formulas and their sources). With
    ``bounds`` nothing is released and nothing is spent.

    Parameters
    ----------
    epsilon, delta : float, float or None
        Budget of the release; delta None is the library's public default (LIBRARY_DELTA); delta 0 is
        the pure Laplace release (:func:`laplace_release`).
    bounds : sequence of (lo, hi) pairs or None
        Per-feature ranges known WITHOUT the private data. Given: no release, no spend.
    quantiles : (float, float), default DEFAULT_QUANTILES (0.05, 0.95)
        The quantiles of the released (thresholded) histograms that become each feature's range.
    center : bool, default True
        Map each range onto [-1, 1]; False scales by max(|lo|, |hi|) only (zeros stay zero;
        always so for sparse X).
    random_state : int or None
        None: fresh OS entropy on every fit. An int fixes the noise, for benchmarking only.

    Attributes
    ----------
    lower_, upper_ : ndarray (n_features,)
        The ranges (released, or the public bounds).
    center_, half_width_ : ndarray (n_features,)
        The affine map of :meth:`transform`.
    noisy_histograms_ : ndarray (n_features, B) or None
        The released H~ (None with ``bounds``).
    epsilon_, delta_, rho_ : float
        The budget spent (0 with ``bounds``).
    privacy_ledger_ : PrivacyLedger
        The release with its sensitivity, sigma and rho (empty with ``bounds``).
    privacy_record_ : dict
        The guarantee, the mechanism's parameters and the released ranges; never n.
    """

    def __init__(self, *, epsilon=1.0, delta=None, bounds=None, quantiles=DEFAULT_QUANTILES, center=True,
                 random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.quantiles = quantiles
        self.center = center
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = self.random_state is None and self.bounds is None
        return tags

    def fit(self, X, y=None):
        """Estimate the ranges (one private release unless ``bounds``); returns self."""
        seed = validate_seed(self.random_state, "random_state")
        quantiles = check_quantiles(self.quantiles)
        if not isinstance(self.center, (bool, np.bool_)):
            raise ValueError(f"center={self.center!r} must be True or False")
        private = self.bounds is None
        if private:
            delta = LIBRARY_DELTA if self.delta is None else self.delta
            law = LAPLACE if delta == 0 else GAUSSIAN
            rho = pure_rho(self.epsilon) if law == LAPLACE else epsilon_to_rho(self.epsilon, delta, CONVERSION)
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64)
        d = X.shape[1]
        if private:
            ledger = PrivacyLedger(rho, neighbouring=LIBRARY_RELATION)
            self.lower_, self.upper_, self.noisy_histograms_ = self._private_ranges(X, ledger, quantiles, seed, law)
            self.epsilon_, self.delta_, self.rho_ = float(self.epsilon), float(delta), float(rho)
        else:
            self.lower_, self.upper_ = check_bounds(self.bounds, d)
            ledger = PrivacyLedger(0.0, neighbouring=LIBRARY_RELATION)
            self.noisy_histograms_ = None
            self.epsilon_, self.delta_, self.rho_ = 0.0, 0.0, 0.0
        self.lower_, self.upper_, self.center_, self.half_width_ = affine_map(
            self.lower_, self.upper_, bool(self.center) and not sparse.issparse(X))
        self.privacy_ledger_ = ledger
        self.privacy_record_ = self._record(ledger, quantiles)
        return self

    def _private_ranges(self, X, ledger: PrivacyLedger, quantiles, seed,
                        law: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`release_ranges` with the fit's noise stream: (lower, upper, H~)."""
        rng = RunIdentity("user", "private-feature-scaler", float(self.epsilon), seed, 1).generator(RELEASE)
        return release_ranges(X, self.epsilon, ledger, rng, quantiles, law)

    def _record(self, ledger: PrivacyLedger, quantiles) -> dict:
        record = {"epsilon": self.epsilon_, "delta": self.delta_, "rho": self.rho_,
                  "neighbouring": LIBRARY_RELATION, "lower": self.lower_.tolist(), "upper": self.upper_.tolist()}
        if self.noisy_histograms_ is None:
            return {**record, "source": "public bounds (no release)"}
        common = {**record, "source": "private histograms", "release": RELEASE, "window": WINDOW,
                  "quantiles": list(quantiles), "bins": N_BINS}
        if not ledger.entries:   # the pure release: one Laplace event
            event = ledger.events[0]
            return {**common, "noise": LAPLACE, "conversion": "pure", "epsilon_spent": event["epsilon"],
                    "guarantee": f"epsilon-DP (pure) {relation_sentence(LIBRARY_RELATION)}",
                    "l1_sensitivity": event["l1_sensitivity"], "laplace_scale": event["scale"],
                    "threshold": thresholds(len(self.lower_), event["scale"], LAPLACE)[0]}
        entry = ledger.entries[0]
        return {**common, "noise": GAUSSIAN, "conversion": CONVERSION,
                "epsilon_spent": rho_to_epsilon(ledger.spent_rho, self.delta_, CONVERSION),
                "guarantee": f"(epsilon, delta)-DP {relation_sentence(LIBRARY_RELATION)}",
                "sensitivity": entry.sensitivity, "sigma": entry.sigma,
                "threshold_z": threshold_z(len(self.lower_)), "ledger_rho_total": ledger.spent_rho}

    def transform(self, X):
        """(clip(x, lower_, upper_) - center_) / half_width_, in [-1, 1]; sparse X stays sparse."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False, copy=True)
        if sparse.issparse(X):
            if np.any(self.center_ != 0):
                raise ValueError("this scaler was fitted with center=True on dense data; centering would make "
                                 "a sparse X dense: pass a dense X, or fit with center=False")
            cols = X.indices
            np.clip(X.data, self.lower_[cols], self.upper_[cols], out=X.data)
            X.data /= np.where(self.half_width_ > 0, self.half_width_, 1.0)[cols]
            np.clip(X.data, -1.0, 1.0, out=X.data)
            return X
        np.clip(X, self.lower_, self.upper_, out=X)
        X -= self.center_
        X /= np.where(self.half_width_ > 0, self.half_width_, 1.0)
        return np.clip(X, -1.0, 1.0, out=X)     # (hi - c)/h may round to 1 + 2^-52


__all__ = ["BIN_EDGES", "DEFAULT_QUANTILES", "N_BINS", "PrivateFeatureScaler", "affine_map", "check_bounds",
           "feature_histograms", "gaussian_release", "histogram_sensitivity", "laplace_release", "laplace_scale",
           "ranges_from_histograms", "release_ranges", "thresholds"]
