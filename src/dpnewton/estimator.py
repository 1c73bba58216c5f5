"""``DPLogisticRegression``: a scikit-learn classifier trained with ``dpnewton``'s private optimizers.

In the style of diffprivlib's ``LogisticRegression``: a binary logistic-regression classifier whose
fitted ``coef_`` / ``intercept_`` are differentially private. Training is one call of
:func:`dpnewton.fit` on the rows ``[x, 1] / data_norm`` (projected to the unit ball, as the
privacy analysis requires) with labels mapped to -1/+1.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from scipy import special
from sklearn.base import BaseEstimator
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from .algorithms import ALGORITHMS, AlgorithmSpec
from .api import fit as dp_fit
from .experiment import DEFAULT_CONVERSION, validate_run_arguments
from .loss import logistic_loss_terms
from .seeding import validate_seed

DEFAULT_ALGORITHM = "qu-clip"
"""Double-noise Newton with the quadratic-upper-bound SOI and clipped eigenvalues: in the claims run
(figures/claims.md, setting a, conversion bs16) it is the best double-noise variant at epsilon = 1
on a1a, protein and synthetic (qu-add on adult), and within 1.5x of Hess-clip in every cell of
claim C6."""

DEFAULT_ITERATIONS = 32
"""Best T of qu-clip at epsilon = 1 in the claims run: 32 on a1a, 16 on synthetic, 64 on adult,
256 on protein (figures/claims/robustness.csv). Tuned for the Newton variants; DP-GD needs hundreds."""

EXPECTED_FAILED_CHECKS = {
    "check_classifiers_train": (
        "it asserts predict_log_proba == log(predict_proba) with atol 1e-9, which fails where "
        "predict_proba underflows to exactly 0 (|decision| > ~745) and predict_log_proba stays "
        "finite by design; on its separable blobs the unregularized private Newton iterates "
        "reach margins in the thousands"),
}
"""scikit-learn checks this estimator fails, with the reason: pass it to
``check_estimator(DPLogisticRegression(), expected_failed_checks=EXPECTED_FAILED_CHECKS)``
(scikit-learn >= 1.6 has no estimator tag for expected failures)."""


PRIVACY_RECORD_KEYS = ("algorithm", "epsilon", "delta", "conversion", "rho", "epsilon_spent_cks",
                       "conversion_failed", "iterations", "seed", "ledger_rho_total", "n_releases",
                       "nonprivate", "accounting_events")
"""The accounting fields of a run's record kept in ``privacy_record_``. Its evaluation fields
(excess loss, training accuracy, runtime) are left out: they are computed from the exact data,
outside the (epsilon, delta) guarantee, and must not be released with the model."""


class PrivacyWarning(UserWarning):
    """Reminds that only the optimizer's output is covered by the (epsilon, delta) guarantee."""


PRIVACY_WARNING_MESSAGE = (
    "DPLogisticRegression: only coef_ and intercept_ are covered by (epsilon, delta). Anything else "
    "fitted on the same private data is not private: a scaler or other preprocessing, "
    "hyper-parameter tuning (e.g. GridSearchCV or the choice of epsilon/iterations by score), and "
    "a data_norm read off the data. Fit those on public data or account for them separately.")


def _rejection_reason(spec: AlgorithmSpec) -> str | None:
    """Why ``spec`` cannot back a private estimator; None when it can."""
    if spec.plan is None and not spec.iterative:
        return ("one-shot method: it ignores iterations and conversion and keeps no zCDP ledger "
                "(its (epsilon, delta) comes from its own analysis)")
    if spec.plan is None:
        return ("subsampled method: its noise is calibrated by an RDP accountant to (epsilon, delta), "
                "with no zCDP privacy plan summing to rho")
    if spec.nonprivate:
        return f"not private: {spec.nonprivate} is computed from the exact data"
    return None


def supported_algorithms() -> tuple[str, ...]:
    """The registry's algorithms a ``DPLogisticRegression`` can use: full batch, rho-zCDP, all private."""
    return tuple(sorted(name for name, spec in ALGORITHMS.items() if _rejection_reason(spec) is None))


def _check_algorithm(name) -> None:
    allowed = ", ".join(supported_algorithms())
    if not isinstance(name, str) or name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {allowed}")
    reason = _rejection_reason(ALGORITHMS[name])
    if reason is not None:
        raise ValueError(f"algorithm={name!r} is not supported by DPLogisticRegression ({reason}); "
                         f"choose one of {allowed}")


def _check_data_norm(data_norm) -> float:
    if data_norm is None:
        return 1.0
    if (isinstance(data_norm, bool) or not isinstance(data_norm, numbers.Real)
            or not math.isfinite(data_norm) or data_norm <= 0):
        raise ValueError(f"data_norm={data_norm!r} must be None or a finite number > 0 "
                         "(a public bound on the row norms)")
    return float(data_norm)


class DPLogisticRegression(LinearClassifierMixin, BaseEstimator):
    """Differentially private binary logistic regression (double-noise Newton by default).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter epsilon of the (epsilon, delta) guarantee.
    delta : float or None, default=None
        Privacy parameter delta; None means n^-2 for n training rows (the paper's choice).
    algorithm : str, default=DEFAULT_ALGORITHM ("qu-clip")
        A full-batch, rho-zCDP optimizer of the registry whose every step is private: one of
        :func:`supported_algorithms` (the double-noise Newton variants, DP-GD, private cubic
        Newton). Rejected with a ValueError that lists the allowed ones: the subsampled methods
        (minibatch-*, dp-sgd: noise calibrated by an accountant, no rho ledger), aop (one-shot:
        it ignores iterations and conversion and keeps no rho ledger) and the methods with a
        non-private step (dp-gd-oracle, damped-newton).
    iterations : int, default=DEFAULT_ITERATIONS (32)
        Number of updates T; the budget is split over them. The default is qu-clip's best T at
        epsilon = 1 on a1a in the claims run; DP-GD needs far more.
    conversion : str, default=dpnewton.experiment.DEFAULT_CONVERSION
        Name of the (epsilon, delta) -> rho conversion (see ``dpnewton conversions``).
    fit_intercept : bool, default=True
        Append a constant-1 column to every row before scaling; its weight gives ``intercept_``.
    data_norm : float or None, default=None
        A PUBLIC bound on the norm of the rows [x, 1] (or x without an intercept; the intercept
        column counts in the norm). Rows are divided by data_norm and then projected to the unit
        ball: a row whose norm exceeds data_norm is shrunk onto it for training, every other row
        is used as it is. None means 1 (projection only). Choosing it from the private data
        breaks the guarantee.
    random_state : int or None, default=None
        None draws fresh entropy from the operating system on every fit. An int fixes the noise
        (the benchmark's seeded stream of :func:`dpnewton.fit`): for benchmarking only, a fixed
        seed makes the noise predictable to anyone who knows it.
    hyper : dict or None, default=None
        Hyper-parameters of the algorithm, passed through as the CLI's ``--hyper KEY=VALUE``
        (e.g. ``{"grad_frac": 0.8}``); unknown keys raise a ValueError naming them. A dict
        parameter (not ``**kwargs``) so that ``get_params``, ``set_params`` and ``clone`` work as
        for any estimator; set it as a whole (``set_params(hyper={...})``). Settings that make a
        run non-private (e.g. ``reset=True``) are rejected.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two labels, sorted; ``classes_[1]`` is the positive class (+1 for the optimizer).
    coef_ : ndarray of shape (1, n_features)
        Weights on the original features: w[:d] / data_norm for the weights w on the scaled rows.
    intercept_ : ndarray of shape (1,)
        w[d] / data_norm with fit_intercept, else 0.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string column names (a DataFrame).
    n_iter_ : int
        Number of updates the optimizer made.
    epsilon_, delta_, rho_ : float
        The guarantee of this fit: delta_ is resolved (n^-2 when delta is None), rho_ the zCDP
        budget from ``conversion``.
    privacy_ledger_ : dpnewton.privacy.PrivacyLedger
        Every noisy release with its sensitivity, noise scale and rho; the rho sum to ``rho_``.
    privacy_record_ : dict
        The accounting fields of the run's record (``dpnewton.FitResult.record``, keys
        :data:`PRIVACY_RECORD_KEYS`): algorithm, epsilon, delta, conversion, rho, iterations,
        seed, ... Its evaluation fields (loss, accuracy, runtime) are not private and are dropped.

    Notes
    -----
    The model is linear in the original features: decision_function(x) = x coef_ + intercept_
    = <[x, 1] / data_norm, w>, which equals (up to rounding) the margin the optimizer saw in
    training for every training row within the bound (||[x, 1]|| <= data_norm). The projection
    onto the unit ball only affects rows outside it: they were shrunk onto the bound, so their
    training margin is the decision divided by ||[x, 1]|| / data_norm.

    Privacy. The released coef_ and intercept_ (and everything computed from them) are
    (epsilon, delta)-differentially private with respect to adding or removing one training row,
    with the number of rows n treated as public, as in the project's accounting (README, "Privacy
    accounting"): every run is rho-zCDP with rho from (epsilon, delta) by ``conversion``. Not
    covered: preprocessing fitted on the same data (scalers, feature selection), hyper-parameter
    tuning on it (GridSearchCV, choosing epsilon, iterations or the algorithm by score), and a
    data_norm chosen from the data; a :class:`PrivacyWarning` says so once per process. The set of
    labels (classes_) is also read from the data and is taken as public. numpy's floating-point
    Gaussian sampler is not hardened against floating-point side channels (Mironov 2012, "On
    significance of the least significant bits for differential privacy"), like Opacus in its
    non-secure mode; the guarantee is that of the idealized mechanism.

    scikit-learn conformance: ``check_estimator`` passes except for the checks of
    :data:`EXPECTED_FAILED_CHECKS` (pass it as ``expected_failed_checks``).
    """

    _privacy_warning_shown = False

    def __init__(self, *, epsilon=1.0, delta=None, algorithm=DEFAULT_ALGORITHM,
                 iterations=DEFAULT_ITERATIONS, conversion=DEFAULT_CONVERSION, fit_intercept=True,
                 data_norm=None, random_state=None, hyper=None):
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.iterations = iterations
        self.conversion = conversion
        self.fit_intercept = fit_intercept
        self.data_norm = data_norm
        self.random_state = random_state
        self.hyper = hyper

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = False
        return tags

    def _warn_privacy(self) -> None:
        cls = type(self)
        if not cls._privacy_warning_shown:
            cls._privacy_warning_shown = True
            warnings.warn(PRIVACY_WARNING_MESSAGE, PrivacyWarning, stacklevel=3)

    def fit(self, X, y):
        """Fit privately on (X, y) with two classes; returns self."""
        _check_algorithm(self.algorithm)
        validate_run_arguments(self.epsilon, self.delta, self.iterations, self.conversion)
        data_norm = _check_data_norm(self.data_norm)
        seed = validate_seed(self.random_state, "random_state")
        if self.hyper is not None and not isinstance(self.hyper, dict):
            raise ValueError(f"hyper={self.hyper!r} must be None or a dict of hyper-parameters")
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y")
        classes = np.unique(y)
        if y_type != "binary":
            raise ValueError("Only binary classification is supported. The type of the target is "
                             f"{y_type}; classes found: {classes.tolist()}")
        if len(classes) < 2:
            raise ValueError(f"y has one class only ({classes.tolist()}); DPLogisticRegression "
                             "needs two classes")
        self._warn_privacy()
        n, d = X.shape
        rows = np.hstack([X, np.ones((n, 1))]) if self.fit_intercept else X
        signs = np.where(y == classes[1], 1.0, -1.0)
        result = dp_fit(rows / data_norm, signs, algorithm=self.algorithm, epsilon=self.epsilon,
                        delta=self.delta, iterations=self.iterations, seed=seed,
                        conversion=self.conversion, excess_loss=False, **dict(self.hyper or {}))
        if result.ledger.nonprivate:
            raise ValueError(f"hyper={self.hyper!r} makes the run non-private "
                             f"({'; '.join(result.ledger.nonprivate)}); DPLogisticRegression "
                             "releases private models only")
        w = np.asarray(result.weights, dtype=np.float64) / data_norm
        self.classes_ = classes
        self.coef_ = w[:d].reshape(1, d).copy()
        self.intercept_ = np.array([w[d] if self.fit_intercept else 0.0])
        self.n_iter_ = int(result.record["iterations"])
        self.privacy_ledger_ = result.ledger
        self.privacy_record_ = {k: result.record[k] for k in PRIVACY_RECORD_KEYS if k in result.record}
        self.epsilon_ = float(result.record["epsilon"])
        self.delta_ = float(result.record["delta"])
        self.rho_ = float(result.record["rho"])
        return self

    def predict_proba(self, X):
        """Probabilities of classes_[0] and classes_[1]: expit(-decision), expit(decision)."""
        check_is_fitted(self)
        scores = self.decision_function(X)
        return np.column_stack([special.expit(-scores), special.expit(scores)])

    def predict_log_proba(self, X):
        """log predict_proba, as -log(1 + exp(-/+decision)): finite for any margin."""
        check_is_fitted(self)
        scores = self.decision_function(X)
        return np.column_stack([-logistic_loss_terms(-scores), -logistic_loss_terms(scores)])


__all__ = ["DEFAULT_ALGORITHM", "DEFAULT_ITERATIONS", "DPLogisticRegression", "EXPECTED_FAILED_CHECKS",
           "PRIVACY_RECORD_KEYS", "PrivacyWarning", "supported_algorithms"]
