"""``DPLogisticRegression``: a scikit-learn classifier trained with ``dpnewton``'s private optimizers.

In the style of diffprivlib's ``LogisticRegression``: a logistic-regression classifier whose fitted
``coef_`` / ``intercept_`` are differentially private. Each binary model is trained on the rows
``[x, 1] / data_norm`` (projected to the unit ball, as the privacy analysis requires) with labels
mapped to -1/+1; more than two classes are fitted one-vs-rest, the budget split across the models.

Guarantee, stated once (:data:`GUARANTEE`): the released model is (epsilon, delta)-DP with respect
to adding or removing one training row, with the number of rows private
(:mod:`dpnewton.privacy.neighbouring`, relation ``add-remove``).
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from scipy import sparse, special
from sklearn.base import BaseEstimator
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .algorithms import ALGORITHMS, AlgorithmSpec, get_algorithm
from .api import DATASET_NAME
from .experiment import (DEFAULT_CONVERSION, check_run, result_record, resolve_budget, run_algorithm, run_at_rho,
                         validate_iterations)
from .loss import LogisticProblem
from .privacy.neighbouring import LIBRARY_RELATION, relation_sentence
from .seeding import validate_seed

DEFAULT_ALGORITHM = "objpert"
"""Objective perturbation with the tight privacy profile: the best rule with no tuning on the private
data in the study of docs/default_rule.md (five datasets, epsilon in {0.1, 1, 10}, relation
add-remove): within 1.25x of the oracle-tuned best in 9 of 15 cells (median 1.21x, max 3.51x),
against 3 of 15 for tail-averaged DP-GD and 0 for tail-averaged precond-dp-gd with the snr T rule.
It has no iteration count, step size or regulariser to choose: Lambda follows from epsilon alone."""

DEFAULT_MAX_NORM = 100.0
"""Public radius of the released weights on the scaled rows: every fitted w is projected onto
||w|| <= max_norm (post-processing). A margin of 100 already means a probability within 4e-44 of 0 or 1."""

GUARANTEE = (f"coef_ and intercept_ are (epsilon, delta)-differentially private {relation_sentence(LIBRARY_RELATION)}")
"""The estimator's guarantee in one sentence (README, docstrings and ``privacy_record_`` say the same)."""

PRIVACY_RECORD_KEYS = ("algorithm", "epsilon", "delta", "conversion", "rho", "neighbouring", "epsilon_spent_cks",
                       "conversion_failed", "iterations", "seed", "ledger_rho_total", "n_releases",
                       "nonprivate", "accounting_events")
"""The accounting fields of a run's record kept in ``privacy_record_``. Its evaluation fields
(excess loss, training accuracy, runtime) are left out: they are computed from the exact data,
outside the (epsilon, delta) guarantee, and must not be released with the model."""


class PrivacyWarning(UserWarning):
    """Reminds that only the optimizer's output is covered by the (epsilon, delta) guarantee."""


class DataNormWarning(UserWarning):
    """``data_norm=None``: the rows are assumed to have norm <= 1 (larger rows are shrunk onto it)."""


class ProjectionWarning(UserWarning):
    """The optimizer's weights left the public radius ``max_norm`` and were projected back onto it."""


PRIVACY_WARNING_MESSAGE = (
    "DPLogisticRegression: only coef_ and intercept_ are covered by (epsilon, delta). Anything else "
    "fitted on the same private data is not private: a scaler or other preprocessing, "
    "hyper-parameter tuning (e.g. GridSearchCV or the choice of epsilon/iterations by score), and "
    "a data_norm read off the data. Fit those on public data or account for them separately.")
DATA_NORM_MESSAGE = (
    "DPLogisticRegression: data_norm=None assumes every row [x, 1] has norm <= 1; longer rows are "
    "shrunk onto the unit ball for training, which can cost accuracy. Pass data_norm, a public bound "
    "on the row norms (not one read off the private data).")


def _rejection_reason(spec: AlgorithmSpec) -> str | None:
    """Why ``spec`` cannot back a private estimator; None when it can."""
    if LIBRARY_RELATION not in spec.relations:
        return (f"its noise is calibrated only with n public ({', '.join(spec.relations)}), not for the "
                f"estimator's {LIBRARY_RELATION!r} relation")
    if spec.nonprivate:
        return f"not private: {spec.nonprivate} is computed from the exact data"
    return None


def supported_algorithms() -> tuple[str, ...]:
    """The registry's algorithms a ``DPLogisticRegression`` can use: calibrated for ``add-remove``
    (n private) and private in every step."""
    return tuple(sorted(name for name, spec in ALGORITHMS.items() if _rejection_reason(spec) is None))


def _check_algorithm(name) -> AlgorithmSpec:
    allowed = ", ".join(supported_algorithms())
    if not isinstance(name, str) or name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {allowed}")
    reason = _rejection_reason(ALGORITHMS[name])
    if reason is not None:
        raise ValueError(f"algorithm={name!r} is not supported by DPLogisticRegression ({reason}); "
                         f"choose one of {allowed}")
    return ALGORITHMS[name]


def _check_iterations(iterations, spec: AlgorithmSpec) -> int:
    """T: 1 for a one-shot method (it ignores T); an iterative method needs a public T."""
    if not spec.iterative:
        return 1 if iterations is None else validate_iterations(iterations)
    if iterations is None:
        raise ValueError(f"algorithm={spec.name!r} needs iterations (T, chosen without the private data: "
                         "tuning it on them is not covered by the guarantee), e.g. iterations=1000 with "
                         "hyper={'average': 'tail'}")
    return validate_iterations(iterations)


def _check_positive(value, name: str, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or value <= 0):
        raise ValueError(f"{name}={value!r} must be {'None or ' if allow_none else ''}a finite number > 0")
    return float(value)


def _check_data_norm(data_norm) -> float:
    data_norm = _check_positive(data_norm, "data_norm", allow_none=True)
    if data_norm is None:
        warnings.warn(DATA_NORM_MESSAGE, DataNormWarning, stacklevel=4)
        return 1.0
    if not 1e-150 < data_norm < 1e150:
        raise ValueError(f"data_norm={data_norm!r} is outside [1e-150, 1e150]: the scaled rows or "
                         "weights would overflow; rescale the features")
    return data_norm


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r} must be True or False")
    return bool(value)


def _scaled_rows(X, fit_intercept: bool, data_norm: float):
    """[x, 1] / data_norm (or x / data_norm), dense or CSR as X."""
    n = X.shape[0]
    if sparse.issparse(X):
        rows = sparse.hstack([X, np.ones((n, 1))], format="csr") if fit_intercept else X.tocsr()
        return rows * (1.0 / data_norm)
    rows = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    return rows / data_norm


def _project(w: np.ndarray, max_norm: float) -> tuple[np.ndarray, bool]:
    """w projected onto the ball ||w|| <= max_norm (post-processing); whether it moved."""
    norm = float(np.linalg.norm(w))
    if norm <= max_norm:
        return w, False
    return w * (max_norm / norm), True


class DPLogisticRegression(LinearClassifierMixin, BaseEstimator):
    """Differentially private logistic regression (objective perturbation by default).

    Guarantee: coef_ and intercept_ are (epsilon, delta)-differentially private with respect to
    adding or removing one training row, with the number of rows private (:data:`GUARANTEE`).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter epsilon of the (epsilon, delta) guarantee.
    delta : float or None, default=None
        Privacy parameter delta; None means 1e-5 (a public constant: n^-2 would read the private
        n). Refused when delta >= 1/n, which would allow releasing a row in the clear.
    algorithm : str, default=DEFAULT_ALGORITHM ("objpert")
        One of :func:`supported_algorithms`: an optimizer of the registry calibrated for the
        ``add-remove`` relation and private in every step: objective perturbation (``objpert``,
        the default: the benchmark's best rule without tuning, docs/default_rule.md), DP-GD and
        preconditioned DP-GD. The zCDP methods release the row count from 2 % of their budget
        and calibrate every later release to it. The paper's double-noise Newton variants are
        calibrated with n public only (docs/privacy_audit.md, small n).
    iterations : int or None, default=None
        Number of updates T of an iterative method (the budget is split over them); it must be
        chosen without the private data. None: not used by objpert; an iterative method then
        raises a ValueError.
    conversion : str, default=dpnewton.experiment.DEFAULT_CONVERSION
        Name of the (epsilon, delta) -> rho conversion of the zCDP methods (``dpnewton conversions``).
    fit_intercept : bool, default=True
        Append a constant-1 column to every row before scaling; its weight gives ``intercept_``.
    data_norm : float or None, default=None
        A PUBLIC bound on the norm of the rows [x, 1] (or x without an intercept). Rows are divided
        by data_norm and then projected to the unit ball. None assumes 1 and warns
        (:class:`DataNormWarning`). Choosing it from the private data breaks the guarantee.
    max_norm : float, default=DEFAULT_MAX_NORM (100)
        Public radius of the weights on the scaled rows: the fitted w is projected onto
        ||w|| <= max_norm (post-processing; a :class:`ProjectionWarning` says when it acts), so no
        fit is unbounded.
    random_state : int or None, default=None
        None draws fresh entropy from the operating system on every fit. An int fixes the noise:
        for benchmarking only, a fixed seed makes the noise predictable to anyone who knows it.
    hyper : dict or None, default=None
        Hyper-parameters of the algorithm (e.g. ``{"average": "tail"}`` for DP-GD); unknown keys
        raise a ValueError naming them. Settings that make a run non-private are rejected.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted; with two classes ``classes_[1]`` is the positive class.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights on the original features: w[:d] / data_norm for the weights w on the scaled rows
        (one row per class one-vs-rest when there are more than two classes).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        w[d] / data_norm with fit_intercept, else 0.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string column names (a DataFrame).
    n_iter_ : int
        Number of updates of the optimizer (1 for objpert).
    epsilon_, delta_, rho_ : float
        The guarantee of this fit: delta_ resolved, rho_ the zCDP budget from ``conversion`` (objpert,
        calibrated to (epsilon, delta) directly, records it and spends none of it).
    privacy_ledgers_ : list of dpnewton.privacy.PrivacyLedger
        One per binary model (one-vs-rest: one per class): every release with its sensitivity,
        noise scale and rho.
    privacy_ledger_ : dpnewton.privacy.PrivacyLedger
        ``privacy_ledgers_[0]`` (two classes only).
    privacy_record_ : dict
        The accounting fields of the fit (keys :data:`PRIVACY_RECORD_KEYS`, then ``guarantee``,
        ``composition`` and, one-vs-rest, ``per_class``: each model's record). Evaluation fields
        (loss, accuracy, runtime) are not private and are dropped.

    Notes
    -----
    decision_function(x) = x coef_ + intercept_ = <[x, 1] / data_norm, w>, the margin the optimizer
    saw in training for every training row within the bound (||[x, 1]|| <= data_norm).

    Composition across classes (one-vs-rest with K > 2 classes, every row in every model): a zCDP
    method gives each model rho/K (zCDP adds up, BS16 Lemma 2.3); objpert gives each model
    (epsilon/K, delta/K) (basic composition). The set of labels (classes_) is read from the data and
    taken as public. Not covered by the guarantee: preprocessing fitted on the same data, tuning on
    it, and a data_norm chosen from it (a :class:`PrivacyWarning` says so once per process).
    numpy's floating-point Gaussian sampler is not hardened against floating-point side channels
    (Mironov 2012); the guarantee is that of the idealized mechanism. ``sample_weight`` is refused:
    a weighted row moves the sums by its weight, so the sensitivities above would not hold.
    """

    _privacy_warning_shown = False

    def __init__(self, *, epsilon=1.0, delta=None, algorithm=DEFAULT_ALGORITHM, iterations=None,
                 conversion=DEFAULT_CONVERSION, fit_intercept=True, data_norm=None, max_norm=DEFAULT_MAX_NORM,
                 random_state=None, hyper=None):
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.iterations = iterations
        self.conversion = conversion
        self.fit_intercept = fit_intercept
        self.data_norm = data_norm
        self.max_norm = max_norm
        self.random_state = random_state
        self.hyper = hyper

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _warn_privacy(self) -> None:
        cls = type(self)
        if not cls._privacy_warning_shown:
            cls._privacy_warning_shown = True
            warnings.warn(PRIVACY_WARNING_MESSAGE, PrivacyWarning, stacklevel=3)

    def _validated(self) -> dict:
        """Every parameter checked before any data work; the resolved values."""
        spec = _check_algorithm(self.algorithm)
        T = _check_iterations(self.iterations, spec)
        if self.hyper is not None and not isinstance(self.hyper, dict):
            raise ValueError(f"hyper={self.hyper!r} must be None or a dict of hyper-parameters")
        check_run(spec.name, self.epsilon, self.delta, T, self.conversion, LIBRARY_RELATION, self.hyper)
        return {"spec": spec, "T": T, "fit_intercept": _check_bool(self.fit_intercept, "fit_intercept"),
                "max_norm": _check_positive(self.max_norm, "max_norm", allow_none=False),
                "seed": validate_seed(self.random_state, "random_state"),
                "data_norm": _check_data_norm(self.data_norm), "hyper": dict(self.hyper or {})}

    def fit(self, X, y, **fit_params):
        """Fit privately on (X, y) (two or more classes; dense or sparse X); returns self."""
        if fit_params:
            if "sample_weight" in fit_params:
                raise ValueError("sample_weight is not supported: a row of weight c moves the sums the "
                                 "noise is calibrated to by c, so the privacy guarantee would not hold; "
                                 "duplicate or drop rows instead (each copy counts as a row)")
            raise TypeError(f"fit() got unexpected arguments {sorted(fit_params)}")
        params = self._validated()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"y has one class only ({classes.tolist()}); DPLogisticRegression "
                             "needs at least two classes")
        self._warn_privacy()
        n, d = X.shape
        rows = _scaled_rows(X, params["fit_intercept"], params["data_norm"])
        targets = [classes[1]] if len(classes) == 2 else list(classes)
        results = self._fit_models(rows, y, targets, params)
        weights, projected = zip(*(_project(np.asarray(r.w, dtype=np.float64), params["max_norm"])
                                   for r in results))
        if not all(np.isfinite(w).all() for w in weights):
            raise RuntimeError(f"algorithm={self.algorithm!r} produced non-finite weights; use a smaller "
                               "step or fewer iterations")
        if any(projected):
            warnings.warn(f"DPLogisticRegression: the weights left the public radius max_norm="
                          f"{params['max_norm']:g} and were projected onto it", ProjectionWarning, stacklevel=2)
        W = np.stack(weights) / params["data_norm"]
        self.classes_ = classes
        self.coef_ = W[:, :d].copy()
        self.intercept_ = W[:, d].copy() if params["fit_intercept"] else np.zeros(len(weights))
        self.n_iter_ = int(results[0].identity.iterations)
        self.privacy_ledgers_ = [r.ledger for r in results]
        if len(results) == 1:
            self.privacy_ledger_ = results[0].ledger
        self._record(results, params)
        return self

    def _fit_models(self, rows, y, targets, params) -> list:
        """One private binary model per target class; the budget split over K = len(targets) models."""
        spec, K = params["spec"], len(targets)
        problems = [LogisticProblem.from_xy(rows, np.where(y == c, 1.0, -1.0)) for c in targets]
        n = problems[0].n
        delta, rho = resolve_budget(self.epsilon, self.delta, n, self.conversion, LIBRARY_RELATION)
        results = []
        for k, problem in enumerate(problems):
            name = DATASET_NAME if K == 1 else f"{DATASET_NAME}/class-{k}"  # a seeded fit's models draw apart
            if spec.zcdp:               # zCDP: rho/K per model
                (res,) = run_at_rho(problem, name, spec.name, self.epsilon, delta, self.conversion, rho / K,
                                    [(params["seed"], params["T"])], params["hyper"], neighbouring=LIBRARY_RELATION)
            else:                       # (epsilon, delta)-calibrated: (epsilon/K, delta/K) per model
                (res,) = run_algorithm(problem, name, spec.name, self.epsilon / K, [params["seed"]], [params["T"]],
                                       delta=delta / K, conversion=self.conversion, hyper=params["hyper"],
                                       neighbouring=LIBRARY_RELATION)
            if res.ledger.nonprivate:
                raise ValueError(f"hyper={self.hyper!r} makes the run non-private "
                                 f"({'; '.join(res.ledger.nonprivate)}); DPLogisticRegression "
                                 "releases private models only")
            results.append(res)
        self.epsilon_, self.delta_, self.rho_ = float(self.epsilon), float(delta), float(rho)
        return results

    def _record(self, results, params) -> None:
        """``privacy_record_``: the accounting fields of every model's record, the fit's totals."""
        K, zcdp = len(results), params["spec"].zcdp
        records = []
        for res in results:
            rec = result_record(res, self.conversion, res.identity.epsilon, self.delta_ if zcdp else self.delta_ / K)
            records.append({k: rec[k] for k in PRIVACY_RECORD_KEYS if k in rec})
        record = {**records[0], "epsilon": self.epsilon_, "delta": self.delta_, "rho": self.rho_,
                  "guarantee": GUARANTEE, "composition": "one model"}
        if K > 1:
            record["composition"] = (f"one-vs-rest over {K} classes: "
                                     + ("rho/K per model (zCDP composition)" if zcdp
                                        else "(epsilon/K, delta/K) per model (basic composition)"))
            record["per_class"] = records
        self.privacy_record_ = record

    def predict_proba(self, X):
        """Class probabilities: (expit(-s), expit(s)) of the decision s for two classes; one-vs-rest
        expit(s_k) normalised to sum 1 for more (as scikit-learn's one-vs-rest LogisticRegression)."""
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([special.expit(-scores), special.expit(scores)])
        probs = special.expit(scores)
        return probs / probs.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """log(predict_proba(X)), as scikit-learn's LogisticRegression defines it."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


__all__ = ["DEFAULT_ALGORITHM", "DEFAULT_MAX_NORM", "DPLogisticRegression", "DataNormWarning", "GUARANTEE",
           "PRIVACY_RECORD_KEYS", "PrivacyWarning", "ProjectionWarning", "supported_algorithms"]
