"""``DPLogisticRegression``: a scikit-learn classifier trained with ``dpnewton``'s private optimizers.

In the style of diffprivlib's ``LogisticRegression``: a logistic-regression classifier whose fitted
``coef_`` / ``intercept_`` are differentially private. By default it works on raw numeric features:
a share of the budget (:data:`DEFAULT_PREPROCESSING_SHARE`) estimates every feature's range
privately (:class:`dpnewton.preprocessing.PrivateFeatureScaler`), the rest trains the model on the
rows z = [a (clip(x) - center)/half_width, b], projected onto the unit ball
(:mod:`dpnewton.training_rows`). Labels are mapped to -1/+1; more than two classes
are fitted one-vs-rest, the model's budget split across them.

Guarantee, stated once (:data:`GUARANTEE`): the released model (and the released ranges) are
(epsilon, delta)-DP with respect to adding or removing one training row, with the number of rows
private (:mod:`dpnewton.privacy.neighbouring`, relation ``add-remove``).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import sparse, special
from sklearn.base import BaseEstimator
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .api import DATASET_NAME
from .estimator_checks import (check_algorithm, check_bool, check_data_norm, check_iterations, check_positive,
                               check_share, split_budget, supported_algorithms)
from .estimator_warnings import (BUDGET_WARNING_ROWS, PRIVACY_WARNING_MESSAGE, BudgetWarning, PrivacyWarning,
                                 ProjectionWarning, project, project_rows, rows_to_beat_constant)
from .experiment import (DEFAULT_CONVERSION, check_guarantee, check_run, result_record, resolve_budget, run_algorithm,
                         run_at_rho)
from .multinomial import DEFAULT_METHOD as SOFTMAX_METHOD
from .multinomial import default_iterations as softmax_iterations
from .multinomial import fit_multinomial
from .preprocessing import PrivateFeatureScaler, check_bounds
from .privacy.neighbouring import LIBRARY_DELTA, LIBRARY_RELATION, relation_sentence
from .privacy.release import released_ledger, released_record
from .seeding import RunIdentity, validate_seed
from .training_rows import RowMap, data_norm_map, range_map, signed_problems, training_rows

DEFAULT_ALGORITHM = "objpert"
"""Objective perturbation with the tight privacy profile: the best rule with no tuning on the private
data in the study of docs/default_rule.md (five datasets, epsilon in {0.1, 1, 10}, relation
add-remove): within 1.25x of the oracle-tuned best in 9 of 15 cells (median 1.21x, max 3.51x),
against 3 of 15 for tail-averaged DP-GD and 0 for tail-averaged precond-dp-gd with the snr T rule.
It has no iteration count, step size or regulariser to choose: Lambda follows from epsilon alone."""

DEFAULT_MAX_NORM = 100.0
"""Public radius of the released weights on the scaled rows: every fitted w is projected onto
||w|| <= max_norm (post-processing). A margin of 100 already means a probability within 4e-44 of 0 or 1."""

DEFAULT_PREPROCESSING_SHARE = 0.5
"""Share of (epsilon, delta) spent on the private feature ranges when neither ``bounds`` nor
``data_norm`` is given: (0.5 epsilon, 0.5 delta) to the ranges, the rest to the model (basic
composition: they add up to the user's (epsilon, delta)). Chosen without the reported test rows
(benchmarks/results/raw_data_reading.md): on iris and four synthetic raw-feature tasks (10 fits each at
epsilon 1 and 10) share 0.2 / 0.35 / 0.5 / 0.65 gave mean accuracy 0.665 / 0.695 / 0.693 / 0.667, a tie
of 0.35 and 0.5; on the internal 70/30 split of the breast-cancer training rows at epsilon 1 (10 fits)
0.35 / 0.5 gave 0.47 / 0.64, the ranges alone 0.43 / 0.68: few rows with many features need the larger
share, below it a window of noise can win a feature's range."""

GUARANTEE = (f"coef_ and intercept_ are (epsilon, delta)-differentially private {relation_sentence(LIBRARY_RELATION)}")
"""The estimator's guarantee in one sentence (README, docstrings and ``privacy_record_`` say the same)."""

MULTI_CLASS = ("softmax", "ovr")
"""More than two classes: ``"softmax"`` (the default) fits one multinomial model that spends the model's
budget once (:mod:`dpnewton.multinomial`: its per-row sensitivity sqrt(2) does not grow with K);
``"ovr"`` fits one model per class with ``algorithm``, the budget split K ways. Chosen by
benchmarks/results/multiclass.md: at epsilon 1 softmax reaches 0.83 on digits against 0.30 for
one-vs-rest objpert and 0.57 for one-vs-rest DP-GD (standardized features)."""


class DPLogisticRegression(LinearClassifierMixin, BaseEstimator):
    """Differentially private logistic regression (objective perturbation by default).

    Guarantee: coef_ and intercept_ are (epsilon, delta)-differentially private with respect to
    adding or removing one training row, with the number of rows private (:data:`GUARANTEE`). The
    whole fit - the private feature ranges and the model - spends exactly the (epsilon, delta) given.

    How a fit sees the features (one of three, chosen by the parameters, never by the data):

    * default (``bounds=None, data_norm=None``): ``preprocessing_share`` of (epsilon, delta) buys
      per-feature ranges [lo_f, hi_f] from a :class:`~dpnewton.preprocessing.PrivateFeatureScaler`
      (one Gaussian release of per-feature histograms on a public log grid, sensitivity sqrt(d));
      the model gets the rest. Basic composition: (eps_pre + eps_model, delta_pre + delta_model) =
      (epsilon, delta).
    * ``bounds`` (public per-feature ranges): the same rows with those ranges, the whole budget to the model.
    * ``data_norm`` (a public bound on ||[x, 1]||): the rows [x, 1] / data_norm, the whole budget to
      the model; the intercept is then limited to |intercept| <= max_norm / data_norm.

    With ranges, a row is z = [a (clip(x, lo, hi) - c)/h, b], c and h the range's centre and half
    width, b = 1/sqrt(2) and a = sqrt(3/(2d)) (:func:`~dpnewton.training_rows.range_map`; rows longer
    than 1 are projected onto the unit ball): the intercept's weight is not shrunk by the feature
    scale. Without an intercept, or for sparse X, the map is uncentred (c = 0, h = max(|lo|, |hi|)).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter epsilon of the (epsilon, delta) guarantee (the whole fit).
    delta : float or None, default=None
        Privacy parameter delta of the whole fit; None means LIBRARY_DELTA = 1e-10, a public constant
        valid for every n up to 10^9 rows (n^-2 would read the private n; nothing about delta is checked
        against n). ``delta=0``: pure epsilon-DP, with objpert (its pure mode); the private ranges then
        use their Laplace release (:func:`dpnewton.preprocessing.laplace_release`).
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
        Append a constant column b to every row; its weight gives ``intercept_``.
    bounds : sequence of (lo, hi) pairs or None, default=None
        PUBLIC per-feature ranges (known without the private data): features are clipped to them
        and scaled; nothing is spent on preprocessing. Not with ``data_norm``.
    data_norm : float or None, default=None
        A PUBLIC bound on the norm of the rows [x, 1] (or x without an intercept). Rows are divided
        by data_norm and then projected to the unit ball; nothing is spent on preprocessing.
        Choosing it from the private data breaks the guarantee. Prefer it for sparse rows with few
        non-zeros (one-hot data): the default sizes rows for sqrt(d/3) scaled features of norm, so
        a row with k ones reaches norm sqrt(3k/(2d)) (benchmarks/results/raw_data.md: a1a).
        Memory: with data_norm and dense float64 C-ordered X (binary or one-vs-rest) the fit reads X in
        place and copies none of it (:mod:`dpnewton.scaled_rows`); otherwise it holds one working copy.
    preprocessing_share : float in (0, 1), default=DEFAULT_PREPROCESSING_SHARE (0.5)
        Share of (epsilon, delta) spent on the private feature ranges (used only when neither
        ``bounds`` nor ``data_norm`` is given).
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
    multi_class : {"softmax", "ovr"}, default="softmax"
        More than two classes (:data:`MULTI_CLASS`): one private softmax model
        (:func:`dpnewton.multinomial.fit_multinomial`, the model's budget spent once, ``algorithm``
        not used), or one-vs-rest with ``algorithm`` and the budget split across the K models.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted; with two classes ``classes_[1]`` is the positive class.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights on the original features: w[:d] a/h for the weights w on the training rows
        (w[:d] / data_norm with ``data_norm``); one row per class for more than two classes.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        b w[d] - <coef, c> (w[d] / data_norm with ``data_norm``); without fit_intercept -<coef, c>,
        which is 0 (the map is uncentred).
    feature_ranges_ : ndarray of shape (n_features, 2) or None
        The (lo, hi) the features were clipped to: released privately (default) or the public
        ``bounds``; None with ``data_norm``.
    preprocessing_ : PrivateFeatureScaler or None
        The fitted private scaler (default mode only), with its ledger and record.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string column names (a DataFrame).
    n_iter_ : int
        Number of updates of the optimizer (1 for objpert).
    epsilon_, delta_ : float
        The guarantee of the whole fit (delta_ resolved).
    model_epsilon_, model_delta_, rho_ : float
        The model's share and its zCDP budget rho_ from ``conversion`` (objpert, calibrated to
        (epsilon, delta) directly, records it and spends none of it).
    privacy_ledgers_ : list of dpnewton.privacy.PrivacyLedger
        One per model (one-vs-rest: one per class; softmax: one): every release with its sensitivity,
        noise scale and rho, in released form (:func:`dpnewton.privacy.release.released_ledger`). The
        preprocessing's release is on ``preprocessing_.privacy_ledger_``.
    privacy_ledger_ : dpnewton.privacy.PrivacyLedger
        ``privacy_ledgers_[0]`` (two classes only).
    privacy_record_ : dict
        The accounting fields of the fit (:data:`dpnewton.privacy.release.RELEASED_FIELDS`, then ``guarantee``,
        ``composition``, ``model_epsilon``, ``model_delta``, ``preprocessing`` (the scaler's record:
        its release, sigma, rho and the released ranges, or the public source of the ranges) and,
        one-vs-rest, ``per_class``: each model's record). Evaluation fields (loss, accuracy,
        runtime) are not private and are dropped; n is never recorded.

    Warns :class:`BudgetWarning` when a public rule (:func:`rows_to_beat_constant`, from epsilon, d
    and the number of classes only) asks for more than BUDGET_WARNING_ROWS rows.

    Notes
    -----
    decision_function(x) = x coef_ + intercept_ = <z, w>, the margin the optimizer saw in training,
    for every x within the ranges (resp. with ||[x, 1]|| <= data_norm); outside them training saw
    the clipped (resp. shrunk) row.

    Composition across classes (K > 2): softmax spends the model's budget once on one K x p model;
    one-vs-rest (every row in every model) gives each zCDP model rho/K (zCDP adds up, BS16 Lemma 2.3)
    and each objpert model (epsilon/K, delta/K) (basic composition). The set of labels (classes_) is read
    from the data and
    taken as public. Not covered by the guarantee: other preprocessing fitted on the same data, tuning on
    it, and bounds or a data_norm chosen from it (a :class:`PrivacyWarning` says so once per process).
    numpy's floating-point Gaussian sampler is not hardened against floating-point side channels
    (Mironov 2012); the guarantee is that of the idealized mechanism. A ``sample_weight`` is refused
    (None is accepted): a weighted row moves the sums by its weight, so the sensitivities above would
    not hold.
    """

    _privacy_warning_shown = False

    def __init__(self, *, epsilon=1.0, delta=None, algorithm=DEFAULT_ALGORITHM, iterations=None,
                 conversion=DEFAULT_CONVERSION, fit_intercept=True, bounds=None, data_norm=None,
                 preprocessing_share=DEFAULT_PREPROCESSING_SHARE, max_norm=DEFAULT_MAX_NORM, random_state=None,
                 hyper=None, multi_class="softmax"):
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.iterations = iterations
        self.conversion = conversion
        self.fit_intercept = fit_intercept
        self.bounds = bounds
        self.data_norm = data_norm
        self.preprocessing_share = preprocessing_share
        self.max_norm = max_norm
        self.random_state = random_state
        self.hyper = hyper
        self.multi_class = multi_class

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # scikit-learn's convention for a classifier that may score below 0.83 on its 100-row toy
        # problems: at epsilon 1 the private ranges and the model's noise cost accuracy at such n
        tags.classifier_tags.poor_score = True
        return tags

    def _warn_privacy(self) -> None:
        cls = type(self)
        if not cls._privacy_warning_shown:
            cls._privacy_warning_shown = True
            warnings.warn(PRIVACY_WARNING_MESSAGE, PrivacyWarning, stacklevel=3)

    def _validated(self) -> dict:
        """Every parameter checked before any data work; the resolved values."""
        spec = check_algorithm(self.algorithm)
        T = check_iterations(self.iterations, spec)
        if self.hyper is not None and not isinstance(self.hyper, dict):
            raise ValueError(f"hyper={self.hyper!r} must be None or a dict of hyper-parameters")
        if self.multi_class not in MULTI_CLASS:
            raise ValueError(f"multi_class={self.multi_class!r} must be one of {', '.join(MULTI_CLASS)}")
        check_run(spec.name, self.epsilon, self.delta, T, self.conversion, LIBRARY_RELATION, self.hyper)
        check_guarantee(spec.name, self.conversion, self.hyper)
        data_norm = check_data_norm(self.data_norm)
        if data_norm is not None and self.bounds is not None:
            raise ValueError("pass bounds (public per-feature ranges) or data_norm (a public row-norm bound), "
                             "not both")
        private_ranges = data_norm is None and self.bounds is None
        delta = LIBRARY_DELTA if self.delta is None else float(self.delta)
        share = check_share(self.preprocessing_share) if private_ranges else 0.0
        pre_epsilon, model_epsilon = split_budget(self.epsilon, share)
        pre_delta, model_delta = split_budget(delta, share)
        check_run(spec.name, model_epsilon, model_delta, T, self.conversion, LIBRARY_RELATION, self.hyper)
        return {"spec": spec, "T": T, "fit_intercept": check_bool(self.fit_intercept, "fit_intercept"),
                "max_norm": check_positive(self.max_norm, "max_norm", allow_none=False),
                "seed": validate_seed(self.random_state, "random_state"), "data_norm": data_norm,
                "delta": delta, "pre_epsilon": pre_epsilon, "pre_delta": pre_delta, "model_epsilon": model_epsilon,
                "model_delta": model_delta, "hyper": dict(self.hyper or {})}

    def fit(self, X, y, **fit_params):
        """Fit privately on (X, y) (two or more classes; dense or sparse X); returns self. ``sample_weight``
        may be passed as None only (the signature keeps scikit-learn's weight checks away)."""
        if fit_params.pop("sample_weight", None) is not None:
            raise ValueError("sample_weight is not supported: a row of weight c moves the sums the "
                             "noise is calibrated to by c, so the privacy guarantee would not hold; "
                             "duplicate or drop rows instead (each copy counts as a row)")
        if fit_params:
            raise TypeError(f"fit() got unexpected arguments {sorted(fit_params)}")
        params = self._validated()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"y has one class only ({classes.tolist()}); DPLogisticRegression "
                             "needs at least two classes")
        softmax = len(classes) > 2 and self.multi_class == "softmax"
        if softmax and params["model_delta"] == 0:
            raise ValueError("delta=0 (pure epsilon-DP) with more than two classes needs multi_class='ovr' "
                             "(the softmax model is a zCDP mechanism)")
        self._warn_privacy()
        d = X.shape[1]
        models = 1 if softmax else len(classes)
        if rows_to_beat_constant(params["model_epsilon"], d, models) > BUDGET_WARNING_ROWS:
            warnings.warn(f"DPLogisticRegression: with epsilon={params['model_epsilon']:g} for the model, d={d} "
                          f"features and {len(classes)} classes, a fit needs roughly "
                          f"{rows_to_beat_constant(params['model_epsilon'], d, models):,.0f} rows to beat a "
                          "constant prediction (public rule, rows_to_beat_constant); with fewer, expect the "
                          "majority rate. Raise epsilon, drop features, or pass public bounds to save the "
                          "preprocessing share", BudgetWarning, stacklevel=2)
        row_map, scaler = self._row_map(X, params)
        self.epsilon_, self.delta_ = float(self.epsilon), params["delta"]
        W, ledgers, records, composition = (self._fit_softmax(training_rows(X, row_map), y, classes, params)
                                            if softmax else self._fit_binary(X, row_map, y, classes, params))
        W, projected = project(W, params["max_norm"]) if softmax else project_rows(W, params["max_norm"])
        if not np.isfinite(W).all():
            raise RuntimeError(f"algorithm={self.algorithm!r} produced non-finite weights; use a smaller "
                               "step or fewer iterations")
        if projected:
            warnings.warn(f"DPLogisticRegression: the weights left the public radius max_norm="
                          f"{params['max_norm']:g} and were projected onto it", ProjectionWarning, stacklevel=2)
        self.classes_ = classes
        self.multi_class_ = None if len(classes) == 2 else self.multi_class
        self.coef_, self.intercept_ = row_map.to_features(W)
        self.feature_ranges_ = None if params["data_norm"] is not None else np.column_stack([row_map.lower,
                                                                                             row_map.upper])
        self.preprocessing_ = scaler
        self.n_iter_ = int(records[0]["iterations"])
        self.privacy_ledgers_ = ledgers
        if len(ledgers) == 1:
            self.privacy_ledger_ = ledgers[0]
        self._record(records, composition, params, scaler)
        return self

    def _row_map(self, X, params) -> tuple[RowMap, PrivateFeatureScaler | None]:
        """The training rows' map: from data_norm, the public bounds, or the private scaler fitted on
        X with (share x epsilon, share x delta) (then also returned)."""
        d, centered = X.shape[1], params["fit_intercept"] and not sparse.issparse(X)
        if params["data_norm"] is not None:
            return data_norm_map(d, params["data_norm"], params["fit_intercept"]), None
        if self.bounds is not None:
            return range_map(*check_bounds(self.bounds, d), centered, params["fit_intercept"]), None
        scaler = PrivateFeatureScaler(epsilon=params["pre_epsilon"], delta=params["pre_delta"], center=centered,
                                      random_state=params["seed"]).fit(X)
        return range_map(scaler.lower_, scaler.upper_, centered, params["fit_intercept"]), scaler

    def _fit_binary(self, X, row_map, y, classes, params) -> tuple:
        """One private binary model (two classes) or one per class (one-vs-rest), with ``algorithm``: a
        zCDP method gives each of K models rho/K, objpert (epsilon/K, delta/K); the models' problems
        share one buffer of training rows (:func:`~dpnewton.training_rows.signed_problems`). Returns
        (W, released ledgers, released records, composition)."""
        spec = params["spec"]
        targets = [classes[1]] if len(classes) == 2 else list(classes)
        K = len(targets)
        epsilon = params["model_epsilon"]
        delta, rho = resolve_budget(epsilon, params["model_delta"], X.shape[0], self.conversion, LIBRARY_RELATION)
        weights, ledgers, records = [], [], []
        labels = (np.where(y == c, 1.0, -1.0) for c in targets)
        for k, problem in enumerate(signed_problems(X, row_map, labels)):
            name = DATASET_NAME if K == 1 else f"{DATASET_NAME}/class-{k}"  # a seeded fit's models draw apart
            if spec.zcdp:   # zCDP: rho/K per model
                (res,) = run_at_rho(problem, name, spec.name, epsilon, delta, self.conversion, rho / K,
                                    [(params["seed"], params["T"])], params["hyper"], neighbouring=LIBRARY_RELATION)
            else:           # (epsilon, delta)-calibrated: (epsilon/K, delta/K) per model
                (res,) = run_algorithm(problem, name, spec.name, epsilon / K, [params["seed"]], [params["T"]],
                                       delta=delta / K, conversion=self.conversion, hyper=params["hyper"],
                                       neighbouring=LIBRARY_RELATION)
            rec = result_record(res, self.conversion, res.identity.epsilon, delta if spec.zcdp else delta / K)
            weights.append(np.asarray(res.w, dtype=np.float64))
            ledgers.append(released_ledger(res.ledger))
            records.append(released_record(rec, res.ledger))
        self.model_epsilon_, self.model_delta_, self.rho_ = float(epsilon), float(delta), float(rho)
        composition = "one model" if K == 1 else (
            f"one-vs-rest over {K} classes: " + ("rho/K per model (zCDP composition)" if spec.zcdp
                                                 else "(epsilon/K, delta/K) per model (basic composition)"))
        return np.stack(weights), ledgers, records, composition

    def _fit_softmax(self, rows, y, classes, params) -> tuple:
        """One private softmax model over the K classes (:func:`dpnewton.multinomial.fit_multinomial`),
        the model's budget spent once; its generator fresh, or seeded from the fit's identity."""
        epsilon, delta = params["model_epsilon"], params["model_delta"]
        T = softmax_iterations(SOFTMAX_METHOD)
        seed = params["seed"]
        rng = (np.random.default_rng() if seed is None
               else RunIdentity(DATASET_NAME, f"softmax-{SOFTMAX_METHOD}", epsilon, seed, T).generator())
        W, ledger, record = fit_multinomial(rows, np.searchsorted(classes, y), len(classes), epsilon, delta, rng,
                                            method=SOFTMAX_METHOD, conversion=self.conversion, overwrite_rows=True)
        self.model_epsilon_, self.model_delta_, self.rho_ = float(epsilon), float(delta), float(record["rho"])
        composition = record.pop("composition")
        return W, [released_ledger(ledger)], [{**released_record(record, ledger), "seed": seed}], composition

    def _record(self, records, composition, params, scaler) -> None:
        """``privacy_record_``: the released fields of the model(s), the fit's totals and the preprocessing's
        record (nothing computed from the exact data or the private n: :mod:`dpnewton.privacy.release`)."""
        if scaler is not None:
            preprocessing = scaler.privacy_record_
        else:
            source = "data_norm (public row-norm bound)" if params["data_norm"] is not None else "public bounds"
            preprocessing = {"source": source, "epsilon": 0.0, "delta": 0.0}
        record = {**records[0], "epsilon": self.epsilon_, "delta": self.delta_,
                  "model_epsilon": self.model_epsilon_, "model_delta": self.model_delta_,
                  "guarantee": GUARANTEE, "preprocessing": preprocessing,
                  "composition": (f"ranges, then {composition}; basic composition: (epsilon, delta) = "
                                  "preprocessing + model" if scaler is not None else composition)}
        if "rho" in records[0]:
            record["rho"] = self.rho_
        if len(records) > 1:
            record["per_class"] = records
        self.privacy_record_ = record

    def predict_proba(self, X):
        """Class probabilities: (expit(-s), expit(s)) of the decision s for two classes; the softmax of the
        decisions for a softmax model; one-vs-rest expit(s_k) normalised to sum 1 (as scikit-learn's
        one-vs-rest LogisticRegression)."""
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([special.expit(-scores), special.expit(scores)])
        if self.multi_class_ == "softmax":
            return special.softmax(scores, axis=1)
        probs = special.expit(scores)
        sums = probs.sum(axis=1, keepdims=True)
        under = sums[:, 0] == 0.0      # every expit underflowed: its normalised limit is the softmax
        probs[under], sums[under] = special.softmax(scores[under], axis=1), 1.0
        return probs / sums

    def predict_log_proba(self, X):
        """log(predict_proba(X)), as scikit-learn's LogisticRegression defines it."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


__all__ = ["BudgetWarning", "DEFAULT_ALGORITHM", "DEFAULT_MAX_NORM", "DEFAULT_PREPROCESSING_SHARE",
           "DPLogisticRegression", "GUARANTEE", "MULTI_CLASS", "PrivacyWarning", "ProjectionWarning",
           "rows_to_beat_constant", "supported_algorithms"]
